"""A monitor's deadlines, on top of the pure ``schedules`` package (cron + zone, logical
periods, DST rules, business-day calendars): written once, shared with the catalog's
freshness SLAs, so a catalog-fed monitor judges exactly the deadlines its dataset's SLA
does (``FreshnessSla``: the same next/previous deadline and ``due_since``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from schedules import BusinessCalendar, FreshnessSla, deadlines, period_containing

from .models import Monitor

# A ping up to this much before a window opens may still count for it (clock drift): a
# ping counts for one deadline only, the earliest whose window holds it and that no other
# ping met (evaluation), so one just before a deadline meets that one, not also the next.
EARLY_TOLERANCE = timedelta(seconds=60)


def calendar_of(monitor: Monitor) -> BusinessCalendar | None:
    """The monitor's business-day calendar, or None (every firing is a deadline)."""
    if monitor.calendar != Monitor.Calendar.BUSINESS_DAYS:
        return None
    return BusinessCalendar(
        country=monitor.holidays_country or None,
        subdivision=monitor.holidays_subdivision or None,
        non_business_day=monitor.non_business_day,
    )


def _sla(monitor: Monitor) -> FreshnessSla:
    """A deadline monitor's deadlines as an SLA (its partitioning may be blank: then only
    the deadline methods and ``due_since`` are used)."""
    return FreshnessSla(
        cron=monitor.cron,
        time_zone=monitor.timezone,
        grace_seconds=monitor.grace_seconds,
        partitioning=monitor.partitioning,
        partition_time_zone=monitor.partition_timezone,
        calendar=calendar_of(monitor),
    )


def first_deadline(monitor: Monitor, *, now: datetime) -> datetime | None:
    """The first deadline to watch from ``now`` (UTC): the next cron firing, or for a period
    monitor one period after its last success (None before its first success)."""
    if monitor.kind == Monitor.Kind.DEADLINE:
        return _sla(monitor).next_deadline(now)
    if monitor.last_success_at is None:
        return None
    return monitor.last_success_at + timedelta(seconds=monitor.period_seconds)


def upcoming_deadlines(monitor: Monitor, *, now: datetime, count: int = 3) -> list[datetime]:
    """The monitor's next ``count`` deadlines from ``now`` (UTC, oldest first), as the loop
    will judge them; empty while paused, and for a period monitor before its first success."""
    if monitor.state == Monitor.State.PAUSED:
        return []
    at = first_deadline(monitor, now=now)
    if at is None:
        return []
    if at <= now:  # a period monitor whose deadline passed: the next ones after now
        period = timedelta(seconds=monitor.period_seconds)
        at += period * ((now - at) // period + 1)
    found = [at]
    while len(found) < count:
        found.append(next_deadline(monitor, found[-1]))
    return found


def next_deadline(monitor: Monitor, deadline: datetime) -> datetime:
    """The deadline after ``deadline``."""
    if monitor.kind == Monitor.Kind.DEADLINE:
        return _sla(monitor).next_deadline(deadline)
    return deadline + timedelta(seconds=monitor.period_seconds)


def window_start(monitor: Monitor, deadline: datetime) -> datetime:
    """Success pings after this instant may count for ``deadline`` (the previous deadline,
    less ``EARLY_TOLERANCE``; with a calendar that skips non-business days, the previous
    cron firing: ``FreshnessSla.due_since``), unless an earlier deadline counted them."""
    if monitor.kind == Monitor.Kind.DEADLINE:
        previous = _sla(monitor).due_since(deadline)
    else:
        previous = deadline - timedelta(seconds=monitor.period_seconds)
    return previous - EARLY_TOLERANCE


def run_window(monitor: Monitor, deadline: datetime) -> tuple[datetime, datetime]:
    """When the run for ``deadline`` reports: (opens, closes], from ``window_start`` (for
    a period monitor, one period before the deadline) to the end of the grace."""
    if monitor.kind == Monitor.Kind.PERIOD:
        opens = deadline - timedelta(seconds=monitor.period_seconds)
    else:
        opens = window_start(monitor, deadline)
    return opens, check_at(monitor, deadline)


def expected_partitions(monitor: Monitor, deadline: datetime) -> list[str]:
    """Partition keys due at ``deadline``, oldest first; empty without a partition rule,
    and when no period closed since the previous deadline (then nothing is due)."""
    if monitor.kind != Monitor.Kind.DEADLINE or not monitor.partitioning:
        return []
    return [period.key for period in _sla(monitor).due_at(deadline)]


def partitions_for(monitor: Monitor, at: datetime) -> list[str]:
    """The partitions that what happens at ``at`` (a run's start or failure, a scheduled
    start) works towards: those expected by the first deadline whose grace has not passed
    by ``at`` and that expects any, oldest first; empty without a partition rule.

    That deadline is the first one expecting the first period to close after the deadline
    before the first whose grace has not passed (``FreshnessSla.due_at``): found in a few
    steps, however much more often the cron fires than periods close.

    Args:
        at: aware UTC.
    """
    if monitor.kind != Monitor.Kind.DEADLINE or not monitor.partitioning:
        return []
    sla = _sla(monitor)
    first = sla.next_deadline(at - timedelta(seconds=monitor.grace_seconds))
    previous = sla.due_since(first)
    closes = period_containing(previous, monitor.partitioning, monitor.partition_timezone).end
    deadline = first if closes <= first else sla.next_deadline(closes - timedelta(microseconds=1))
    return expected_partitions(monitor, deadline)


def check_at(monitor: Monitor, deadline: datetime) -> datetime:
    """When ``deadline`` is judged: the deadline plus grace."""
    return deadline + timedelta(seconds=monitor.grace_seconds)


def describe(monitor: Monitor) -> str:
    """The schedule in words: "every 3600 s, 600 s grace" or the SLA's words."""
    if monitor.kind == Monitor.Kind.PERIOD:
        return f"every {monitor.period_seconds} s, {monitor.grace_seconds} s grace"
    if monitor.partitioning:
        words = _sla(monitor).describe()
    else:
        words = f"{deadlines.describe(monitor.cron)}, {monitor.timezone}"
        if (calendar := calendar_of(monitor)) is not None:
            words = f"{words}, {calendar.describe()}"
    return f"{words}, {monitor.grace_seconds} s grace"


def _starts(monitor: Monitor) -> FreshnessSla:
    """A deadline monitor's scheduled starts (``start_cron``), on the same calendar as its
    deadlines: a job that does not run on holidays does not start on them either."""
    return FreshnessSla(
        cron=monitor.start_cron,
        time_zone=monitor.timezone,
        grace_seconds=0,
        partitioning="",
        calendar=calendar_of(monitor),
    )


def watches_start(monitor: Monitor) -> bool:
    """Whether the monitor has a start-lateness limit (``start_grace_seconds``)."""
    return monitor.start_grace_seconds is not None and (
        monitor.kind == Monitor.Kind.PERIOD or bool(monitor.start_cron)
    )


def first_expected_start(monitor: Monitor, *, now: datetime) -> datetime | None:
    """The first scheduled start to watch from ``now`` (UTC): the next ``start_cron``
    firing, or for a period monitor one period after its last ``/start`` (None before its
    first start, and None without a start-lateness limit)."""
    if not watches_start(monitor):
        return None
    if monitor.kind == Monitor.Kind.DEADLINE:
        return _starts(monitor).next_deadline(now)
    if monitor.last_start_at is None:
        return None
    return monitor.last_start_at + timedelta(seconds=monitor.period_seconds)


def next_expected_start(monitor: Monitor, expected: datetime) -> datetime | None:
    """The scheduled start after ``expected``; None for a period monitor, whose next start
    is planned from its next ``/start``."""
    if monitor.kind == Monitor.Kind.DEADLINE:
        return _starts(monitor).next_deadline(expected)
    return None


def start_window_opens(monitor: Monitor, expected: datetime) -> datetime:
    """A ``/start`` after this instant counts for the scheduled start ``expected``: halfway
    from the previous firing, so an early start counts and a retry of the previous run does
    not."""
    previous = _starts(monitor).previous_deadline(expected - timedelta(seconds=1))
    return expected - (expected - previous) / 2


def start_check_at(monitor: Monitor, expected: datetime | None) -> datetime | None:
    """When the scheduled start ``expected`` is judged: plus the start grace."""
    if expected is None:
        return None
    return expected + timedelta(seconds=monitor.start_grace_seconds or 0)
