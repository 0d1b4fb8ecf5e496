"""What a poll-only group's next sweep is planned from (``poll_schedule``): which of its
poll-only datasets are pending and when each is expected, and which datasets a narrow
sweep lists (``due_now``), read in a few queries whatever the number of datasets.

A dataset is pending when its latest closed period has no ready partition. Its expected
window comes from its arrivals (first readiness, published or found, no restatement) of
the last ``TIDEMARK_POLL["profile_days"]`` days, with
``TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS`` arrivals at least (``poll_schedule.offsets``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Sum

from schedules.periods import period_containing

from . import poll_schedule
from .arrival_profiles import Arrival
from .models import Dataset, Partition, PartitionRevision, ReadinessEvent, StorageGroup

CHUNK = 500


def expected(
    datasets: list[Dataset], *, now: datetime
) -> tuple[list[poll_schedule.Window | None], list[datetime]]:
    """``(windows of the pending datasets, next-period openings of the ready ones)`` for
    ``datasets`` (poll-only, of one group) at ``now`` (aware UTC); see ``poll_schedule``.
    An unpartitioned dataset with nothing ready is pending with no window."""
    latest = _latest(datasets, now=now)
    ready = _ready(datasets, latest)
    since = now - timedelta(days=settings.TIDEMARK_POLL["profile_days"])
    arrivals = _arrivals(list(latest), since=since)
    pending: list[poll_schedule.Window | None] = []
    reopens: list[datetime] = []
    for dataset in datasets:
        if dataset.pk not in latest:
            if dataset.pk not in ready:
                pending.append(None)
            continue
        _, end, next_end = latest[dataset.pk]
        is_ready = dataset.pk in ready
        period_end = next_end if is_ready else end
        quantiles = poll_schedule.offsets(
            arrivals.get(dataset.pk, ()),
            period_end=period_end,
            time_zone=dataset.partition_timezone,
            min_periods=settings.TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS,
        )
        expected_window = poll_schedule.window(period_end, quantiles)
        if is_ready:
            reopens.append(expected_window.opens if expected_window else next_end)
        else:
            pending.append(expected_window)
    return pending, reopens


def next_sweep(
    group: StorageGroup,
    poll_only: list[Dataset],
    *,
    now: datetime,
    found: bool,
    found_now: int,
    pages: int,
) -> tuple[int, datetime]:
    """``(interval seconds, next sweep at)`` of ``group``, which has ``poll_only``
    datasets (none publishing events), after a sweep at ``now`` (aware UTC) that found
    ``found_now`` partitions (``found``: at least one recorded) in a listing of ``pages``
    pages: ``poll_schedule.next_sweep`` from what its pending datasets expect and the rate
    its sweeps of the last ``RATE_WINDOW`` found partitions at.
    """
    pending, reopens = expected(poll_only, now=now)
    # The find rate: what was found after the window's first sweep that found
    # something, over the time since it (its own finds had landed before it).
    finding = group.sweeps.filter(
        started_at__gte=now - poll_schedule.RATE_WINDOW,
        started_at__lt=now,
        partitions_found__gt=0,
    )
    first = finding.order_by("started_at").values_list("started_at", "partitions_found").first()
    found_recently = found_now
    found_over = timedelta(0)
    if first is not None:
        total = finding.aggregate(n=Sum("partitions_found"))["n"]
        found_recently += total - first[1]
        found_over = now - first[0]
    # A poll-only group waits at least page_interval_seconds per page its listing cost
    # beyond the first, and a busy one about a page per partition it finds, so a group
    # of many pages is not listed every minute.
    config = settings.TIDEMARK_POLL
    return poll_schedule.next_sweep(
        now=now,
        previous_interval=group.interval_seconds,
        found=found,
        pages=pages,
        pending=pending,
        reopens=reopens,
        found_recently=found_recently,
        found_over=found_over,
        cadence=poll_schedule.Cadence(
            minimum=config["min_interval_seconds"],
            maximum=config["max_interval_seconds"],
            per_page=config["page_interval_seconds"],
        ),
    )


def publishing_ids(datasets: list[Dataset], *, now: datetime) -> set[int]:
    """Ids of ``datasets`` that published a readiness event over the API within the
    lookback window before ``now`` (aware UTC): their partitions found by the poll are
    missed events, they count for none of a group's cadence, and a group made only of them
    gets the hourly safety net."""
    since = now - timedelta(days=settings.TIDEMARK_POLL["lookback_days"])
    ids = [d.pk for d in datasets]
    found: set[int] = set()
    for start in range(0, len(ids), CHUNK):
        found.update(
            ReadinessEvent.objects.filter(
                dataset_id__in=ids[start : start + CHUNK],
                source=ReadinessEvent.Source.API,
                received_at__gte=since,
            )
            .values_list("dataset_id", flat=True)
            .distinct()
        )
    return found


def due_now(
    datasets: list[Dataset], by_event: set[int], *, now: datetime, checks_by: datetime
) -> set[int]:
    """Ids of the datasets a narrow sweep at ``now`` (aware UTC) lists: those that publish
    no events (not in ``by_event``) and whose latest closed period has no ready partition
    or that have a partition recorded pending (an incomplete manifest) within the lookback
    window, and any dataset whose SLA check is due by ``checks_by``.

    The others (a poll-only dataset whose latest period is ready, a dataset that publishes
    events) wait for the group's next wide sweep, at most ``safety_net_seconds`` away: an
    early partition, a late one filling a gap or a missed event is found then.
    """
    poll_only = [d for d in datasets if d.pk not in by_event]
    due = pending_ids(poll_only, now=now)
    since = now - timedelta(days=settings.TIDEMARK_POLL["lookback_days"])
    ids = [d.pk for d in datasets]
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        due.update(
            Partition.objects.filter(
                dataset_id__in=[i for i in chunk if i not in by_event],
                current_revision__state=PartitionRevision.State.PENDING,
                start_at__gte=since,
            )
            .values_list("dataset_id", flat=True)
            .distinct()
        )
        due.update(
            Dataset.objects.filter(pk__in=chunk, next_check_at__lte=checks_by).values_list(
                "pk", flat=True
            )
        )
    return due


def pending_ids(datasets: list[Dataset], *, now: datetime) -> set[int]:
    """Ids of ``datasets`` whose latest closed period at ``now`` (aware UTC) has no ready
    partition (an unpartitioned one: nothing ready yet); a query per 500 datasets."""
    return {d.pk for d in datasets} - _ready(datasets, _latest(datasets, now=now))


def _latest(datasets: list[Dataset], *, now: datetime) -> dict[int, tuple]:
    """``{id: (latest closed period's key, its end, the current period's end)}`` of the
    partitioned ``datasets`` at ``now``."""
    latest: dict[int, tuple[str, datetime, datetime]] = {}
    for dataset in datasets:
        if dataset.partitioning == Dataset.Partitioning.NONE:
            continue
        current = period_containing(now, dataset.partitioning, dataset.partition_timezone)
        closed = period_containing(
            current.start - timedelta(seconds=1), dataset.partitioning, dataset.partition_timezone
        )
        latest[dataset.pk] = (closed.key, current.start, current.end)
    return latest


def _ready(datasets: list[Dataset], latest: dict) -> set[int]:
    """Ids of ``datasets`` whose latest closed period (``latest``: id -> (key, ...)) is
    ready; an unpartitioned dataset counts when any partition of it is."""
    ids = [d.pk for d in datasets]
    found: set[int] = set()
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        keys = {latest[i][0] for i in chunk if i in latest}
        rows = Partition.objects.filter(
            dataset_id__in=chunk, current_revision__state=PartitionRevision.State.READY
        ).filter(**({"key__in": keys | {""}} if keys else {}))
        for dataset_id, key in rows.values_list("dataset_id", "key"):
            if dataset_id not in latest or latest[dataset_id][0] == key:
                found.add(dataset_id)
    return found


def _arrivals(ids: list[int], *, since: datetime) -> dict[int, list[Arrival]]:
    """``{dataset id: [Arrival]}`` of partitions ending after ``since``: each one's first
    readiness outside a restatement, published or found by the poll."""
    out: dict[int, list[Arrival]] = defaultdict(list)
    for start in range(0, len(ids), CHUNK):
        rows = PartitionRevision.objects.filter(
            partition__dataset_id__in=ids[start : start + CHUNK], partition__end_at__gte=since
        ).first_arrivals("partition__dataset_id", "partition__end_at")
        for dataset_id, end, ready_at in rows:
            out[dataset_id].append(Arrival(period_end=end, ready_at=ready_at))
    return out
