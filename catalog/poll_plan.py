"""Where a sweep of a storage group starts and stops listing: the cost of a sweep follows
what is new in storage, not what exists, whatever the folder order.

Each dataset of a group owns the names of its parent that start with its segment prefix
(``t042_`` in ``landing/t042_{partition}/``; ``dt=`` or nothing in date-first layouts). A
regular sweep lists a dataset's names only after its newest ready partition (or from its
oldest pending one within the lookback window, if older); a dataset with nothing ready
starts at the lookback horizon. A dataset is left out of a regular sweep while the period
after its newest ready partition has not ended (a daily dataset ready for yesterday has
nothing due until tonight; one accepting future partitions is never left out): partitions
landing before their period ends, and late partitions older than a dataset's newest ready
one, are found by the next full sweep.

The datasets' ranges, in name order, become listings: one listing runs on past a dataset's
history when that history is shorter than one page (reading it costs less than starting a
new listing), and a new listing with ``StartAfter`` skips it otherwise. So a group of
date-first partitions is one listing from the oldest partition not yet ready, and a group
of dataset-first partitions with years of history is about one short listing per dataset
with something due.

A recovery sweep (after the worker was down) leaves no dataset out and starts a dataset
with nothing ready at its first name; a full sweep lists everything with one listing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count

from objectstore import PAGE_SIZE
from schedules.periods import period_containing

from .models import Dataset, Partition, PartitionRevision


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
    due: bool
    history: int  # partitions known before ``start`` (what a run passing over it reads)


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
) -> list[Run]:
    """The listings one sweep makes, in name order.

    Args:
        datasets: the group's polled datasets.
        locations: ``{dataset id: objectstore.Location}``.
        full: list everything (one run).
        recovery: leave no dataset out, and start datasets with nothing ready at the start.
        entries_per_partition: what passing over one known partition costs in listed
            entries: 1 for a delimiter listing, the objects per partition for a flat one.
    """
    if full or not datasets:
        return [Run(None, None)]
    lookback = timedelta(days=settings.TIDEMARK_POLL["lookback_days"])
    newest, pending, counts = _known(datasets, since=now - lookback)
    ranges: list[_Range] = []
    for dataset in datasets:
        location = locations[dataset.pk]
        if not location.partitioned:
            ranges.append(_Range(location.segment_prefix + "/", None, True, 0))
            continue
        starts: list[str | None] = []
        due = True
        if dataset.pk in newest:
            key, end_at = newest[dataset.pk]
            starts.append(location.segment_for(key) + "0")  # "x/" < "x0": after all of x/
            following = period_containing(end_at, dataset.partitioning, dataset.partition_timezone)
            due = (
                recovery
                or following.end <= now
                or dataset.pk in pending
                or dataset.accepts_future_partitions
            )
        elif recovery:
            starts.append(None)
        else:
            horizon = period_containing(
                now - lookback, dataset.partitioning, dataset.partition_timezone
            )
            starts.append(location.segment_for(horizon.key))
        if dataset.pk in pending:
            starts.append(location.segment_for(pending[dataset.pk]))
        start = None if None in starts else min(starts)
        history = counts.get(dataset.pk, 0) if start is not None else 0
        ranges.append(_Range(location.segment_prefix, start, due, history))
    return _runs(_nest(ranges), entries_per_partition)


def _nest(ranges: list[_Range]) -> list[_Range]:
    """Merge ranges whose prefix lies inside another's (``""`` holds every name)."""
    ranges.sort(key=lambda r: r.prefix)
    merged: list[_Range] = []
    for r in ranges:
        outer = merged[-1] if merged else None
        if outer is None or not r.prefix.startswith(outer.prefix):
            merged.append(_Range(r.prefix, r.start, r.due, r.history))
            continue
        if r.due:
            starts = [r.start] + ([outer.start] if outer.due else [])
            outer.start = None if None in starts else min(starts)
            outer.due = True
        outer.history += r.history
    return merged


def _runs(ranges: list[_Range], per_entry: float) -> list[Run]:
    runs: list[Run] = []
    gap = 0.0  # entries between the current run's end and the next range's start
    for r in ranges:
        if not r.due:
            gap += r.history * per_entry
            continue
        start = r.start if r.start is not None else _before(r.prefix)
        gap += r.history * per_entry
        if runs and gap < PAGE_SIZE:
            runs[-1] = Run(runs[-1].start_after, _successor(r.prefix))
        else:
            runs.append(Run(start, _successor(r.prefix)))
        gap = 0.0
    return runs


def _known(datasets, *, since: datetime):
    """``(newest ready {id: (key, end_at)}, oldest pending since {id: key}, {id: count})``."""
    ids = [d.pk for d in datasets]
    newest: dict[int, tuple[str, datetime]] = {}
    pending: dict[int, str] = {}
    counts: dict[int, int] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        rows = (
            Partition.objects.filter(
                dataset_id__in=chunk, current_revision__state=PartitionRevision.State.READY
            )
            .order_by("dataset_id", "-start_at")
            .distinct("dataset_id")
            .values_list("dataset_id", "key", "end_at")
        )
        newest.update({d: (k, e) for d, k, e in rows})
        rows = (
            Partition.objects.filter(
                dataset_id__in=chunk,
                current_revision__state=PartitionRevision.State.PENDING,
                start_at__gte=since,
            )
            .order_by("dataset_id", "start_at")
            .distinct("dataset_id")
            .values_list("dataset_id", "key")
        )
        pending.update(dict(rows))
        counts.update(
            Partition.objects.filter(dataset_id__in=chunk)
            .values_list("dataset_id")
            .annotate(n=Count("pk"))
            .values_list("dataset_id", "n")
        )
    return newest, pending, counts
