"""A brute-force statement of the DST policy, independent of ``schedules.deadlines``.

Walk real time minute by minute and watch the zone's wall clock: a firing happens at the
first minute at which the clock reaches (or jumps past) a wall time the expression
matches. While the clock repeats times it already showed (after falling back) nothing
fires; when it jumps (springing forward) every matching time jumped over fires once, at
the jump. cronsim is used only to say which naive wall-clock minutes match.
"""

from __future__ import annotations

import bisect
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

MINUTE = timedelta(minutes=1)
# Longer than any span of repeated wall time, so the highest wall time shown before the
# window is known when the walk reaches it.
LEAD = timedelta(days=1)


def matching_wall_minutes(expression: str, low: datetime, high: datetime) -> list[datetime]:
    """Naive wall-clock minutes in ``(low, high]`` that ``expression`` matches, sorted."""
    found = []
    for wall in CronSim(expression, low):
        if wall > high:
            break
        found.append(wall)
    return found


def firings(expression: str, time_zone: str, start: datetime, end: datetime) -> list[datetime]:
    """Every firing in ``(start, end]`` (aware UTC, whole minutes), oldest first."""
    zone = ZoneInfo(time_zone)
    walk = start.astimezone(UTC).replace(second=0, microsecond=0) - LEAD

    def wall(instant: datetime) -> datetime:
        return instant.astimezone(zone).replace(tzinfo=None)

    matches = matching_wall_minutes(expression, wall(walk) - LEAD, wall(end) + LEAD)
    shown = wall(walk)  # the highest wall time the clock has shown so far
    found = []
    while walk < end:
        walk += MINUTE
        now_shows = wall(walk)
        if now_shows > shown:
            # Matching wall times in (shown, now_shows]: reached (or jumped over) just now.
            first = bisect.bisect_right(matches, shown)
            if first < len(matches) and matches[first] <= now_shows and walk > start:
                found.append(walk)
            shown = now_shows
    return found
