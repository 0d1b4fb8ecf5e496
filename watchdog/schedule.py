"""A monitor's deadlines, on top of the pure ``schedules`` package (cron + zone, logical
periods, DST rules): written once, shared with the catalog's freshness SLAs."""

from __future__ import annotations

from datetime import datetime, timedelta

from schedules import FreshnessSla, deadlines

from .models import Monitor

# A ping up to this much before a window opens still counts for it (clock drift).
EARLY_TOLERANCE = timedelta(seconds=60)


def _sla(monitor: Monitor) -> FreshnessSla:
    return FreshnessSla(
        cron=monitor.cron,
        time_zone=monitor.timezone,
        grace_seconds=monitor.grace_seconds,
        partitioning=monitor.partitioning,
        partition_time_zone=monitor.partition_timezone,
    )


def first_deadline(monitor: Monitor, *, now: datetime) -> datetime | None:
    """The first deadline to watch from ``now`` (UTC): the next cron firing, or for a period
    monitor one period after its last success (None before its first success)."""
    if monitor.kind == Monitor.Kind.DEADLINE:
        return deadlines.next_deadline(monitor.cron, monitor.timezone, now)
    if monitor.last_success_at is None:
        return None
    return monitor.last_success_at + timedelta(seconds=monitor.period_seconds)


def next_deadline(monitor: Monitor, deadline: datetime) -> datetime:
    """The deadline after ``deadline``."""
    if monitor.kind == Monitor.Kind.DEADLINE:
        return deadlines.next_deadline(monitor.cron, monitor.timezone, deadline)
    return deadline + timedelta(seconds=monitor.period_seconds)


def window_start(monitor: Monitor, deadline: datetime) -> datetime:
    """Success pings after this instant count for ``deadline`` (the previous deadline, less
    ``EARLY_TOLERANCE``)."""
    if monitor.kind == Monitor.Kind.DEADLINE:
        previous = deadlines.previous_deadline(
            monitor.cron, monitor.timezone, deadline - timedelta(seconds=1)
        )
    else:
        previous = deadline - timedelta(seconds=monitor.period_seconds)
    return previous - EARLY_TOLERANCE


def expected_partitions(monitor: Monitor, deadline: datetime) -> list[str]:
    """Partition keys due at ``deadline``, oldest first; empty without a partition rule."""
    if monitor.kind != Monitor.Kind.DEADLINE or not monitor.partitioning:
        return []
    return [period.key for period in _sla(monitor).due_at(deadline)]


def check_at(monitor: Monitor, deadline: datetime) -> datetime:
    """When ``deadline`` is judged: the deadline plus grace."""
    return deadline + timedelta(seconds=monitor.grace_seconds)


def describe(monitor: Monitor) -> str:
    """The schedule in words: "every 3600 s, 600 s grace" or the SLA's words."""
    if monitor.kind == Monitor.Kind.PERIOD:
        return f"every {monitor.period_seconds} s, {monitor.grace_seconds} s grace"
    words = (
        _sla(monitor).describe()
        if monitor.partitioning
        else (f"{deadlines.describe(monitor.cron)}, {monitor.timezone}")
    )
    return f"{words}, {monitor.grace_seconds} s grace"
