"""Later than usual: telling the owner of a dataset without an SLA, and the consumers who
asked for it, when a partition is much later than the dataset usually delivers
(``catalog.unusual_rule`` states the rule). Never pages: nothing here reaches the
watchdog, and no ``LatePartition`` is opened.

Each watched dataset (partitioned, no SLA, not retired) stores the one partition it is
waiting on (``unusual_check_key``) and the instant it becomes later than usual
(``next_unusual_check_at``, indexed), so a pass costs what is due, not what exists. At
that instant the pass judges it: not ready means ``dataset.unusually_late`` (once per
dataset and partition: the notification's dedup key), then it moves on to the next
watched period. A dataset is judged once per period whatever happens, so no publish or
poll has to touch it; a partition that arrives after its notice sends nothing more
(there is no ``dataset.recovered`` for it).

A dataset that is registered, loses its SLA or changes its partitioning gets
``next_unusual_check_at`` = now and an empty key: the next pass plans where to start
(``unusual_rule.first_watched_from``). One with too little history is looked at again
when its current period ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction

from schedules import PartitionKeyError, Period, parse_partition_key, period_containing

from . import notices, passes, selectors, unusual_rule
from .models import Dataset, Notification, Partition, PartitionRevision
from .notices import iso

UNUSUALLY_LATE = Notification.Type.DATASET_UNUSUALLY_LATE


def watched(dataset: Dataset) -> bool:
    """Whether the dataset is judged against its usual arrival: partitioned, no SLA
    (a written SLA is judged by ``catalog.freshness`` instead), not retired."""
    return (
        not dataset.sla_cron
        and dataset.partitioning != Dataset.Partitioning.NONE
        and dataset.lifecycle != Dataset.Lifecycle.RETIRED
    )


def schedule(dataset: Dataset, *, now: datetime) -> None:
    """Ask the next pass to plan where watching starts (registration, an SLA or
    partitioning change), or stop watching a dataset that is not ``watched``.

    Args:
        now: aware UTC instant of the change.

    Does not save; the caller saves the dataset.
    """
    dataset.unusual_check_key = ""
    dataset.next_unusual_check_at = now if watched(dataset) else None


def rule_from_settings() -> unusual_rule.Rule:
    """The rule with ``TIDEMARK_UNUSUALLY_LATE_*`` settings."""
    return unusual_rule.Rule(
        min_periods=settings.TIDEMARK_UNUSUALLY_LATE_MIN_PERIODS,
        min_margin_seconds=settings.TIDEMARK_UNUSUALLY_LATE_MIN_MARGIN_SECONDS,
        spread_factor=settings.TIDEMARK_UNUSUALLY_LATE_SPREAD_FACTOR,
    )


@dataclass(frozen=True)
class UnusualReport:
    """One partition told as later than usual."""

    dataset: str
    partition: str
    expected_by: datetime


@dataclass(frozen=True)
class Check:
    """One batch: the partitions it ``told``, how many datasets it ``checked``, and
    whether one of them is ``behind`` (its next check is already due)."""

    told: list[UnusualReport]
    checked: int
    behind: bool = False


def check_batch(*, now: datetime, limit: int = 200) -> Check:
    """Judge up to ``limit`` datasets whose ``next_unusual_check_at`` has passed by
    ``now`` (aware UTC), in one transaction; rows locked with SKIP LOCKED so two passes
    share the work, and moved on by compare-and-set.

    Per dataset: one query for its arrival profile, one for its partition's readiness,
    and the notice's writes when it is late.
    """
    rule = rule_from_settings()
    told: list[UnusualReport] = []
    behind = False
    with transaction.atomic():
        datasets = list(
            Dataset.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("owner")
            .filter(next_unusual_check_at__lte=now)
            .order_by("next_unusual_check_at")[:limit]
        )
        for dataset in datasets:
            report, next_check = _check(dataset, rule=rule, now=now)
            if report is not None:
                told.append(report)
            behind = behind or (next_check is not None and next_check <= now)
    return Check(told=told, checked=len(datasets), behind=behind)


def check_pass(
    *,
    clock: Callable[[], datetime],
    limit: int = 200,
    budget_seconds: float | None = None,
    on_told: Callable[[UnusualReport], None] = lambda report: None,
) -> passes.PassSummary:
    """``check_batch`` batch after batch while they come back full or behind, for at
    most ``budget_seconds`` (``passes.run_batches``); ``clock`` is read per batch.

    Returns:
        The summary: ``handled`` counts the partitions told; ``more_due`` asks the
        caller to ring for another pass.
    """

    def batch() -> tuple[int, bool]:
        result = check_batch(now=clock(), limit=limit)
        for report in result.told:
            on_told(report)
        return len(result.told), result.checked == limit or result.behind

    return passes.run_batches(batch, budget_seconds=budget_seconds)


def _check(
    dataset: Dataset, *, rule: unusual_rule.Rule, now: datetime
) -> tuple[UnusualReport | None, datetime | None]:
    """Judge one due dataset and store its next check; returns what it told (or None)
    and the next check (None: not watched any more)."""
    if not watched(dataset):
        return None, _move(dataset, "", None)
    partitioning, zone = dataset.partitioning, dataset.partition_timezone
    if not dataset.unusual_check_key:
        return None, _plan_from(dataset, rule=rule, now=now)
    try:
        period = _period(dataset, dataset.unusual_check_key)
    except PartitionKeyError:  # a key of an older partitioning: plan afresh
        return None, _plan_from(dataset, rule=rule, now=now)
    # The usual arrival from the periods before this one, as they stand now: an arrival
    # since the plan may have moved it.
    profile = selectors.dataset_arrival_profile(dataset=dataset, now=period.start)
    assert profile is not None  # watched datasets are partitioned
    usual = unusual_rule.usual_arrival(profile, period.end, time_zone=zone, rule=rule)
    if usual is not None and unusual_rule.expected_by(period, usual) > now:
        return None, _move(dataset, period.key, unusual_rule.expected_by(period, usual))
    report = None
    if usual is not None and not _ready(dataset, period.key):
        report = _tell(dataset, period, usual, periods=profile.periods, now=now)

    def usual_of(candidate: Period) -> unusual_rule.UsualArrival | None:
        return unusual_rule.usual_arrival(profile, candidate.end, time_zone=zone, rule=rule)

    found = unusual_rule.first_watched_after(
        period, partitioning=partitioning, time_zone=zone, usual_of=usual_of
    )
    if found is None:
        return report, _plan_later(dataset, now=now)
    following, following_usual = found
    return report, _move(
        dataset, following.key, unusual_rule.expected_by(following, following_usual)
    )


def _plan_from(dataset: Dataset, *, rule: unusual_rule.Rule, now: datetime) -> datetime | None:
    """Store where watching starts at ``now``; with too little history, look again when
    the current period ends."""
    zone = dataset.partition_timezone
    profile = selectors.dataset_arrival_profile(dataset=dataset, now=now)
    assert profile is not None

    def usual_of(candidate: Period) -> unusual_rule.UsualArrival | None:
        return unusual_rule.usual_arrival(profile, candidate.end, time_zone=zone, rule=rule)

    found = unusual_rule.first_watched_from(
        now, partitioning=dataset.partitioning, time_zone=zone, usual_of=usual_of
    )
    if found is None:
        return _plan_later(dataset, now=now)
    period, usual = found
    return _move(dataset, period.key, unusual_rule.expected_by(period, usual))


def _plan_later(dataset: Dataset, *, now: datetime) -> datetime:
    """Nothing to watch yet (too little history): plan again when the period containing
    ``now`` ends, when one more arrival may have made the history long enough."""
    end = period_containing(now, dataset.partitioning, dataset.partition_timezone).end
    return _move(dataset, "", end)


def _move(dataset: Dataset, key: str, check_at: datetime | None) -> datetime | None:
    """Compare-and-set the dataset's next check from the one this pass judged."""
    Dataset.objects.filter(
        pk=dataset.pk, next_unusual_check_at=dataset.next_unusual_check_at
    ).update(unusual_check_key=key, next_unusual_check_at=check_at)
    return check_at


def _period(dataset: Dataset, key: str) -> Period:
    interval = parse_partition_key(dataset.partitioning, key, dataset.partition_timezone)
    return Period(key=key, start=interval.start, end=interval.end)


def _ready(dataset: Dataset, key: str) -> bool:
    return Partition.objects.filter(
        dataset=dataset, key=key, current_revision__state=PartitionRevision.State.READY
    ).exists()


def _tell(
    dataset: Dataset,
    period: Period,
    usual: unusual_rule.UsualArrival,
    *,
    periods: int,
    now: datetime,
) -> UnusualReport | None:
    """``dataset.unusually_late`` to the owner team's contacts and to the subscribers
    that listed the type; None when this partition was told before."""
    expected = unusual_rule.expected_by(period, usual)
    try:
        with transaction.atomic():
            notification = notices.notification_write(
                type=UNUSUALLY_LATE,
                dataset=dataset,
                dedup_key=f"unusually_late:{dataset.pk}:{period.key}",
                data={
                    "dataset": {"namespace": dataset.namespace, "name": dataset.name},
                    "owner": dataset.owner.slug,
                    "partition": period.key,
                    "period_end": iso(period.end),
                    "expected_by": iso(expected),
                    "late_seconds": max(0, int((now - expected).total_seconds())),
                    "usual": {
                        "group": usual.group,
                        "periods": usual.periods,
                        "p50_seconds": usual.p50_seconds,
                        "p90_seconds": usual.p90_seconds,
                        "p99_seconds": usual.p99_seconds,
                        "after_seconds": usual.after_seconds,
                    },
                    "profile_periods": periods,
                },
                now=now,
            )
    except IntegrityError:
        return None  # told before
    notices.fan_out(
        notification=notification,
        dataset=dataset,
        partition_key=period.key,
        now=now,
        extra_endpoints=notices.contact_endpoints(dataset.owner),
    )
    return UnusualReport(str(dataset), period.key, expected)
