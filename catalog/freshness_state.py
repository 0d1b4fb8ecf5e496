"""A dataset's freshness at an instant: which partition is late now, and by how much,
exactly as the rule says, whether or not the evaluation (``catalog.freshness``) has run.

The evaluation judges each deadline once, after its grace, and opens a ``LatePartition``
for each partition due at it that is missing; the dataset's ``next_deadline_at`` is the
earliest deadline it has not judged yet. Reading never waits for it: a partition is late
at ``now`` when it has an open ``LatePartition`` (a judged deadline), or when it is due at
a deadline from ``next_deadline_at`` on whose grace has passed by ``now`` and its current
revision is not ready (a deadline the evaluation has not reached yet: between deadline
plus grace and the next beat, or for as long as the worker or beat is down). Deadlines
that passed before the SLA was set (the dataset's registration, or the SLA change that
set this cron) are never judged, by design: a partition missing at one is neither due nor
late.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from schedules import BusinessCalendar, FreshnessSla, Period, late_seconds

from . import future_partitions
from .models import Dataset, LatePartition, Partition, PartitionRevision

# A backlog of unjudged deadlines is read this many periods at a time, oldest first (41
# days of hourly partitions): past it, the partitions due at the last deadline whose
# grace has passed are read too, and the evaluation catches up on the rest.
MAX_PERIODS_READ = 1000


def calendar_of(dataset: Dataset) -> BusinessCalendar | None:
    """The business-day calendar of the dataset's SLA, or None (every day)."""
    if dataset.sla_calendar != Dataset.SlaCalendar.BUSINESS_DAYS:
        return None
    return BusinessCalendar(
        country=dataset.sla_holidays_country or None,
        subdivision=dataset.sla_holidays_subdivision or None,
        non_business_day=dataset.sla_non_business_day,
    )


def sla_of(dataset: Dataset) -> FreshnessSla | None:
    """The dataset's SLA, or None when it has none (or is unpartitioned)."""
    if not dataset.sla_cron or dataset.partitioning == Dataset.Partitioning.NONE:
        return None
    return FreshnessSla(
        cron=dataset.sla_cron,
        time_zone=dataset.sla_timezone,
        grace_seconds=dataset.sla_grace_seconds,
        partitioning=dataset.partitioning,
        partition_time_zone=dataset.partition_timezone,
        calendar=calendar_of(dataset),
    )


@dataclass(frozen=True)
class Freshness:
    """A dataset's freshness at one instant.

    ``state``:

    - ``no_sla``: no SLA (or unpartitioned).
    - ``late``: a partition missed its deadline plus grace and is not ready, whether or
      not an evaluation has judged that deadline yet. ``partition_due`` names the one
      late the longest (the oldest), ``deadline_at`` its deadline and ``late_seconds``
      how long since deadline plus grace.
    - ``due``: nothing is late; a partition due at a deadline that passed since the SLA
      was set is missing and its grace runs (``partition_due``, the oldest such, and its
      ``deadline_at``).
    - ``fresh``: nothing late or due, and every partition due at the last deadline is
      ready (``deadline_at``: that deadline).
    - ``awaiting``: nothing late or due, and a partition due at the last deadline is
      missing, but that deadline passed before the SLA was set (the dataset's
      registration, or the SLA change that set this cron), so it is never judged; the
      first deadline judged is ``next_deadline_at`` or later.

    ``next_deadline_at``: the first deadline after the instant.
    """

    state: str
    sla: str | None
    latest_ready: str | None
    partition_due: str | None
    deadline_at: datetime | None
    late_seconds: int | None
    next_deadline_at: datetime | None


@dataclass(frozen=True)
class _Owed:
    """What must be read of one dataset to judge it: ``periods``, due at the deadlines
    passed since ``next_deadline_at`` (oldest first); ``last_due``, due at the last
    deadline when that one passed before ``next_deadline_at``; ``last``: that deadline."""

    periods: list[Period]
    last_due: list[Period]
    last: datetime

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.periods or self.last_due]


def _owed(sla: FreshnessSla, next_deadline_at: datetime | None, now: datetime) -> _Owed:
    last = sla.previous_deadline(now)
    if next_deadline_at is None or next_deadline_at > now:
        # No deadline from the stored one on has passed. The last one was judged (a
        # partition missing at it has an open incident: late) or passed before the SLA
        # was set (never judged): it decides between fresh and awaiting.
        return _Owed([], sla.due_at(last), last)
    after = sla.previous_deadline(next_deadline_at - timedelta(seconds=1))
    grace_over = sla.previous_deadline(now - timedelta(seconds=sla.grace_seconds))
    late_until = max(after, grace_over)
    late = sla.owed_periods(after, late_until, MAX_PERIODS_READ)
    if late and late[-1].end < late_until:
        # A long backlog: the partitions due at the last deadline past its grace too.
        late += [p for p in sla.due_at(grace_over) if p.end > late[-1].end]
    # No limit: a grace is at most 31 days, so its window is bounded.
    in_grace = sla.owed_periods(late_until, last, None)
    return _Owed(late + in_grace, [], last)


def _judged(
    sla: FreshnessSla,
    owed: _Owed,
    *,
    now: datetime,
    latest: str | None,
    oldest_late: LatePartition | None,
    ready: Callable[[str], bool],
) -> Freshness:
    """The freshness of a dataset with ``sla``, given what was read about it."""
    upcoming = sla.next_deadline(now)
    late = []  # (late_at, key, deadline)
    if oldest_late is not None:
        late.append((oldest_late.late_at, oldest_late.partition_key, oldest_late.deadline_at))
    missing = next((p for p in owed.periods if not ready(p.key)), None)
    deadline = sla.deadline_of(missing) if missing is not None else None
    if deadline is not None and sla.late_after(deadline) <= now:
        late.append((sla.late_after(deadline), missing.key, deadline))
    if late:
        late_at, key, deadline = min(late, key=lambda found: found[0])
        return Freshness(
            "late", sla.describe(), latest, key, deadline, late_seconds(late_at, now), upcoming
        )
    if missing is not None:
        return Freshness("due", sla.describe(), latest, missing.key, deadline, None, upcoming)
    if owed.periods or all(ready(p.key) for p in owed.last_due):
        return Freshness("fresh", sla.describe(), latest, None, owed.last, None, upcoming)
    return Freshness("awaiting", sla.describe(), latest, None, None, None, upcoming)


def _is_ready(dataset: Dataset, keys: list[str]) -> set[str]:
    if not keys:
        return set()
    return set(
        Partition.objects.filter(
            dataset=dataset,
            key__in=keys,
            current_revision__state=PartitionRevision.State.READY,
        ).values_list("key", flat=True)
    )


def dataset_freshness(dataset: Dataset, *, now: datetime) -> Freshness:
    """The freshness of ``dataset`` at ``now`` (aware UTC), exact whether or not the
    evaluation has judged the deadlines passed by then. ``latest_ready`` counts only
    periods that have started by ``now`` (``future_partitions.started``).

    Three queries: the latest ready partition, the oldest open late incident, and the
    readiness of the partitions due at the deadlines not yet judged (or at the last one).
    """
    latest = (
        Partition.objects.filter(
            future_partitions.started(now),
            dataset=dataset,
            current_revision__state=PartitionRevision.State.READY,
        )
        .order_by("-start_at", "-key")
        .values_list("key", flat=True)
        .first()
    )
    sla = sla_of(dataset)
    if sla is None:
        return Freshness("no_sla", None, latest, None, None, None, None)
    oldest_late = (
        LatePartition.objects.filter(dataset=dataset, recovered_at__isnull=True)
        .order_by("late_at")
        .first()
    )
    owed = _owed(sla, dataset.next_deadline_at, now)
    ready = _is_ready(dataset, owed.keys)
    return _judged(
        sla, owed, now=now, latest=latest, oldest_late=oldest_late, ready=ready.__contains__
    )


def datasets_freshness(
    datasets: list[Dataset], *, now: datetime, latest: dict[int, str | None]
) -> dict[int, Freshness]:
    """The freshness of each of ``datasets`` at ``now`` (aware UTC), as
    ``dataset_freshness`` judges it, in two queries however many (a page of a list): the
    open late incidents, and the readiness of every partition each one owes.

    Args:
        latest: ``{dataset id: key of its latest ready partition or None}``, read by the
            caller with the list (``catalog.browse.dataset_rows`` annotates it).

    Returns:
        ``{dataset id: Freshness}`` for every dataset given.
    """
    slas = {d.pk: sla_of(d) for d in datasets}
    judged = [d for d in datasets if slas[d.pk] is not None]
    oldest_late: dict[int, LatePartition] = {}
    for row in LatePartition.objects.filter(
        dataset_id__in=[d.pk for d in judged], recovered_at__isnull=True
    ).order_by("dataset_id", "late_at"):
        oldest_late.setdefault(row.dataset_id, row)
    owed = {d.pk: _owed(slas[d.pk], d.next_deadline_at, now) for d in judged}
    # The keys a dataset owes are consecutive periods, so one key range each: the query
    # stays the same size however long the backlog (strays in the range are ignored).
    wanted = Q(pk__in=[])
    for pk, what in owed.items():
        if what.keys:
            wanted |= Q(dataset_id=pk, key__range=(what.keys[0], what.keys[-1]))
    ready: set[tuple[int, str]] = set()
    if any(what.keys for what in owed.values()):
        ready = set(
            Partition.objects.filter(
                wanted, current_revision__state=PartitionRevision.State.READY
            ).values_list("dataset_id", "key")
        )
    result = {}
    for dataset in datasets:
        sla = slas[dataset.pk]
        if sla is None:
            result[dataset.pk] = Freshness("no_sla", None, latest.get(dataset.pk), *[None] * 4)
            continue
        result[dataset.pk] = _judged(
            sla,
            owed[dataset.pk],
            now=now,
            latest=latest.get(dataset.pk),
            oldest_late=oldest_late.get(dataset.pk),
            ready=lambda key, pk=dataset.pk: (pk, key) in ready,
        )
    return result
