"""Freshness: judging SLA deadlines, and telling people once when a partition is late and
once when it recovers.

Each dataset with an SLA stores the earliest deadline not yet judged (``next_deadline_at``)
and when to judge it (``next_check_at`` = deadline + grace, indexed), so an evaluation
costs what is due, not what exists. Judging a deadline looks at every period due at it
(``schedules.FreshnessSla.due_at``); each one without a ready partition opens a
``LatePartition`` (unique per dataset and key: two evaluations, or two beats, open it
once) and sends ``dataset.late``. A readiness for that key, whenever it arrives, closes it
(compare-and-set) and sends ``dataset.recovered``. Freshness is per partition: a late
backfill of an old partition never closes the incident of a newer one. A readiness that
missed its incident (it raced the evaluation, or crashed before closing it) is caught by
``recover_arrived``, which runs after every evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from . import need_by_judging, notices, passes, root_causes
from .freshness_state import sla_of
from .models import Dataset, LatePartition, Notification, Partition, PartitionRevision
from .notices import iso

MAX_DEADLINES_PER_EVALUATION = 1000  # a long outage is caught up over several passes


def schedule(dataset: Dataset, *, now: datetime, owed_from: datetime | None = None) -> None:
    """Set the first deadline to judge, on registration (the first one after ``now``) or
    an SLA change.

    Args:
        now: aware UTC instant of the change.
        owed_from: on an SLA change, the earliest deadline the replaced SLA had not judged
            yet (the dataset's ``next_deadline_at`` before the change), or None. The new
            SLA's deadlines from then on are still judged, by the new rule: a change made
            while a deadline is in its grace period (or while evaluations were behind)
            never skips that deadline.

    Does not save; the caller saves the dataset.
    """
    sla = sla_of(dataset)
    if sla is None:
        dataset.next_deadline_at = dataset.next_check_at = None
        return
    after = now if owed_from is None else min(now, owed_from - timedelta(seconds=1))
    dataset.next_deadline_at = sla.next_deadline(after)
    dataset.next_check_at = sla.late_after(dataset.next_deadline_at)


@dataclass(frozen=True)
class LateReport:
    """One partition found late by an evaluation."""

    dataset: str
    partition: str
    deadline_at: datetime
    late_at: datetime


def evaluate_due(*, now: datetime, limit: int = 200) -> list[LateReport]:
    """Judge every deadline whose grace has passed by ``now``, for up to ``limit`` datasets.

    Datasets are locked with SKIP LOCKED, so two evaluators share the work instead of
    doing it twice; the stored deadline moves on with a compare-and-set.

    Args:
        now: aware UTC instant (the evaluation's clock).

    Returns:
        The partitions newly found late (already-open incidents are not repeated).
    """
    return evaluate_batch(now=now, limit=limit).late


@dataclass(frozen=True)
class Evaluation:
    """One batch of ``evaluate_batch``: the partitions it found ``late``, how many
    datasets it ``judged``, and whether one of them is still ``behind`` (more deadlines
    past their grace than one evaluation judges: ``MAX_DEADLINES_PER_EVALUATION``).
    ``judged == limit`` or ``behind`` means more may be due."""

    late: list[LateReport]
    judged: int
    behind: bool = False


def evaluate_batch(*, now: datetime, limit: int = 200) -> Evaluation:
    """``evaluate_due``, also saying how many datasets it judged (one transaction).

    A pass (``catalog.tasks.evaluate_freshness``) runs batches while each one comes
    back full, so a deadline shared by thousands of datasets is judged at once.
    """
    reports: list[LateReport] = []
    with transaction.atomic():
        datasets = list(
            Dataset.objects.select_for_update(skip_locked=True)
            .filter(next_check_at__lte=now)
            .order_by("next_check_at")[:limit]
        )
        plans = [_plan(dataset, now=now) for dataset in datasets]
        ready = _ready_keys(plans)
        # Subscribers told at their own need-by already know: one late notice each.
        told = need_by_judging.told_endpoints(
            {(p.dataset.pk, key) for p in plans for *_, keys in p.due for key in keys} - ready
        )
        behind = False
        opened: list[tuple[LatePartition, set[int]]] = []
        for plan in plans:
            found, still_due = _judge(plan, ready=ready, told=told, now=now)
            opened += found
            behind = behind or still_due
        # Causes after every row of the batch is open: an upstream judged at the same
        # deadline, in the same batch, is found late whichever was judged first.
        causes = root_causes.root_causes([incident for incident, _ in opened]) if opened else []
        for (incident, excluded), cause in zip(opened, causes, strict=True):
            root_causes.record(incident, cause)
            _tell_late(incident, cause, now=now, excluded=excluded)
            reports.append(
                LateReport(
                    str(incident.dataset),
                    incident.partition_key,
                    incident.deadline_at,
                    incident.late_at,
                )
            )
    return Evaluation(late=reports, judged=len(datasets), behind=behind)


def evaluate_pass(
    *,
    clock: Callable[[], datetime],
    limit: int = 200,
    budget_seconds: float | None = None,
    on_late: Callable[[LateReport], None] = lambda report: None,
) -> passes.PassSummary:
    """Judge what is due in batches of ``limit`` datasets until a batch comes back short
    or ``budget_seconds`` are spent (``passes.run_batches``), then the subscriptions'
    need-by deadlines the same way (``need_by_judging.judge_pass``), then run
    ``recover_arrived``.

    Args:
        clock: returns the aware UTC instant each batch judges at (read per batch, so a
            deadline whose grace ends during the pass is judged in it).
        on_late: called with each partition newly found late (the task logs them).

    Returns:
        The summary: ``handled`` counts the partitions newly late (to everyone at an SLA,
        or to one subscription at its need-by); ``more_due`` says
        the budget ran out with datasets (or repairs) possibly left, and the caller
        rings for another pass.
    """

    def batch() -> tuple[int, bool]:
        evaluation = evaluate_batch(now=clock(), limit=limit)
        for report in evaluation.late:
            on_late(report)
        return len(evaluation.late), evaluation.judged == limit or evaluation.behind

    summary = passes.run_batches(batch, budget_seconds=budget_seconds)
    # Consumers' need-by times after the SLAs: a partition the SLA found late at the same
    # moment is told to every subscriber once, not again to one at its need-by.
    need_by = need_by_judging.judge_pass(clock=clock, limit=limit, budget_seconds=budget_seconds)
    summary.batches += need_by.batches
    summary.handled += need_by.handled
    summary.more_due = summary.more_due or need_by.more_due
    if recover_arrived(now=clock(), limit=limit) == limit:
        summary.more_due = True
    return summary


@dataclass
class _Plan:
    """One dataset's judgement, worked out before any query: each deadline whose grace
    has passed with the period keys due at it, and the first deadline left unjudged."""

    dataset: Dataset
    due: list[tuple[datetime, datetime, list[str]]]  # (deadline, late_at, period keys)
    next_deadline: datetime | None
    next_check: datetime | None


def _plan(dataset: Dataset, *, now: datetime) -> _Plan:
    """Walk up to ``MAX_DEADLINES_PER_EVALUATION`` of the dataset's deadlines whose grace
    has passed by ``now`` (pure arithmetic: no query)."""
    sla = sla_of(dataset)
    if sla is None:
        return _Plan(dataset, [], None, None)
    due = []
    deadline = dataset.next_deadline_at
    for _ in range(MAX_DEADLINES_PER_EVALUATION):
        late_at = sla.late_after(deadline)
        if late_at > now:
            break
        due.append((deadline, late_at, [period.key for period in sla.due_at(deadline)]))
        deadline = sla.next_deadline(deadline)
    return _Plan(dataset, due, deadline, sla.late_after(deadline))


def _ready_keys(plans: list[_Plan]) -> set[tuple[int, str]]:
    """The ``(dataset id, partition key)`` pairs among the plans' due periods whose
    current revision is ready: one query for a whole batch (a deadline shared by
    thousands of datasets used to cost one query per dataset and period)."""
    wanted = {(plan.dataset.pk, key) for plan in plans for *_, keys in plan.due for key in keys}
    if not wanted:
        return set()
    rows = Partition.objects.filter(
        dataset_id__in={pk for pk, _ in wanted},
        key__in={key for _, key in wanted},
        current_revision__state=PartitionRevision.State.READY,
    ).values_list("dataset_id", "key")
    return wanted & set(rows)


def _judge(
    plan: _Plan,
    *,
    ready: set[tuple[int, str]],
    told: dict[tuple[int, str], set[int]],
    now: datetime,
) -> tuple[list[tuple[LatePartition, set[int]]], bool]:
    """Open an incident for every due period of ``plan`` not in ``ready`` and move the
    stored deadline on; returns the incidents newly opened, each with the endpoints its
    notice skips (``told`` at a need-by), and whether more are due."""
    dataset = plan.dataset
    if plan.next_deadline is None:
        Dataset.objects.filter(pk=dataset.pk).update(next_deadline_at=None, next_check_at=None)
        return [], False
    reports = []
    for deadline, late_at, keys in plan.due:
        for key in keys:
            if (dataset.pk, key) in ready:
                continue
            incident = _open_late(dataset, key, deadline, late_at)
            if incident is not None:
                reports.append((incident, told.get((dataset.pk, key), set())))
    Dataset.objects.filter(pk=dataset.pk, next_deadline_at=dataset.next_deadline_at).update(
        next_deadline_at=plan.next_deadline, next_check_at=plan.next_check
    )
    return reports, plan.next_check <= now


def _open_late(
    dataset: Dataset, key: str, deadline: datetime, late_at: datetime
) -> LatePartition | None:
    """The late row of ``key``, newly opened; None when it was opened (and told) before."""
    try:
        with transaction.atomic():
            return LatePartition.objects.create(
                dataset=dataset, partition_key=key, deadline_at=deadline, late_at=late_at
            )
    except IntegrityError:
        return None


def _tell_late(
    incident: LatePartition,
    cause: root_causes.Cause | None,
    *,
    now: datetime,
    excluded: set[int],
) -> None:
    """``dataset.late`` for a row just opened, with its root cause (or null)."""
    _tell(
        incident.dataset,
        Notification.Type.DATASET_LATE,
        incident.partition_key,
        dedup_key=f"late:{incident.pk}",
        data={
            "deadline_at": iso(incident.deadline_at),
            "late_at": iso(incident.late_at),
            "late_seconds": int((now - incident.late_at).total_seconds()),
            "judged_at": "sla",
            "caused_by": cause.as_payload() if cause is not None else None,
        },
        now=now,
        excluded=excluded,
    )


def partition_arrived(*, dataset: Dataset, partition_key: str, now: datetime) -> bool:
    """Close the late incident of this partition, if one is open, and say so once.

    Called in the transaction that made the partition ready (a publish or the poll).

    Returns:
        True when an incident was closed (and ``dataset.recovered`` sent).
    """
    incident = LatePartition.objects.filter(
        dataset=dataset, partition_key=partition_key, recovered_at__isnull=True
    ).first()
    if incident is None:
        return False
    return _recover(incident, dataset=dataset, now=now)


def recover_arrived(*, now: datetime, limit: int = 200) -> int:
    """Close the open late incidents whose partition is ready after all: the repair sweep
    that runs after every evaluation (``catalog.tasks.evaluate_freshness``).

    A publish closes an incident only if its own write statement saw it open, so a ready
    partition can be left with an incident open for good, and ``dataset.recovered``
    never sent, in two ways:

    1. a race with ``evaluate_due``: the publish's statement takes its snapshot (no
       incident yet); the evaluation, which cannot see the uncommitted partition, finds
       it missing, opens the incident and commits; then the publish commits;
    2. a crash between a publish's commit and the close of its incident, once that close
       runs in a transaction of its own.

    Each incident is closed as ``partition_arrived`` closes it (compare-and-set on
    ``recovered_at``, ``dataset.recovered`` deduplicated as ``recovered:<incident id>``),
    so a publish closing the same incident at the same moment tells it once. Ready means
    the partition's current revision is ready (a restated one counts; a ready revision
    staged in a restatement, not current, does not).

    Args:
        now: aware UTC instant, recorded as ``recovered_at`` and in the notice.
        limit: most incidents closed in one call, oldest ``late_at`` first; the rest are
            left to the next evaluation.

    Returns:
        The number of incidents this call closed (those a concurrent publish closed first
        are not counted).

    Side effects: per incident closed, a ``dataset.recovered`` notification and its
    deliveries (subscribers and the owner team's contacts); the delivery doorbell rings
    after each commit.
    """
    ready = Partition.objects.filter(
        dataset_id=OuterRef("dataset_id"),
        key=OuterRef("partition_key"),
        current_revision__state=PartitionRevision.State.READY,
    )
    # Only open incidents are scanned (the partial index ``late_partition_open``), and they
    # are few: the ones a publish or the poll has not closed.
    incidents = list(
        LatePartition.objects.filter(Exists(ready), recovered_at__isnull=True)
        .select_related("dataset__owner")
        .order_by("late_at", "pk")[:limit]
    )
    closed = 0
    for incident in incidents:
        # One transaction each: an incident is closed together with its notice, and its
        # row lock (which a publish closing the same incident waits on) is held for one
        # close, not for the whole batch.
        with transaction.atomic():
            if _recover(incident, dataset=incident.dataset, now=now):
                closed += 1
    return closed


def _recover(incident: LatePartition, *, dataset: Dataset, now: datetime) -> bool:
    """Mark ``incident`` recovered at ``now`` (compare-and-set) and send
    ``dataset.recovered``; False, sending nothing, when another closed it first."""
    closed = LatePartition.objects.filter(pk=incident.pk, recovered_at__isnull=True).update(
        recovered_at=now
    )
    if closed != 1:
        return False
    _tell(
        dataset,
        Notification.Type.DATASET_RECOVERED,
        incident.partition_key,
        dedup_key=f"recovered:{incident.pk}",
        data={
            "deadline_at": iso(incident.deadline_at),
            "late_at": iso(incident.late_at),
            "recovered_at": iso(now),
            "late_by_seconds": max(0, int((now - incident.late_at).total_seconds())),
        },
        now=now,
    )
    return True


def _tell(
    dataset: Dataset,
    kind: str,
    key: str,
    *,
    dedup_key: str,
    data: dict,
    now,
    excluded: set[int] = frozenset(),
) -> None:
    """A dataset notice to its subscribers (but the ``excluded`` endpoint ids) and to its
    owner team's contacts."""
    notification = notices.notification_write(
        type=kind,
        dataset=dataset,
        dedup_key=dedup_key,
        data={
            "dataset": {"namespace": dataset.namespace, "name": dataset.name},
            "owner": dataset.owner.slug,
            "partition": key,
            **data,
        },
        now=now,
    )
    notices.fan_out(
        notification=notification,
        dataset=dataset,
        partition_key=key,
        now=now,
        extra_endpoints=notices.contact_endpoints(dataset.owner),
        excluded=excluded,
    )
