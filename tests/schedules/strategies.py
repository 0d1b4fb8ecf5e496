"""Hypothesis strategies for schedules: cron expressions of every shape, and zones with
their DST transitions (30- and 60-minute shifts, both hemispheres, changes at midnight)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from hypothesis import strategies as st

from schedules import CronError, check_cron

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # shifts by 30 minutes
    "Australia/Sydney",  # southern hemisphere
    "America/Santiago",  # southern, changes at midnight
    "America/Havana",  # changes at midnight
    "Pacific/Chatham",  # +12:45 / +13:45
    "America/St_Johns",  # -03:30 / -02:30
    "Antarctica/Troll",  # shifts by two hours
    "Asia/Kolkata",  # no DST
]


def _field(low: int, high: int, steps: list[int]) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    span = st.tuples(value, value).map(sorted).map(lambda ab: f"{ab[0]}-{ab[1]}")
    single = value.map(str)
    part = st.one_of(
        single,
        span,
        st.tuples(span, st.sampled_from(steps)).map(lambda s: f"{s[0]}/{s[1]}"),
    )
    return st.one_of(
        st.just("*"),
        st.sampled_from(steps).map(lambda n: f"*/{n}"),
        part,
        st.lists(part, min_size=2, max_size=3).map(",".join),
    )


def _valid(expression: str) -> bool:
    """What Tidemark accepts as a deadline cron (``check_cron``: cronsim's grammar, less
    what never fires or reads differently in cronsim and POSIX)."""
    try:
        CronSim(expression, datetime(2026, 1, 1))
        check_cron(expression)
    except (CronSimError, CronError):
        return False
    return True


def cron_expressions(*, last_day: int = 31, months: bool = True) -> st.SearchStrategy[str]:
    """Five-field cron expressions: steps, ranges, lists, day-of-month and day-of-week.

    Args:
        last_day: the highest day of month drawn (28 makes every expression fire at least
            monthly, with ``months=False``).
        months: whether the month field is drawn (else ``*``).
    """
    return st.builds(
        lambda minute, hour, dom, month, dow: f"{minute} {hour} {dom} {month} {dow}",
        _field(0, 59, [5, 7, 10, 15, 20, 30]),
        _field(0, 23, [2, 3, 5, 6, 12]),
        st.one_of(st.just("*"), st.just("*"), _field(1, last_day, [2, 7, 10])),
        st.one_of(st.just("*"), st.just("*"), st.just("*"), _field(1, 12, [2, 3]))
        if months
        else st.just("*"),
        st.one_of(st.just("*"), st.just("*"), st.sampled_from(["1-5", "0,6", "3", "*/2"])),
    ).filter(_valid)


crons = cron_expressions()


@functools.cache
def transitions(time_zone: str, year: int) -> tuple[datetime, ...]:
    """The instants (UTC, to the minute) at which ``time_zone``'s UTC offset changes."""
    zone = ZoneInfo(time_zone)
    found = []
    step = timedelta(hours=6)
    at = datetime(year, 1, 1, tzinfo=UTC)
    while at.year == year:
        if at.astimezone(zone).utcoffset() != (at + step).astimezone(zone).utcoffset():
            low, high = at, at + step
            while high - low > timedelta(minutes=1):
                mid = low + (high - low) / 2
                if mid.astimezone(zone).utcoffset() == low.astimezone(zone).utcoffset():
                    low = mid
                else:
                    high = mid
            found.append(high.replace(second=0, microsecond=0))
        at += step
    return tuple(found)


@st.composite
def zone_and_start(draw, *, years=(2025, 2026, 2027)) -> tuple[str, datetime]:
    """A zone and an instant (UTC), most often a day or two before one of its changes."""
    zone = draw(st.sampled_from(ZONES))
    year = draw(st.sampled_from(years))
    changes = transitions(zone, year)
    if changes and draw(st.integers(0, 4)):
        anchor = draw(st.sampled_from(changes))
        before = timedelta(minutes=draw(st.integers(0, 3 * 24 * 60)))
        return zone, anchor - before
    return zone, datetime(year, 1, 1, tzinfo=UTC) + timedelta(
        minutes=draw(st.integers(0, 364 * 24 * 60))
    )


def oracle_examples(default: int) -> int:
    """How many examples an oracle property test runs: ``default`` in the ordinary run,
    ``TIDEMARK_ORACLE_EXAMPLES`` for a long one."""
    import os

    return int(os.environ.get("TIDEMARK_ORACLE_EXAMPLES", default))
