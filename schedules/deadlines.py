"""Deadlines: a cron expression read in an IANA time zone, with cronsim.

cronsim fires a daily-or-coarser schedule once per local day across DST changes: a wall
time that occurs twice (fall-back) fires at its first occurrence, and one skipped by a
spring-forward change fires at the end of the gap (02:30 becomes 03:00). Schedules that
fire every hour fire at each real instant whose wall clock matches, so both passes of a
repeated hour and none of a skipped one. (croniter fires a daily schedule twice on the
fall-back day, which would make a phantom deadline.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError


class CronError(ValueError):
    """The cron expression is not valid."""


CRON_FIELDS = 5


def validate_cron(expression: str) -> None:
    """Raise CronError unless ``expression`` is a valid five-field cron expression.

    cronsim also reads a sixth field (seconds) and would explain ``0 0 * * * *`` as
    hourly; deadlines are minute-grained, so exactly five fields are accepted."""
    count = len(expression.split())
    if count != CRON_FIELDS:
        raise CronError(
            f"expected {CRON_FIELDS} fields (minute hour day-of-month month day-of-week), "
            f"got {count}"
        )
    try:
        CronSim(expression, datetime.now(UTC))
    except CronSimError as exc:
        raise CronError(str(exc)) from exc


def next_deadline(expression: str, time_zone: str, after: datetime) -> datetime:
    """The first firing strictly after ``after``, in UTC.

    Args:
        expression: five-field cron, read as wall time in ``time_zone``.
        after: aware instant.
    """
    start = after.astimezone(ZoneInfo(time_zone))
    return next(CronSim(expression, start)).astimezone(UTC)


def previous_deadline(expression: str, time_zone: str, at_or_before: datetime) -> datetime:
    """The last firing at or before ``at_or_before``, in UTC."""
    start = (at_or_before + timedelta(seconds=1)).astimezone(ZoneInfo(time_zone))
    return next(CronSim(expression, start, reverse=True)).astimezone(UTC)


def describe(expression: str) -> str:
    """The schedule in English, e.g. "At 06:30 on Monday through Friday"."""
    return CronSim(expression, datetime.now(UTC)).explain()
