"""What a recorded ping does to its monitor: runs opened and closed, deadlines moved,
incidents opened or resolved (in the caller's transaction, the monitor row locked)."""

from __future__ import annotations

from datetime import datetime, timedelta

from .. import incidents, schedule
from ..models import Incident, Monitor, Ping, Run

# What a ping may change on its monitor (a narrow UPDATE: pings are the hot path).
PING_FIELDS = [
    "last_ping_at",
    "last_ping_kind",
    "last_start_at",
    "start_expected_at",
    "start_check_at",
    "last_success_at",
    "last_partition",
    "state",
    "deadline_at",
    "check_at",
    "rate_window_start",
    "rate_count",
    "updated_at",
]


def track_run(monitor: Monitor, run_id: str, kind: str, *, now: datetime) -> None:
    """Open a run on ``start``; close the run this finish belongs to (the same run id, or
    without one the newest open run) and resolve its run-time incident, if any."""
    if kind == Ping.Kind.START:
        overdue = (
            now + timedelta(seconds=monitor.max_runtime_seconds)
            if monitor.max_runtime_seconds
            else None
        )
        Run.objects.create(monitor=monitor, run_id=run_id, started_at=now, overdue_at=overdue)
        return
    run = (
        Run.objects.filter(monitor=monitor, run_id=run_id, finished_at__isnull=True)
        .order_by("-started_at")
        .first()
    )
    if run is None:
        return
    run.finished_at, run.outcome, run.overdue_at = now, kind, None
    run.save(update_fields=["finished_at", "outcome", "overdue_at"])
    incidents.resolve(
        list(
            monitor.incidents.filter(
                reason=Incident.Reason.RUNTIME,
                deadline_at=run.started_at,
                resolved_at__isnull=True,
            )
        ),
        now=now,
    )


def apply_start(monitor: Monitor, *, now: datetime) -> None:
    """A ``/start``: resolve the start-late incidents it ends (the job did start, late), or
    else count it for the scheduled start it is in the window of, and plan the next one."""
    monitor.last_start_at = now
    if monitor.state == Monitor.State.PAUSED or not schedule.watches_start(monitor):
        return
    late = list(
        monitor.incidents.filter(reason=Incident.Reason.START_LATE, resolved_at__isnull=True)
    )
    if late:
        incidents.resolve(late, now=now)
        if not monitor.incidents.filter(resolved_at__isnull=True).exists():
            monitor.state = Monitor.State.UP
    if monitor.kind == Monitor.Kind.PERIOD or monitor.start_expected_at is None:
        monitor.start_expected_at = schedule.first_expected_start(monitor, now=now)
    elif not late and now >= schedule.start_window_opens(monitor, monitor.start_expected_at):
        monitor.start_expected_at = schedule.next_expected_start(monitor, monitor.start_expected_at)
    monitor.start_check_at = schedule.start_check_at(monitor, monitor.start_expected_at)


def duration_ms(monitor: Monitor, run_id: str, kind: str, *, now: datetime) -> int | None:
    if kind == Ping.Kind.START:
        return None
    starts = Ping.objects.filter(monitor=monitor, kind=Ping.Kind.START)
    start = (
        starts.filter(run_id=run_id[:64]).order_by("-received_at").first()
        if run_id
        else starts.filter(received_at__gte=monitor.last_ping_at or now)
        .order_by("-received_at")
        .first()
    )
    if start is None:
        return None
    return int((now - start.received_at).total_seconds() * 1000)


def apply_success(monitor: Monitor, partition: str, *, now: datetime) -> None:
    monitor.last_success_at = now
    if partition and partition > monitor.last_partition:
        monitor.last_partition = partition
    if monitor.state == Monitor.State.NEW:
        monitor.state = Monitor.State.UP
    # A paused monitor keeps no deadline (resume plans one from its own "now").
    if monitor.state != Monitor.State.PAUSED and (
        monitor.kind == Monitor.Kind.PERIOD or monitor.deadline_at is None
    ):
        monitor.deadline_at = schedule.first_deadline(monitor, now=now)
        monitor.check_at = schedule.check_at(monitor, monitor.deadline_at)
    if monitor.state != Monitor.State.DOWN:
        return  # every open incident puts its monitor down: nothing to resolve
    open_incidents = list(monitor.incidents.filter(resolved_at__isnull=True))
    satisfied = [i for i in open_incidents if satisfies(monitor, i, partition)]
    incidents.resolve(satisfied, now=now)
    if monitor.state == Monitor.State.DOWN and len(satisfied) == len(open_incidents):
        monitor.state = Monitor.State.UP


def satisfies(monitor: Monitor, incident: Incident, partition: str) -> bool:
    """Whether a success ping (for ``partition``) resolves ``incident``: a failure or a
    missed period by any success; a missed partition deadline only once every partition it
    expected has a success ping (a ping for yesterday never resolves today's)."""
    if incident.reason == Incident.Reason.RUNTIME:
        return False  # only the finish of that run resolves it
    if incident.reason != Incident.Reason.MISSED or not monitor.partitioning:
        return True
    expected = schedule.expected_partitions(monitor, incident.deadline_at) or [incident.partition]
    if partition not in expected:
        return False
    pinged = set(
        Ping.objects.filter(
            monitor=monitor, kind=Ping.Kind.SUCCESS, partition__in=expected
        ).values_list("partition", flat=True)
    )
    return pinged >= set(expected)


def apply_failure(
    monitor: Monitor, exit_status: int | None, partition: str, *, now: datetime
) -> None:
    """A failure opens a ``failed`` incident naming the partition the ping named (or,
    without one, the partition the run was for: ``incidents.open_incident``)."""
    if monitor.state == Monitor.State.PAUSED:
        return
    status = f" (exit status {exit_status})" if exit_status is not None else ""
    named = f" for partition {partition}" if partition and monitor.partitioning else ""
    if incidents.open_incident(
        monitor,
        reason=Incident.Reason.FAILED,
        deadline_at=now,
        partition=partition if monitor.partitioning else "",
        summary=f"{monitor.name} reported failure{named}{status}",
        now=now,
    ):
        monitor.state = Monitor.State.DOWN
