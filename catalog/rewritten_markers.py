"""The fallback poll's pass over recent markers: a success marker or manifest rewritten
under a partition already ready is a restatement.

The poll keeps, on the revision it makes ready, the ETag and modification time of the
marker (or manifest) it saw (``PartitionRevision.marker_etag``/``marker_modified_at``).
Every ``restate_interval_seconds`` (default hourly; counted from a group's first sweep) a
sweep of the group also re-reads the markers of its ready partitions whose period started
within the last ``restate_window_days`` (default 7), and for each:

- no baseline yet (published by event, or ready before this pass existed): the marker
  seen now becomes it, and nothing is told;
- the same ETag and time: nothing;
- a new ETag or time, older than ``restate_settle_seconds`` (default 10 minutes; a newer
  one waits for the next pass, as the producer's own publish of the new version may be on
  its way, and a revision it publishes starts without a baseline): the partition's files
  are judged as any find is (``partition_files.judge``: the marker is there, or the data
  matches the new manifest) and, when complete, published as a new version derived from
  the object (``version_for``) through the publish path: ``partition.restated``,
  ``detected_by = poll``. Published again, that version is a no-op, so a second pass
  seeing the same rewrite tells nothing. A manifest that the data does not match (yet) is
  counted as incomplete and looked at again by the next pass; readers keep the last ready
  revision;
- no marker (deleted): nothing. A deletion is neither a restatement nor a retraction;
  the partition stays ready and its baseline is kept, so a marker written back later is
  told as a restatement.

Cost, per pass and group, counted in the sweep's List calls: on S3, when the sweep lists
flat (partitions of few objects), its listing starts each dataset at its oldest ready
partition in the window instead of after its newest, so the pass makes no listing of its
own: it costs a page per 1,000 objects in the window. Otherwise (a group listed by
partition prefix), one flat listing (no delimiter) per run of ``poll_plan.plan_recent``:
one per group in date-first layouts and for dataset-first datasets whose history before
the window is short, else one per dataset, plus a page per 1,000 objects in the window.
Partitions older than the window are never listed. On other stores, one recursive
listing per ready partition in the window. A manifest is read only when it changed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q

import objectstore

from . import poll_plan
from .models import Dataset, Partition, PartitionRevision, StorageGroup
from .models.partitions import MARKER_ETAG_KEPT
from .partition_files import judge, signal_name
from .services import publishing


def _config(name: str) -> int:
    return settings.TIDEMARK_POLL[name]


@dataclass
class PassReport:
    """What one pass saw: ready partitions whose marker was looked at, baselines recorded,
    restatements told (``"<dataset> <key>"``), rewrites not complete, waiting to settle,
    and markers missing; and, when it made a flat listing of its own, the objects per
    partition that listing held (None otherwise)."""

    checked: int = 0
    adopted: int = 0
    restated: list[str] = field(default_factory=list)
    incomplete: int = 0
    settling: int = 0
    missing: int = 0
    objects_per_partition: float | None = None


@dataclass(frozen=True)
class _Ready:
    dataset_id: int
    key: str
    revision_id: int
    etag: str
    modified: datetime | None


@dataclass(frozen=True)
class Window:
    """The ready partitions a pass looks at (their current revision and its baseline),
    each dataset's oldest such key, and how many partitions each has before the window."""

    ready: list[_Ready]
    first_keys: dict[int, str]
    history: dict[int, int]


def due(group: StorageGroup, *, now: datetime) -> bool:
    """Whether a sweep of ``group`` at ``now`` also makes the pass: its last pass (or its
    first sweep) is at least ``restate_interval_seconds`` old; never when that is 0."""
    interval = _config("restate_interval_seconds")
    if interval <= 0 or group.last_recent_pass_at is None:
        return False
    return group.last_recent_pass_at <= now - timedelta(seconds=interval)


def version_for(obj: objectstore.StoredObject) -> str:
    """The version a rewrite of ``obj`` is published as: ``storage-`` and its
    modification time (UTC, to the microsecond when it has them), then its ETag."""
    parts = ["storage"]
    if obj.modified is not None:
        stamp = obj.modified.strftime("%Y%m%dT%H%M%S")
        if obj.modified.microsecond:
            stamp += f".{obj.modified.microsecond:06d}"
        parts.append(stamp + "Z")
    if obj.etag:
        parts.append(obj.etag[:64])
    return "-".join(parts)


def changed(ready: _Ready, obj: objectstore.StoredObject) -> bool:
    """Whether ``obj`` is another version than the baseline: its ETag or its time differs
    (each compared only when both sides know it)."""
    return bool(
        (obj.etag and ready.etag and obj.etag[:MARKER_ETAG_KEPT] != ready.etag)
        or (obj.modified and ready.modified and obj.modified != ready.modified)
    )


def run(
    group: StorageGroup,
    datasets: list[Dataset],
    lister: objectstore.Lister,
    *,
    now: datetime,
    window: Window | None = None,
    listed: dict[str, list[objectstore.StoredObject]] | None = None,
    entries_per_partition: float = 1.0,
) -> PassReport:
    """Re-read the markers of ``group``'s recent ready partitions and tell the rewritten
    ones as restatements (the module's rules).

    Args:
        datasets: the group's polled datasets.
        lister: the sweep's lister (its counts include this pass).
        now: aware UTC instant of the sweep.
        window: ``window_of(datasets, now=now)`` if already read.
        listed: the sweep's flat listing, ``{partition name: objects relative to it}``,
            when it covered the window (``poll_plan.plan(also_from=...)``): nothing more
            is listed.
        entries_per_partition: objects per partition as the group's sweeps measured them.

    Raises:
        objectstore.StorageError: the store failed (what was told before stays told).
    """
    report = PassReport()
    settle = now - timedelta(seconds=_config("restate_settle_seconds"))
    if window is None:
        window = window_of(datasets, now=now)
    if not window.ready:
        return report
    locations = {
        d.pk: objectstore.parse_template(
            d.location_template, partitioned=d.partitioning != Dataset.Partitioning.NONE
        )
        for d in datasets
    }

    def name_of(ready: _Ready) -> str:
        location = locations[ready.dataset_id]
        return location.segment_for(ready.key) if location.partitioned else location.segment_prefix

    if listed is not None:

        def objects_of(name: str) -> list[objectstore.StoredObject]:
            return listed.get(name, [])
    elif lister.source.protocol == "s3":
        contents: dict[str, list[objectstore.StoredObject]] = {}
        runs = poll_plan.plan_recent(
            locations,
            window.first_keys,
            window.history,
            entries_per_partition=entries_per_partition,
        )
        for run_ in runs:
            for o in lister.flat(group.prefix, start_after=run_.start_after, stop=run_.stop):
                name, sep, rest = o.name.partition("/")
                if sep:
                    contents.setdefault(name, []).append(dataclasses.replace(o, name=rest))
        if contents:
            # A group listed by prefix whose partitions all came by event is never listed
            # inside; this listing measures it, so its next sweeps may list flat.
            held = sum(len(objects) for objects in contents.values())
            report.objects_per_partition = held / len(contents)

        def objects_of(name: str) -> list[objectstore.StoredObject]:
            return contents.get(name, [])
    else:

        def objects_of(name: str) -> list[objectstore.StoredObject]:
            return lister.objects(f"{group.prefix}{name}/")

    by_pk = {d.pk: d for d in datasets}
    adopt: list[PartitionRevision] = []
    for ready in window.ready:
        dataset, name = by_pk[ready.dataset_id], name_of(ready)
        inner = locations[dataset.pk].inner
        mine = [
            dataclasses.replace(o, name=o.name[len(inner) :])
            for o in objects_of(name)
            if o.name.startswith(inner)
        ]
        report.checked += 1
        signal = signal_name(dataset)
        obj = next((o for o in mine if o.name == signal), None)
        if obj is None:
            report.missing += 1
            continue
        if not obj.etag and obj.modified is None:
            continue  # the store says nothing to compare with
        baseline = PartitionRevision(
            pk=ready.revision_id,
            marker_etag=obj.etag[:MARKER_ETAG_KEPT],
            marker_modified_at=obj.modified,
        )
        if not ready.etag and ready.modified is None:
            adopt.append(baseline)
            report.adopted += 1
            continue
        if not changed(ready, obj):
            continue
        if obj.modified is not None and obj.modified > settle:
            report.settling += 1
            continue
        base = f"{group.prefix}{name}/{inner}"
        verdict = judge(
            dataset, mine, lambda rel, size, base=base: lister.read_json(base + rel, size=size)
        )
        if not verdict.complete:
            report.incomplete += 1
            continue
        if publishing.readiness_restated(
            dataset=dataset,
            partition=ready.key,
            version=version_for(obj),
            manifest=verdict.manifest,
            found={**(verdict.found or {}), "reason": f"{signal} rewritten; {verdict.reason}"},
            marker=(obj.etag, obj.modified),
            now=now,
        ):
            report.restated.append(f"{dataset} {ready.key or '-'}")
        else:
            adopt.append(baseline)  # that version exists already: nothing more to tell
    PartitionRevision.objects.bulk_update(
        adopt, ["marker_etag", "marker_modified_at"], batch_size=500
    )
    return report


def window_of(datasets: list[Dataset], *, now: datetime) -> Window:
    """What a pass at ``now`` looks at: the datasets' ready partitions whose period started
    within ``restate_window_days`` before ``now`` (and unpartitioned ones); a few queries
    per 500 datasets."""
    since = now - timedelta(days=_config("restate_window_days"))
    ids = [d.pk for d in datasets]
    found: list[_Ready] = []
    first: dict[int, tuple] = {}
    history: dict[int, int] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        rows = (
            Partition.objects.filter(
                dataset_id__in=chunk, current_revision__state=PartitionRevision.State.READY
            )
            .filter(Q(start_at__gte=since) | Q(start_at__isnull=True))
            .order_by("dataset_id", "start_at")
            .values_list(
                "dataset_id",
                "key",
                "start_at",
                "current_revision_id",
                "current_revision__marker_etag",
                "current_revision__marker_modified_at",
            )
        )
        for dataset_id, key, start_at, revision_id, etag, modified in rows:
            found.append(_Ready(dataset_id, key, revision_id, etag, modified))
            if dataset_id not in first or (start_at and start_at < first[dataset_id][1]):
                first[dataset_id] = (key, start_at or since)
        history.update(
            Partition.objects.filter(dataset_id__in=chunk, start_at__lt=since)
            .values_list("dataset_id")
            .annotate(n=Count("pk"))
            .values_list("dataset_id", "n")
        )
    return Window(found, {d: key for d, (key, _) in first.items()}, history)
