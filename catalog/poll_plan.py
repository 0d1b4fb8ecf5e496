"""How a sweep of a storage group lists (``listing_for``: flat or by partition prefix) and
where it starts and stops: the cost of a sweep follows what is new in storage, not what
exists, whatever the folder order.

Each dataset of a group owns the names of its parent that start with its segment prefix
(``t042_`` in ``landing/t042_{partition}/``; ``dt=`` or nothing in date-first layouts). A
regular sweep lists a dataset's names only after its newest ready partition (or from its
oldest pending one within the lookback window, if older). A dataset with nothing ready, or
with a period missing between the lookback horizon and its newest ready partition (a gap a
late partition may still fill), starts at the lookback horizon, as every dataset did
before listings were planned. No dataset is left out: a partition published before its
period ends (datasets accepting future partitions, producers writing early) and a late
partition filling a gap within the lookback window are found by the group's next sweep.

The datasets' ranges, in name order, become listings: one listing runs on past a dataset's
history when that history is shorter than one page (reading it costs less than starting a
new listing), and a new listing with ``StartAfter`` skips it otherwise. So a group of
date-first partitions is one listing from the oldest partition not yet ready, and a group
of dataset-first partitions with years of history is at most one short listing per dataset.

A narrow sweep lists only some of the datasets (``listed``: those with a partition due,
``polling``): the others' names are passed over when that costs less than a page, and
skipped with a new listing otherwise, so in a dataset-first group with years of history a
narrow sweep costs a listing per dataset it lists, not one per dataset of the group.

A recovery sweep (after the worker was down) starts a dataset with nothing ready at its
first name; a full sweep lists everything with one listing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection
from django.db.models import Count, Min, OuterRef, Q, Subquery

from objectstore import PAGE_SIZE
from schedules.periods import period_containing

from .models import Dataset, Partition, PartitionRevision, StorageGroup, StorageSweep

# How many recent sweeps that measured objects per partition choose a group's listing.
LEARN_SWEEPS = 10


def listing_for(group: StorageGroup, source, *, full: bool) -> tuple[str, float]:
    """How to list ``group`` now: ``(StorageSweep.Listing, objects per partition)``.

    Flat when the source is S3, the sweep is not full (a full sweep reads every partition
    ever written: one entry each with a delimiter) and the group's last sweeps that
    measured it saw at most ``flat_max_objects`` objects per partition on average; a
    delimiter listing (partition prefixes, then inside those not yet ready) otherwise,
    including for a group never measured. Objects per partition is 1.0 when unmeasured.
    """
    if full or source.protocol != "s3":
        return StorageSweep.Listing.DELIMITER, 1.0
    measured = list(
        group.sweeps.filter(objects_per_partition__isnull=False, error="")
        .order_by("-started_at")
        .values_list("objects_per_partition", flat=True)[:LEARN_SWEEPS]
    )
    if not measured:
        return StorageSweep.Listing.DELIMITER, 1.0
    mean = sum(measured) / len(measured)
    if mean <= settings.TIDEMARK_POLL["flat_max_objects"]:
        return StorageSweep.Listing.FLAT, max(mean, 1.0)
    return StorageSweep.Listing.DELIMITER, mean


@dataclass(frozen=True)
class Run:
    """One listing of the group's parent: names after ``start_after`` (None: from the
    first) and before ``stop`` (None: to the end), both relative to the parent."""

    start_after: str | None
    stop: str | None


@dataclass
class _Range:
    prefix: str
    start: str | None  # StartAfter; None: from the first name under ``prefix``
    history: int  # partitions known before ``start`` (what a run passing over it reads)
    listed: bool = True  # False: a dataset this sweep does not list (all of it is history)


def _successor(prefix: str) -> str | None:
    """The first name that no longer starts with ``prefix`` (None for ``""``)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else None


def _before(prefix: str) -> str | None:
    """A StartAfter that keeps every name starting with ``prefix``."""
    return prefix[:-1] if prefix else None


def plan(
    datasets: list[Dataset],
    locations: dict,
    *,
    now: datetime,
    full: bool = False,
    recovery: bool = False,
    entries_per_partition: float = 1.0,
    also_from: dict[int, str] | None = None,
    listed: set[int] | None = None,
) -> list[Run]:
    """The listings one sweep makes, in name order (none when ``listed`` is empty).

    Args:
        datasets: the group's polled datasets.
        locations: ``{dataset id: objectstore.Location}``.
        full: list everything (one run).
        recovery: start datasets with nothing ready at their first name.
        entries_per_partition: what passing over one known partition costs in listed
            entries: 1 for a delimiter listing, the objects per partition for a flat one.
        also_from: ``{dataset id: key}``: list those datasets from that partition on at
            least (the pass over recent markers, ``rewritten_markers``, reads them).
        listed: ids of the datasets to list (a narrow sweep); None lists every one.
    """
    if full or not datasets:
        return [Run(None, None)]
    if listed is not None and not listed.intersection(d.pk for d in datasets):
        return []
    lookback = timedelta(days=settings.TIDEMARK_POLL["lookback_days"])
    since = now - lookback
    newest, pending, counts, recent = _known(datasets, since=since)
    ranges: list[_Range] = []
    for dataset in datasets:
        location = locations[dataset.pk]
        if listed is not None and dataset.pk not in listed:
            prefix = location.segment_prefix + ("" if location.partitioned else "/")
            ranges.append(_Range(prefix, None, counts.get(dataset.pk, 0), listed=False))
            continue
        if not location.partitioned:
            ranges.append(_Range(location.segment_prefix + "/", None, 0))
            continue
        starts: list[str | None] = []
        horizon = period_containing(since, dataset.partitioning, dataset.partition_timezone)
        if dataset.pk in newest and not _gap(dataset, newest[dataset.pk], recent, since):
            key, _ = newest[dataset.pk]
            starts.append(location.segment_for(key) + "0")  # "x/" < "x0": after all of x/
        elif recovery and dataset.pk not in newest:
            starts.append(None)
        else:
            starts.append(location.segment_for(horizon.key))
        if dataset.pk in pending:
            starts.append(location.segment_for(pending[dataset.pk]))
        if also_from and dataset.pk in also_from:
            starts.append(location.segment_for(also_from[dataset.pk]))
        start = None if None in starts else min(starts)
        history = counts.get(dataset.pk, 0) if start is not None else 0
        ranges.append(_Range(location.segment_prefix, start, history))
    return _runs(_nest(ranges), entries_per_partition)


def _gap(dataset: Dataset, newest: tuple, recent: dict, since: datetime) -> bool:
    """Whether a period between the lookback horizon (``since``; or the dataset's first
    ready partition when it has none older) and its newest ready partition has no ready
    partition: fewer ready partitions there than periods."""
    _, newest_end = newest
    count, first_start, older = recent.get(dataset.pk, (0, None, False))
    if first_start is None:
        return False  # the newest ready partition is older than the window
    if older:
        first = period_containing(since, dataset.partitioning, dataset.partition_timezone)
        if first.start < since:
            first = period_containing(first.end, dataset.partitioning, dataset.partition_timezone)
        first_start = first.start
    return count < _periods(dataset, first_start, newest_end)


def _periods(dataset: Dataset, start: datetime, end: datetime) -> int:
    """How many periods of ``dataset`` lie in ``[start, end)`` (both period bounds)."""
    zone = ZoneInfo(dataset.partition_timezone)
    if dataset.partitioning == Dataset.Partitioning.HOURLY:
        # One key per hour of wall-clock time that exists: a fall-back change's repeated
        # hour is one key (two real hours), a spring-forward change's skipped hour none.
        real = end - start
        wall = end.astimezone(zone).replace(tzinfo=None) - start.astimezone(zone).replace(
            tzinfo=None
        )
        return round(min(real, wall) / timedelta(hours=1))
    first, last = start.astimezone(zone), end.astimezone(zone)
    if dataset.partitioning == Dataset.Partitioning.DAILY:
        return (last.date() - first.date()).days
    return (last.year - first.year) * 12 + last.month - first.month


def _nest(ranges: list[_Range]) -> list[_Range]:
    """Merge ranges whose prefix lies inside another's (``""`` holds every name): listed
    when one of them is, from the earliest start of those listed."""
    ranges.sort(key=lambda r: (r.prefix, not r.listed))
    merged: list[_Range] = []
    for r in ranges:
        outer = merged[-1] if merged else None
        if outer is None or not r.prefix.startswith(outer.prefix):
            merged.append(_Range(r.prefix, r.start, r.history, r.listed))
            continue
        if r.listed:
            starts = [r.start, outer.start] if outer.listed else [r.start]
            outer.start = None if None in starts else min(starts)
            outer.listed = True
        outer.history += r.history
    return merged


def _runs(ranges: list[_Range], per_entry: float) -> list[Run]:
    runs: list[Run] = []
    passed = 0.0  # entries of the datasets not listed since the current run's end
    for r in ranges:
        if not r.listed:
            passed += r.history * per_entry
            continue
        start = r.start if r.start is not None else _before(r.prefix)
        # Entries between the current run's end and this range's start: the datasets not
        # listed in between, and this one's history.
        if runs and passed + r.history * per_entry < PAGE_SIZE:
            runs[-1] = Run(runs[-1].start_after, _successor(r.prefix))
        else:
            runs.append(Run(start, _successor(r.prefix)))
        passed = 0.0
    return runs


def _first_per_dataset(partitions, *, order: str, fields: tuple[str, ...]) -> list[tuple]:
    """``(dataset_id, *fields)`` of each dataset's first partition among ``partitions`` by
    ``order`` (a field name, ``-`` for descending): ``DISTINCT ON`` where the database has
    it (PostgreSQL), one correlated subquery elsewhere (the embedded SQLite mode)."""
    if connection.features.can_distinct_on_fields:
        ordered = partitions.order_by("dataset_id", order).distinct("dataset_id")
        return list(ordered.values_list("dataset_id", *fields))
    first = partitions.filter(dataset_id=OuterRef("dataset_id")).order_by(order, "pk")
    chosen = partitions.filter(pk=Subquery(first.values("pk")[:1]))
    return list(chosen.values_list("dataset_id", *fields))


def _known(datasets, *, since: datetime):
    """``(newest ready {id: (key, end_at)}, oldest pending since {id: key}, {id: count},
    {id: (ready partitions starting at or after since, the first one's start or None,
    whether older ready partitions exist)})``."""
    ids = [d.pk for d in datasets]
    newest: dict[int, tuple[str, datetime]] = {}
    pending: dict[int, str] = {}
    counts: dict[int, int] = {}
    recent: dict[int, tuple] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        rows = _first_per_dataset(
            Partition.objects.filter(
                dataset_id__in=chunk, current_revision__state=PartitionRevision.State.READY
            ),
            order="-start_at",
            fields=("key", "end_at"),
        )
        newest.update({d: (k, e) for d, k, e in rows})
        rows = _first_per_dataset(
            Partition.objects.filter(
                dataset_id__in=chunk,
                current_revision__state=PartitionRevision.State.PENDING,
                start_at__gte=since,
            ),
            order="start_at",
            fields=("key",),
        )
        pending.update(dict(rows))
        counts.update(
            Partition.objects.filter(dataset_id__in=chunk)
            .values_list("dataset_id")
            .annotate(n=Count("pk"))
            .values_list("dataset_id", "n")
        )
        in_window = Q(start_at__gte=since)
        rows = (
            Partition.objects.filter(
                dataset_id__in=chunk, current_revision__state=PartitionRevision.State.READY
            )
            .values_list("dataset_id")
            .annotate(
                n=Count("pk", filter=in_window),
                first=Min("start_at", filter=in_window),
                older=Count("pk", filter=~in_window),
            )
            .values_list("dataset_id", "n", "first", "older")
        )
        recent.update({d: (n, first, older > 0) for d, n, first, older in rows})
    return newest, pending, counts, recent


def plan_recent(
    locations: dict,
    first_keys: dict[int, str],
    history: dict[int, int],
    *,
    entries_per_partition: float = 1.0,
) -> list[Run]:
    """The flat listings of a pass over recent ready partitions (``rewritten_markers``), in
    name order: each dataset's names from its oldest ready partition in the window on.
    As in ``plan``, one listing runs on past a dataset's history before the window when
    that is shorter than a page, so a date-first group, or a dataset-first group of short
    histories, is one listing.

    Args:
        locations: ``{dataset id: objectstore.Location}``.
        first_keys: ``{dataset id: key of its oldest ready partition in the window}``;
            datasets left out are not listed.
        history: ``{dataset id: partitions older than the window}``.
        entries_per_partition: objects per partition, as the group's sweeps measured.
    """
    ranges = []
    for dataset_id, key in first_keys.items():
        location = locations[dataset_id]
        if not location.partitioned:
            ranges.append(_Range(location.segment_prefix + "/", None, 0))
            continue
        # StartAfter the segment itself keeps "segment/..." and everything after it.
        ranges.append(
            _Range(location.segment_prefix, location.segment_for(key), history.get(dataset_id, 0))
        )
    if not ranges:
        return []
    return _runs(_nest(ranges), entries_per_partition)
