"""Judging consumer need-by times: telling a subscription ``dataset.late`` at its own
need-by, when that comes before the producer's SLA has judged the partition.

Each subscription with a need-by stores the first need-by deadline not judged yet
(``need_by_next_at``, partially indexed), so judging costs what is due, not what exists.
At a need-by deadline, the periods due at it (``need_by.need_by_of``: the SLA's period
arithmetic, no grace) whose current revision is not ready are late for that subscription
alone:

- it is told ``dataset.late`` with ``judged_at: "need_by"`` and its need-by as
  ``deadline_at`` (and ``late_at``: a consumer names its own time, so there is no grace),
  once per (subscription, partition): the notification's dedup key;
- nobody else is: not the other subscribers, not the owner team's contacts, and nothing
  reaches the watchdog, so the producer is never paged before its own SLA;
- when the SLA judged the partition late first (a ``LatePartition`` exists), every
  subscriber was told already, and the need-by adds nothing;
- when the producer's SLA later finds the partition late, this subscription's endpoint is
  not told ``dataset.late`` a second time (``told_endpoints``, used by
  ``catalog.freshness``); it is told ``dataset.recovered`` with every subscriber when the
  partition lands.

A partition that lands after the need-by and before the SLA deadline closes nothing: the
subscriber learns it from the ``partition.ready`` every subscriber gets, as the existing
rules say. A subscription whose filters refuse ``dataset.late`` (event types, partition
pattern) or that has no endpoint is judged all the same and told nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from . import need_by, notices, passes
from .models import Dataset, LatePartition, Notification, Partition, PartitionRevision, Subscription
from .notices import iso

MAX_DEADLINES_PER_JUDGING = 1000  # a long outage is caught up over several passes
NEED_BY = "need_by"
LATE = Notification.Type.DATASET_LATE


@dataclass(frozen=True)
class NeedByReport:
    """One partition found late at a subscription's need-by and told to it."""

    subscription_id: int
    dataset: str
    partition: str
    need_by_at: datetime


@dataclass(frozen=True)
class Judging:
    """One batch of ``judge_batch``: the partitions it told ``late``, how many
    subscriptions it ``judged``, and whether one is still ``behind`` (more deadlines past
    than ``MAX_DEADLINES_PER_JUDGING``)."""

    late: list[NeedByReport]
    judged: int
    behind: bool = False


@dataclass
class _Plan:
    subscription: Subscription
    due: list[tuple[datetime, list[str]]]  # (need-by deadline, period keys due at it)
    next_deadline: datetime | None


def judge_batch(*, now: datetime, limit: int = 200) -> Judging:
    """Judge every need-by deadline passed by ``now`` (aware UTC), for up to ``limit``
    subscriptions, in one transaction.

    Subscriptions are locked with SKIP LOCKED, so two judges share the work; the stored
    deadline moves on by compare-and-set.

    Returns:
        The partitions newly told late, how many subscriptions were judged, and whether
        one is behind. ``judged == limit`` or ``behind`` means more may be due.

    Side effects: per partition told, a ``dataset.late`` notification and one delivery
    to the subscription's endpoint; the delivery doorbell rings after commit.
    """
    reports: list[NeedByReport] = []
    with transaction.atomic():
        subscriptions = list(
            Subscription.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("dataset__owner")
            .filter(need_by_next_at__lte=now)
            .order_by("need_by_next_at", "pk")[:limit]
        )
        plans = [_plan(subscription, now=now) for subscription in subscriptions]
        wanted = {(p.subscription.dataset_id, k) for p in plans for _, keys in p.due for k in keys}
        busy = _busy_datasets({pk for pk, _ in wanted})
        if busy:  # judged at the next pass, once the SLA's judging of them committed
            plans = [p for p in plans if p.subscription.dataset_id not in busy]
            wanted = {(pk, key) for pk, key in wanted if pk not in busy}
        ready, judged_by_sla = _ready_and_sla_judged(wanted)
        behind = False
        for plan in plans:
            reports += _judge(plan, skip=ready | judged_by_sla, now=now)
            behind = behind or (plan.next_deadline is not None and plan.next_deadline <= now)
    return Judging(late=reports, judged=len(subscriptions), behind=behind)


def judge_pass(
    *,
    clock: Callable[[], datetime],
    limit: int = 200,
    budget_seconds: float | None = None,
    on_late: Callable[[NeedByReport], None] = lambda report: None,
) -> passes.PassSummary:
    """Judge what is due in batches of ``limit`` subscriptions until a batch comes back
    short or ``budget_seconds`` are spent (``passes.run_batches``); part of the
    freshness pass (``catalog.freshness.evaluate_pass``).

    Args:
        clock: returns the aware UTC instant each batch judges at.
        on_late: called with each partition newly told late.
    """

    def batch() -> tuple[int, bool]:
        judging = judge_batch(now=clock(), limit=limit)
        for report in judging.late:
            on_late(report)
        return len(judging.late), judging.judged == limit or judging.behind

    return passes.run_batches(batch, budget_seconds=budget_seconds)


def _plan(subscription: Subscription, *, now: datetime) -> _Plan:
    """Walk up to ``MAX_DEADLINES_PER_JUDGING`` need-by deadlines passed by ``now`` (pure
    arithmetic). A subscription whose need-by no longer applies (its dataset became
    unpartitioned or retired) is planned to stop."""
    dataset = subscription.dataset
    schedule = need_by.need_by_of(subscription, dataset)
    if schedule is None or dataset.lifecycle == Dataset.Lifecycle.RETIRED:
        return _Plan(subscription, [], None)
    due = []
    deadline = subscription.need_by_next_at
    for _ in range(MAX_DEADLINES_PER_JUDGING):
        if deadline > now:
            break
        due.append((deadline, [period.key for period in schedule.due_at(deadline)]))
        deadline = schedule.next_deadline(deadline)
    return _Plan(subscription, due, deadline)


def _busy_datasets(dataset_ids: set[int]) -> set[int]:
    """Lock the datasets' rows (``FOR NO KEY UPDATE SKIP LOCKED``) until the transaction
    ends, and return those another transaction holds (an SLA judging them right now,
    ``freshness.evaluate_batch``, or a change of the dataset).

    Their subscriptions are left due, unjudged: under read committed the SLA's late rows
    are invisible until its judging commits, and both would tell the partition late to
    the same endpoint. An SLA judging that comes later skips a dataset locked here until
    the need-by's notice has committed and is seen (``told_endpoints``). Skipping rather
    than waiting: a change of the dataset holds its row, then updates its subscriptions.
    """
    if not dataset_ids:
        return set()
    locked = set(
        Dataset.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(pk__in=dataset_ids)
        .values_list("pk", flat=True)
    )
    return dataset_ids - locked


def _ready_and_sla_judged(
    wanted: set[tuple[int, str]],
) -> tuple[set[tuple[int, str]], set[tuple[int, str]]]:
    """Of ``wanted`` ``(dataset id, key)`` pairs: those whose current revision is ready,
    and those the SLA has already judged late (every subscriber was told): two queries
    for a whole batch."""
    if not wanted:
        return set(), set()
    datasets, keys = {pk for pk, _ in wanted}, {key for _, key in wanted}
    ready = Partition.objects.filter(
        dataset_id__in=datasets,
        key__in=keys,
        current_revision__state=PartitionRevision.State.READY,
    ).values_list("dataset_id", "key")
    judged = LatePartition.objects.filter(
        dataset_id__in=datasets, partition_key__in=keys
    ).values_list("dataset_id", "partition_key")
    return wanted & set(ready), wanted & set(judged)


def _judge(plan: _Plan, *, skip: set[tuple[int, str]], now: datetime) -> list[NeedByReport]:
    """Tell the subscription each due period not in ``skip`` and move its stored deadline
    on (compare-and-set); returns what was newly told."""
    subscription = plan.subscription
    reports = []
    for deadline, keys in plan.due:
        for key in keys:
            if (subscription.dataset_id, key) in skip:
                continue
            if _tell_late(subscription, key, deadline, now=now):
                reports.append(
                    NeedByReport(subscription.pk, str(subscription.dataset), key, deadline)
                )
    # The gap to the SLA is refreshed too: with the need-by and the SLA in zones with
    # different daylight saving rules, it changes twice a year.
    Subscription.objects.filter(
        pk=subscription.pk, need_by_next_at=subscription.need_by_next_at
    ).update(
        need_by_next_at=plan.next_deadline,
        need_by_gap_seconds=need_by.gap_seconds(subscription, subscription.dataset, now=now),
    )
    return reports


def _tells(subscription: Subscription, key: str) -> bool:
    """Whether the subscription's filters let ``dataset.late`` about ``key`` through (as
    ``notices.matching_endpoints`` would); whether it has endpoints is asked after."""
    return notices.wants(subscription.event_types, LATE) and (
        not subscription.partition_pattern
        or fnmatch.fnmatchcase(key, subscription.partition_pattern)
    )


def _tell_late(subscription: Subscription, key: str, deadline: datetime, *, now: datetime) -> bool:
    """Send ``dataset.late`` judged at the need-by to the subscription alone, once per
    (subscription, partition); False when its filters refuse it or it was told before."""
    if not _tells(subscription, key):
        return False
    endpoint_ids = notices.subscription_endpoint_ids(subscription)
    if not endpoint_ids:
        return False
    dataset = subscription.dataset
    try:
        with transaction.atomic():
            notification = notices.notification_write(
                type=LATE,
                dataset=dataset,
                dedup_key=f"late:need-by:{subscription.pk}:{key}",
                data={
                    "dataset": {"namespace": dataset.namespace, "name": dataset.name},
                    "owner": dataset.owner.slug,
                    "partition": key,
                    "deadline_at": iso(deadline),
                    "late_at": iso(deadline),
                    "late_seconds": int((now - deadline).total_seconds()),
                    "judged_at": NEED_BY,
                    "subscription_id": subscription.pk,
                },
                now=now,
            )
    except IntegrityError:
        return False  # told before
    notices.queue(notification, endpoint_ids, now=now)
    return True


def told_endpoints(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], set[int]]:
    """The endpoints already told ``dataset.late`` at a subscriber's need-by, per
    ``(dataset id, partition key)`` of ``pairs`` (those with none are left out): the
    SLA's own ``dataset.late`` skips them, one late notice per partition per endpoint.
    One query for a whole batch of the SLA evaluation."""
    if not pairs:
        return {}
    rows = Notification.objects.filter(
        dataset_id__in={pk for pk, _ in pairs},
        type=LATE,
        payload__data__judged_at=NEED_BY,
        payload__data__partition__in=sorted({key for _, key in pairs}),
        deliveries__isnull=False,
    ).values_list("dataset_id", "payload__data__partition", "deliveries__endpoint_id")
    told: dict[tuple[int, str], set[int]] = {}
    for dataset_id, key, endpoint_id in rows:
        if (dataset_id, key) in pairs:
            told.setdefault((dataset_id, key), set()).add(endpoint_id)
    return told
