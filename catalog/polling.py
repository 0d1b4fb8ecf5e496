"""The fallback poll: finding partitions in storage whose readiness event never came.

Datasets whose completion signal is a success marker or a manifest name a storage source
and a location template. Datasets whose templates share a parent prefix form a
``StorageGroup``. A sweep lists the parent in one of two ways (``poll_plan.listing_for``):

- flat (S3, regular sweeps, partitions of at most ``flat_max_objects`` objects as measured
  by the group's recent sweeps): the objects themselves, markers and manifests included,
  so nothing is listed inside a partition;
- delimiter (larger or unmeasured partitions, other stores, full sweeps): one entry per
  partition prefix, then one recursive listing inside each prefix holding a partition not
  yet known ready; ready partitions are never listed inside again. A group whose
  partitions all come by event is never listed inside: the hourly pass over recent markers
  (its own flat listing) measures it instead.

Where the listings start and stop is ``poll_plan``'s: each dataset after its newest ready
partition (from the lookback horizon when it has a gap there), so a regular sweep costs
what is new. A sweep lists every dataset of its group at least every
``safety_net_seconds`` (a wide sweep: an early or gap-filling partition, or a missed
event, is found then); the sweeps in between are narrow, listing only the datasets with a
partition due (``poll_cadence.due_now``), so in a dataset-first group with long histories
a dense sweep costs a listing per dataset still waiting, not one per dataset. A full
sweep (a group's first, then at least daily) lists every prefix; the first sweep after
worker start (``recovery``) starts datasets with nothing ready at their first name.

What completed is recorded through ``services.publishing.readiness_found`` (``detected_by = poll``),
which fires the same notifications as a published event; a dataset that otherwise
publishes events has it flagged as a missed event.

Every ``restate_interval_seconds`` a sweep also re-reads the markers (or manifests) of
the group's ready partitions of the last ``restate_window_days``: one rewritten since the
poll (or the pass) first saw it is told as ``partition.restated``
(``rewritten_markers``), without listing every ready partition at every sweep.

A partition whose period starts after now (plus the clock-skew allowance) is left alone
unless its dataset accepts future partitions (``future_partitions``), as a publish of it
would be refused.

Cadence: a group with a poll-only dataset is swept from ``min_interval``, doubling while
nothing new appears up to ``max_interval``, dense again when something does and while one
of its pending poll-only datasets is expected by its learned arrivals (``poll_schedule``,
read by ``poll_cadence``) and, after an empty sweep, while it has found a few partitions
in the last hour (one empty sweep at that rate is chance), waking when the first expected
window opens; never sooner than ``page_interval_seconds`` per page of its listing beyond
the first nor, once it has found a few partitions in the last hour, than it takes to find
about one per page of its listing (``poll_schedule.paced``), and never later than just
before one of its datasets' SLA check (so a poll-only dataset is not called late for want
of a sweep). Datasets that publish events count for none of this: a group whose datasets
all do gets an hourly safety-net sweep. Groups are claimed with a lease under
SKIP LOCKED, so two beats sweep a group once; recording is idempotent in any case. A
beat's pass sweeps the groups falling due within half a beat after it (``DUE_SLACK``), so
a sweep due seconds after a pass is not a whole beat late.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q

import objectstore
from schedules.periods import PartitionKeyError, parse_partition_key

from . import (
    future_partitions,
    metrics,
    poll_cadence,
    poll_plan,
    rewritten_markers,
    storage,
)
from .models import (
    Dataset,
    Partition,
    PartitionRevision,
    StorageGroup,
    StorageSweep,
)
from .partition_files import Verdict, judge, signal_name  # noqa: F401 - Verdict re-exported for callers
from .services import publishing

logger = logging.getLogger(__name__)

SWEEP_HISTORY = timedelta(days=7)
# Sweep a poll-only group this long before one of its datasets' SLA check.
CHECK_MARGIN = timedelta(seconds=30)
# The beat runs the poll every 60 s, and a sweep's ``now`` is when its task ran, a little
# after the beat: a group falling due within half a beat of a pass is swept by that pass,
# not by the next one (a whole beat late, for a sweep due seconds after the pass).
DUE_SLACK = timedelta(seconds=30)


def _config(name: str) -> int:
    return settings.TIDEMARK_POLL[name]


# --- sweeping -----------------------------------------------------------------------------


@dataclass
class SweepReport:
    """One sweep's outcome and cost, as stored in ``StorageSweep``."""

    group: str
    full: bool = False
    listing: str = StorageSweep.Listing.DELIMITER
    objects_per_partition: float | None = None
    list_calls: int = 0
    pages: int = 0
    objects_seen: int = 0
    partitions_checked: int = 0
    partitions_found: int = 0
    missed_events: int = 0
    incomplete: int = 0
    recent_pass: bool = False
    partitions_restated: int = 0
    narrow: bool = False
    datasets_listed: int = 0
    error: str = ""
    duration_ms: int = 0
    found: list[str] = field(default_factory=list)
    listing_pages: int = 0  # pages of the group's listing, before any listing inside
    every_dataset: bool = False  # listed every dataset of the group (not narrow, not one)

    def counts(self) -> dict:
        data = asdict(self)
        data.pop("found")
        data.pop("listing_pages")
        data.pop("every_dataset")
        data.pop("group")
        data.pop("duration_ms")
        return data


def sweep_due(
    *, now: datetime, boot_at: datetime | None = None, limit: int | None = None
) -> list[SweepReport]:
    """Sweep every group that is due at ``now`` (or within ``DUE_SLACK`` after it: half the
    beat's period), and, when ``boot_at`` is given, every group whose last completed sweep
    started before it (a full sweep: recovery after downtime).

    Groups are leased under SKIP LOCKED, so concurrent callers share the work.

    Args:
        now: aware UTC instant.
        boot_at: the worker's start (aware UTC), or None for a regular pass.
        limit: most groups to claim (default ``TIDEMARK_POLL["batch_size"]``).
    """
    reports = []
    claimed = _claim(now=now, boot_at=boot_at, limit=limit or _config("batch_size"))
    for group, full, recovery in claimed:
        reports.append(sweep_group(group, now=now, full=full, recovery=recovery))
    return reports


def _claim(*, now: datetime, boot_at: datetime | None, limit: int):
    due = Q(next_sweep_at__lte=now + DUE_SLACK)
    if boot_at is not None:
        due |= Q(last_swept_at__isnull=True) | Q(last_swept_at__lt=boot_at)
    with transaction.atomic():
        groups = list(
            StorageGroup.objects.select_for_update(skip_locked=True)
            .filter(due)
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
            .order_by("next_sweep_at")[:limit]
        )
        StorageGroup.objects.filter(pk__in=[g.pk for g in groups]).update(
            lease_until=now + timedelta(seconds=_config("lease_seconds"))
        )
    claimed = []
    for group in groups:
        full = group.last_full_sweep_at is None or group.last_full_sweep_at < now - timedelta(
            seconds=_config("full_sweep_seconds")
        )
        # After downtime: every dataset's range, none left out (poll_plan).
        recovery = boot_at is not None and (
            group.last_swept_at is None or group.last_swept_at < boot_at
        )
        claimed.append((group, full, recovery))
    return claimed


def sweep_group(
    group: StorageGroup,
    *,
    now: datetime,
    full: bool = False,
    recovery: bool = False,
    only: Dataset | None = None,
    lister: objectstore.Lister | None = None,
) -> SweepReport:
    """Sweep one group now, record what it found, store the sweep and schedule the next.

    Args:
        full: list every partition prefix (no horizon, nobody left out), with a delimiter.
        recovery: the first sweep after downtime: no dataset left out (``poll_plan``).
        only: restrict the sweep to this dataset of the group (``poll_storage --dataset``).
        lister: a ready lister (tests and benchmarks count through it).

    Storage errors are caught and stored on the sweep (the group keeps its cadence); they
    never stop other groups.
    """
    report = SweepReport(group=str(group), full=full)
    recent = only is None and rewritten_markers.due(group, now=now)
    report.narrow = only is None and not (full or recovery or recent) and _wide_lately(group, now)
    report.every_dataset = only is None and not report.narrow
    started = time.monotonic()
    found_any = False
    poll_only: list[Dataset] = []
    try:
        source = storage.sources().get(group.source)
        if source is None:
            raise objectstore.StorageError(f"storage source {group.source!r} is not configured")
        lister = lister or objectstore.Lister(source)
        datasets = list(
            group.datasets.filter(completion_signal__in=Dataset.POLLED_SIGNALS)
            .exclude(lifecycle=Dataset.Lifecycle.RETIRED)
            .order_by("pk")
        )
        if only is not None:
            datasets = [d for d in datasets if d.pk == only.pk]
        found_any, poll_only = _sweep(
            group,
            datasets,
            lister,
            report,
            now=now,
            full=full,
            recovery=recovery,
            recent=recent,
        )
    except objectstore.StorageError as exc:
        report.error = str(exc)[:2000]
        logger.warning("poll of %s failed: %s", group, exc)
    finally:
        if lister is not None:
            report.list_calls = lister.counts.list_calls
            report.pages = lister.counts.pages
            report.objects_seen = lister.counts.objects
        report.duration_ms = int((time.monotonic() - started) * 1000)
    _finish(group, report, now=now, found_any=found_any, poll_only=poll_only)
    metrics.record_sweep(
        error=bool(report.error),
        list_calls=report.list_calls,
        missed_events=report.missed_events,
    )
    logger.info("poll %s: %s in %d ms", group, report.counts(), report.duration_ms)
    return report


def _sweep(group, datasets, lister, report, *, now, full, recovery, recent):
    """The sweep proper; returns ``(found_any, the datasets that publish no events)``.

    ``recent``: also make the pass over recent markers (``rewritten_markers``). A flat
    listing then starts each dataset no later than its oldest ready partition in the
    pass's window, so the pass reads what it already listed and costs no listing of its
    own (in a dataset-first group, not one more listing per dataset).

    A narrow sweep (``report.narrow``) lists only the datasets with a partition due
    (``poll_cadence.due_now``).
    """
    if not datasets:
        return False, []
    by_event = poll_cadence.publishing_ids(datasets, now=now)
    soon = now + CHECK_MARGIN + DUE_SLACK  # a sweep before an SLA check runs this early
    listed = None  # every dataset
    if report.narrow:
        listed = poll_cadence.due_now(datasets, by_event, now=now, checks_by=soon)
    report.datasets_listed = len(datasets) if listed is None else len(listed)
    locations = {
        d.pk: objectstore.parse_template(
            d.location_template, partitioned=d.partitioning != Dataset.Partitioning.NONE
        )
        for d in datasets
    }
    report.listing, learned = poll_plan.listing_for(group, lister.source, full=full)
    flat = report.listing == StorageSweep.Listing.FLAT
    window = rewritten_markers.window_of(datasets, now=now) if recent else None
    runs = poll_plan.plan(
        datasets,
        locations,
        now=now,
        full=full,
        recovery=recovery,
        entries_per_partition=learned if flat else 1.0,
        also_from=window.first_keys if window is not None and flat else None,
        listed=listed,
    )
    # name -> its objects (relative to it), when the listing was flat
    contents: dict[str, list[objectstore.StoredObject]] = {}
    names: list[str] = []
    for run in runs:
        if flat:
            for o in lister.flat(group.prefix, start_after=run.start_after, stop=run.stop):
                name, sep, rest = o.name.partition("/")
                if sep:
                    contents.setdefault(name, []).append(dataclasses.replace(o, name=rest))
        else:
            names.extend(
                lister.child_prefixes(group.prefix, start_after=run.start_after, stop=run.stop)
            )
    report.listing_pages = lister.counts.pages
    if flat:
        names = list(contents)
        if names:
            # What the runs hold, not what their last pages returned past their stops.
            held = sum(len(objects) for objects in contents.values())
            report.objects_per_partition = held / len(names)

    # (dataset id, key) -> listed segment
    # Datasets by the literal text before their key, so matching a listed name costs its
    # length, not the number of datasets in the group.
    by_prefix: dict[str, list[Dataset]] = {}
    for dataset in datasets:
        by_prefix.setdefault(locations[dataset.pk].segment_prefix, []).append(dataset)
    candidates: dict[tuple[int, str], str] = {}
    for name in names:
        matching = [d for i in range(len(name) + 1) for d in by_prefix.get(name[:i], ())]
        for dataset in matching:
            key = locations[dataset.pk].key_of(name)
            if key is None:
                continue
            try:
                interval = parse_partition_key(
                    dataset.partitioning, key, dataset.partition_timezone
                )
            except PartitionKeyError:
                continue
            if not future_partitions.accepted(dataset, interval, now=now):
                continue  # a period that has not started is a mistyped path, not data
            candidates[(dataset.pk, key)] = name

    known = _known_partitions(datasets, candidates)
    ready = {k for k, (state, _) in known.items() if state == PartitionRevision.State.READY}

    pending: dict[str, list[tuple[Dataset, str]]] = {}
    by_pk = {d.pk: d for d in datasets}
    for (dataset_id, key), name in candidates.items():
        # A producer's "failed" stands until it publishes again; a stale marker does not
        # overrule it.
        if (dataset_id, key) not in ready and known.get((dataset_id, key), ("",))[0] != (
            PartitionRevision.State.FAILED
        ):
            pending.setdefault(name, []).append((by_pk[dataset_id], key))

    found_any = False
    inside_objects = 0
    for name, members in sorted(pending.items()):
        if flat:
            objects = contents[name]
        else:
            objects = lister.objects(f"{group.prefix}{name}/")
            inside_objects += len(objects)
        for dataset, key in members:
            report.partitions_checked += 1
            inner = locations[dataset.pk].inner
            mine = [
                dataclasses.replace(o, name=o.name[len(inner) :])
                for o in objects
                if o.name.startswith(inner)
            ]
            base = f"{group.prefix}{name}/{inner}"
            verdict = judge(
                dataset,
                mine,
                lambda rel, size, base=base: lister.read_json(base + rel, size=size),
            )
            missed = dataset.pk in by_event
            if verdict.complete:
                if publishing.readiness_found(
                    dataset=dataset,
                    partition=key,
                    manifest=verdict.manifest,
                    found={**(verdict.found or {}), "reason": verdict.reason},
                    missed_event=missed,
                    now=now,
                    marker=_marker(dataset, mine),
                ):
                    found_any = True
                    report.partitions_found += 1
                    report.missed_events += int(missed)
                    report.found.append(f"{dataset} {key or '-'}")
            elif verdict.found is not None:
                report.incomplete += 1
                publishing.readiness_incomplete(
                    dataset=dataset,
                    partition=key,
                    manifest=verdict.manifest,
                    found={**verdict.found, "reason": verdict.reason},
                    now=now,
                )
    if not flat and pending:
        report.objects_per_partition = inside_objects / len(pending)
    if window is not None:
        report.recent_pass = True
        passed = rewritten_markers.run(
            group,
            datasets,
            lister,
            now=now,
            window=window,
            listed=contents if flat else None,
            entries_per_partition=report.objects_per_partition or learned,
        )
        report.partitions_restated = len(passed.restated)
        if report.objects_per_partition is None:
            # Measured by the pass's own flat listing when nothing was listed inside.
            report.objects_per_partition = passed.objects_per_partition
        report.found.extend(f"{name} (restated)" for name in passed.restated)
    return found_any, [d for d in datasets if d.pk not in by_event]


def _wide_lately(group: StorageGroup, now: datetime) -> bool:
    """Whether the group's last sweep of every dataset is recent enough for this one to
    be narrow: it started less than ``safety_net_seconds`` before ``now`` (less
    ``DUE_SLACK``, as a sweep due then may run that much early)."""
    last = group.last_wide_sweep_at
    wide_every = timedelta(seconds=_config("safety_net_seconds"))
    return last is not None and now < last + wide_every - DUE_SLACK


def _marker(dataset: Dataset, objects) -> tuple[str, datetime | None] | None:
    """``(etag, modified)`` of the dataset's success marker or manifest among ``objects``
    (names relative to the partition), kept as the baseline a rewrite is judged against
    (``rewritten_markers``); None when the store gives neither."""
    signal = signal_name(dataset)
    for o in objects:
        if o.name == signal and (o.etag or o.modified is not None):
            return o.etag, o.modified
    return None


def _known_partitions(datasets, candidates) -> dict[tuple[int, str], tuple[str, str]]:
    """``{(dataset id, key): (state, detected_by)}`` of the listed partitions we know.

    Queried by chunks of datasets x chunks of distinct keys (a few queries, whatever the
    number of datasets), then narrowed to the listed pairs.
    """
    dataset_ids = sorted({dataset_id for dataset_id, _ in candidates})
    keys = sorted({key for _, key in candidates})
    known = {}
    for d in range(0, len(dataset_ids), 500):
        for k in range(0, len(keys), 500):
            rows = Partition.objects.filter(
                dataset_id__in=dataset_ids[d : d + 500], key__in=keys[k : k + 500]
            ).values_list(
                "dataset_id", "key", "current_revision__state", "current_revision__detected_by"
            )
            for dataset_id, key, state, detected_by in rows:
                if (dataset_id, key) in candidates:
                    known[(dataset_id, key)] = (state, detected_by)
    return known


def _finish(group, report, *, now, found_any, poll_only) -> None:
    """Store the sweep and schedule the group's next one; releases the lease.

    ``poll_only``: the group's datasets that publish no readiness events. With none, the
    hourly safety net; with some, ``poll_schedule.next_sweep`` from what they expect.
    """
    if report.error:
        interval = group.interval_seconds
        next_at = now + timedelta(seconds=interval)
    elif not poll_only:
        interval = _config("safety_net_seconds")
        next_at = now + timedelta(seconds=interval)
    else:
        interval, next_at = poll_cadence.next_sweep(
            group,
            poll_only,
            now=now,
            found=found_any,
            found_now=report.partitions_found,
            pages=report.listing_pages,
        )
    if poll_only:
        next_at = min(next_at, _before_next_check(group, now=now, default=next_at))
    # Every dataset is listed at least every safety_net_seconds (a narrow sweep lists only
    # those with a partition due). A failed sweep keeps its interval instead: the next one
    # after it lists every dataset if that is due.
    if not report.error:
        last_wide = now if report.every_dataset else group.last_wide_sweep_at
        if last_wide is not None:
            next_at = min(next_at, last_wide + timedelta(seconds=_config("safety_net_seconds")))
    finished = now + timedelta(seconds=report.duration_ms / 1000)
    with transaction.atomic():
        StorageSweep.objects.create(
            group=group,
            started_at=now,
            finished_at=finished,
            **report.counts(),
        )
        changes = {
            "lease_until": None,
            "interval_seconds": interval,
            "next_sweep_at": next_at,
            "mode": StorageGroup.Mode.ADAPTIVE if poll_only else StorageGroup.Mode.SAFETY_NET,
        }
        if not report.error:
            changes["last_swept_at"] = now
            if report.every_dataset:
                changes["last_wide_sweep_at"] = now
            if report.full and report.every_dataset:
                changes["last_full_sweep_at"] = now
            if report.recent_pass or group.last_recent_pass_at is None:
                # The first sweep starts the clock of the pass over recent markers.
                changes["last_recent_pass_at"] = now
        if found_any:
            changes["last_found_at"] = now
        StorageGroup.objects.filter(pk=group.pk).update(**changes)
        group.sweeps.filter(started_at__lt=now - SWEEP_HISTORY).delete()


def _before_next_check(group, *, now: datetime, default: datetime) -> datetime:
    """Just before the earliest SLA check of the group's datasets that this sweep was not
    just before (a narrow sweep lists a dataset only then, ``poll_cadence.due_now``): a
    check already due, or one this sweep covered, does not hide the next one."""
    ahead = group.datasets.filter(next_check_at__gt=now + CHECK_MARGIN + DUE_SLACK)
    earliest = ahead.aggregate(at=Min("next_check_at"))["at"]
    if earliest is None or earliest - CHECK_MARGIN <= now:
        return default
    return earliest - CHECK_MARGIN


def sweep_dataset(dataset: Dataset, *, now: datetime, full: bool = True) -> SweepReport:
    """Sweep the group of one dataset now, for that dataset only (operators' command).

    Raises:
        ValueError: the dataset is not polled (no marker/manifest signal or no location).
    """
    if dataset.poll_group_id is None:
        raise ValueError(
            f"{dataset} is not polled: it needs a success_marker or manifest completion "
            "signal, a storage_source and a location_template"
        )
    return sweep_group(dataset.poll_group, now=now, full=full, only=dataset)
