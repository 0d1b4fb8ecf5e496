"""Judging deadlines: the first half of each loop cycle.

Only monitors whose ``check_at`` (deadline + grace) has passed are read, through an
index, and locked with SKIP LOCKED so two loops share the work. Each missed deadline opens
one incident (unique per monitor and deadline) and queues a trigger per channel. After
downtime, the first cycle walks every deadline missed meanwhile: one incident each, at
once, rather than one per minute of outage.

Deadline monitors open one incident per missed deadline, since each deadline expects its
own data. A period monitor opens one incident when it goes quiet and then waits for its
next ping (a period has no deadlines of its own once pings stop: counting every period
of silence would only repeat the same page).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from . import db, incidents, schedule
from .models import Incident, Monitor, Ping, Run

MAX_DEADLINES_PER_MONITOR = 500  # a very long outage is caught up over several cycles


@dataclass(frozen=True)
class Missed:
    monitor: str
    deadline_at: datetime
    partition: str


def evaluate_due(*, now: datetime, limit: int = 1000) -> list[Missed]:
    """Judge every deadline whose grace has passed by ``now`` (aware UTC), for up to
    ``limit`` monitors; returns the deadlines newly found missed."""
    missed: list[Missed] = []
    with transaction.atomic(using=db.alias()):
        monitors = list(
            Monitor.objects.select_for_update(skip_locked=True)
            .filter(check_at__lte=now)
            .exclude(state=Monitor.State.PAUSED)
            .prefetch_related("channels")
            .order_by("check_at")[:limit]
        )
        for monitor in monitors:
            missed += _judge(monitor, now=now)
        missed += _overdue_runs(now=now, limit=limit)
    return missed


def _overdue_runs(*, now: datetime, limit: int) -> list[Missed]:
    """Page every run open past its monitor's maximum run time, once per run."""
    missed = []
    runs = list(
        Run.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(overdue_at__lte=now)
        .select_related("monitor")
        .order_by("overdue_at")[:limit]
    )
    for run in runs:
        monitor = run.monitor
        if monitor.state != Monitor.State.PAUSED:
            label = f" {run.run_id}" if run.run_id else ""
            incident = incidents.open_incident(
                monitor,
                reason=Incident.Reason.RUNTIME,
                deadline_at=run.started_at,
                summary=(
                    f"{monitor.name}: run{label} started {run.started_at:%Y-%m-%d %H:%M:%S} UTC "
                    f"still running after {monitor.max_runtime_seconds} s"
                ),
                now=now,
            )
            if incident is not None:
                missed.append(Missed(monitor.name, run.overdue_at, ""))
        run.overdue_at = None
        run.save(update_fields=["overdue_at"])
    return missed


def _judge(monitor: Monitor, *, now: datetime) -> list[Missed]:
    missed = []
    deadline = monitor.deadline_at
    for _ in range(MAX_DEADLINES_PER_MONITOR):
        if deadline is None or schedule.check_at(monitor, deadline) > now:
            break
        gap = _missing_partition(monitor, deadline)
        if gap is not None:
            expected = f" partition {gap}" if gap else ""
            summary = f"{monitor.name}: no ping{expected} by {deadline:%Y-%m-%d %H:%M} UTC"
            if monitor.system:
                summary = f"Tidemark is degraded: {summary}"
            incident = incidents.open_incident(
                monitor,
                reason=Incident.Reason.MISSED,
                deadline_at=deadline,
                partition=gap,
                summary=summary,
                now=now,
                # Operators are paged once for a degraded Tidemark, not once per part.
                page=not (monitor.system and _other_system_monitor_down(monitor)),
            )
            if incident is not None:
                missed.append(Missed(monitor.name, deadline, gap))
            monitor.state = Monitor.State.DOWN
            if monitor.kind == Monitor.Kind.PERIOD:
                deadline = None  # wait for the next ping
                break
        deadline = schedule.next_deadline(monitor, deadline)
    monitor.deadline_at = deadline
    monitor.check_at = schedule.check_at(monitor, deadline) if deadline else None
    monitor.save(update_fields=["deadline_at", "check_at", "state", "updated_at"])
    return missed


def _missing_partition(monitor: Monitor, deadline: datetime) -> str | None:
    """None when ``deadline`` was met; else the first partition it expected that has no
    success ping ("" for monitors without a partition rule)."""
    if monitor.kind == Monitor.Kind.PERIOD:
        # A success ping would have moved the deadline: judged means missed.
        return ""
    expected = schedule.expected_partitions(monitor, deadline)
    if expected:
        pinged = set(
            Ping.objects.filter(
                monitor=monitor, kind=Ping.Kind.SUCCESS, partition__in=expected
            ).values_list("partition", flat=True)
        )
        return next((key for key in expected if key not in pinged), None)
    # Bounded on both sides: a ping after this deadline's grace belongs to a later one, so
    # one late ping after downtime does not excuse every deadline missed meanwhile.
    met = Ping.objects.filter(
        monitor=monitor,
        kind=Ping.Kind.SUCCESS,
        received_at__gt=schedule.window_start(monitor, deadline),
        received_at__lte=schedule.check_at(monitor, deadline),
    ).exists()
    return None if met else ""


def _other_system_monitor_down(monitor: Monitor) -> bool:
    return (
        Monitor.objects.filter(system=True, state=Monitor.State.DOWN)
        .exclude(pk=monitor.pk)
        .exists()
    )
