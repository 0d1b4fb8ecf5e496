"""Deadlines: a cron expression read as wall-clock times in an IANA time zone.

Tidemark's DST policy, one rule for every cron shape and every zone (shifts of 30
minutes, as on Lord Howe Island, as well as 60; either hemisphere):

- A cron expression names wall-clock times in its zone, and each matching wall-clock time
  is one firing, at the first instant the zone's clock shows it.
- A time that occurs twice (the clock falls back) fires once, at its first occurrence.
  While the clock repeats times it already showed, nothing fires: ``*/15 * * * *`` in
  Europe/Berlin fires at 02:45 CEST and next at 03:00 CET, an hour and a quarter later.
- A time that does not occur (the clock springs forward over it) fires at the end of the
  gap, the first instant after it: 02:30 Berlin becomes 03:00 CEST. Several skipped times
  fire once there, together with 03:00 itself if that matches too.

So every wall-clock time the expression matches fires exactly once and none is skipped;
the firings are strictly increasing; and ``previous_deadline(next_deadline(t) - 1 s)`` is
never after ``t``. Logical periods (``periods.wall_time_to_utc``) read wall times the same
way. cronsim only matches expressions against naive wall times here: its own DST handling
depends on the expression's shape and skips a real firing after a 30-minute fall-back.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

from .periods import wall_time_to_utc


class CronError(ValueError):
    """The cron expression is not valid."""


CRON_FIELDS = 5
_SECOND = timedelta(seconds=1)


def next_deadline(expression: str, time_zone: str, after: datetime) -> datetime:
    """The first firing strictly after ``after``, in UTC (the module's DST policy).

    Args:
        expression: five-field cron, read as wall time in ``time_zone``.
        time_zone: IANA zone name.
        after: aware instant.
    """
    zone = ZoneInfo(time_zone)
    # Wall times at or before the wall clock of ``after`` first occur at or before it.
    wall = after.astimezone(zone).replace(tzinfo=None)
    for firing in CronSim(expression, wall):
        instant = wall_time_to_utc(firing, zone)
        if instant > after:  # a time the clock showed before it fell back is already past
            return instant
    raise CronError(f"{expression!r} never fires")  # pragma: no cover - cronsim stops first


def previous_deadline(expression: str, time_zone: str, at_or_before: datetime) -> datetime:
    """The last firing at or before ``at_or_before``, in UTC (the module's DST policy).

    Args:
        expression: five-field cron, read as wall time in ``time_zone``.
        time_zone: IANA zone name.
        at_or_before: aware instant (inclusive).
    """
    zone = ZoneInfo(time_zone)
    local = at_or_before.astimezone(zone)
    wall = local.replace(tzinfo=None, microsecond=0)
    # After the clock fell back, wall times up to the repeated span's end first occurred
    # before this instant: start from there.
    first_offset = wall.replace(tzinfo=zone, fold=0).utcoffset()
    wall += max(timedelta(0), first_offset - local.utcoffset())
    for firing in CronSim(expression, wall + _SECOND, reverse=True):
        instant = wall_time_to_utc(firing, zone)
        if instant <= at_or_before:
            return instant
    raise CronError(f"{expression!r} never fired")  # pragma: no cover - cronsim stops first


def describe(expression: str) -> str:
    """The schedule in English, e.g. "At 06:30 on Monday through Friday"."""
    return CronSim(expression, datetime.now(UTC)).explain()


def next_deadlines(expression: str, time_zone: str, after: datetime, count: int) -> list[datetime]:
    """The first ``count`` firings strictly after ``after`` (aware), in UTC, oldest first
    (``next_deadline`` repeated: the same DST policy)."""
    found: list[datetime] = []
    at = after
    for _ in range(count):
        at = next_deadline(expression, time_zone, at)
        found.append(at)
    return found


def local_and_utc(instant: datetime, time_zone: str) -> dict[str, str]:
    """An instant as people read it in two places: ``{"local": ISO 8601 with the zone's
    offset at that instant, "utc": ISO 8601 with Z}``, to the second."""
    instant = instant.replace(microsecond=0)
    return {
        "local": instant.astimezone(ZoneInfo(time_zone)).isoformat(),
        "utc": instant.astimezone(UTC).isoformat().replace("+00:00", "Z"),
    }


def as_read(instant: datetime, time_zone: str) -> dict[str, str]:
    """An instant as a page shows it, to the minute: ``{"local": "Wed 2026-12-02 06:30"
    (the wall time in ``time_zone``), "offset": "+01:00" (the zone's offset then),
    "utc": "2026-12-02 05:30"}``."""
    local = instant.astimezone(ZoneInfo(time_zone))
    return {
        "local": local.strftime("%a %Y-%m-%d %H:%M"),
        "offset": local.isoformat()[-6:],
        "utc": instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M"),
    }
