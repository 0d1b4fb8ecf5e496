"""SLA calendars: deadlines that apply on business days only.

A business day is a local date in the SLA's time zone that is a working day: not a
weekend day and not a public holiday. Without a country, the weekend is Saturday and
Sunday and there are no holidays. With a country (ISO 3166-1 alpha-2, optionally a
subdivision such as a state or province), the maintained ``holidays`` package says which
days are public holidays, which days are the weekend there (Friday and Saturday in
Israel) and which weekend days are working days (a Saturday worked to bridge a holiday).

A deadline (a cron firing, ``schedules.deadlines``) is *on a business day* when the local
date of the firing instant, in the SLA's time zone, is one. Deadlines on other days never
happen; what was due at them is decided by the SLA's ``non_business_day`` rule:

- ``next_business_day``: the periods are due at the next deadline on a business day,
  together with that deadline's own (a daily 06:30 SLA: Friday's, Saturday's and Sunday's
  partitions are due Monday at 06:30; after a Monday holiday, Tuesday). Nothing is
  skipped: a daily cron with this calendar judges exactly what the weekday cron
  ``30 6 * * 1-5`` judges, plus holidays.
- ``skip``: the periods are not owed at all (a dataset with no weekend partitions): never
  due, never late. The next business-day deadline owes only what closed since the
  deadline before it, business day or not (a daily 06:30 SLA: Monday owes Sunday's
  partition; Friday's and Saturday's, due at the skipped Saturday and Sunday deadlines,
  are owed never).

Pure: no Django, no app imports. The holiday data is the pinned ``holidays`` release's;
upgrading it can change which days are holidays (a newly declared one, a corrected date).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays

from . import deadlines
from .periods import wall_time_to_utc

NEXT_BUSINESS_DAY = "next_business_day"
SKIP = "skip"
NON_BUSINESS_DAY_RULES = (NEXT_BUSINESS_DAY, SKIP)
# Saturday and Sunday (date.weekday()), the weekend without a country.
DEFAULT_WEEKEND = frozenset({5, 6})
# A deadline walk gives up past this span without a business-day firing: the cron then
# fires only on days that are never business days (``0 6 * * 6``, or Christmas Day).
LONGEST_WALK = timedelta(days=366 * 8)
HOW_TO_FIND_CODES = (
    "codes are ISO 3166-1 alpha-2 country codes (e.g. DE) and the holidays package's "
    "subdivision codes (e.g. BY), as listed under Available Countries at "
    "https://holidays.readthedocs.io/"
)


class CalendarError(ValueError):
    """A calendar field is not valid; ``field`` and ``value`` name it."""

    def __init__(self, field: str, value: object, message: str) -> None:
        self.field, self.value = field, value
        super().__init__(message)


@functools.cache
def supported() -> dict[str, tuple[str, ...]]:
    """``{country code: (subdivision codes, ...)}`` the ``holidays`` package knows."""
    return {
        country: tuple(subdivisions)
        for country, subdivisions in holidays.list_supported_countries(
            include_aliases=False
        ).items()
    }


def validate(country: str | None, subdivision: str | None) -> None:
    """Check a holidays country and subdivision.

    Args:
        country: ISO 3166-1 alpha-2 code the ``holidays`` package supports, or None.
        subdivision: one of that country's subdivision codes, or None.

    Raises:
        CalendarError: ``field`` is ``holidays_country`` (unknown country) or
            ``holidays_subdivision`` (unknown for the country, or given without one).
    """
    if country is None:
        if subdivision is not None:
            raise CalendarError(
                "holidays_subdivision",
                subdivision,
                f"subdivision {subdivision!r} needs a holidays country",
            )
        return
    if country not in supported():
        raise CalendarError(
            "holidays_country",
            country,
            f"unknown holidays country {country!r}: {HOW_TO_FIND_CODES}",
        )
    if subdivision is not None and subdivision not in supported()[country]:
        raise CalendarError(
            "holidays_subdivision",
            subdivision,
            f"unknown subdivision {subdivision!r} of {country}: one of "
            f"{', '.join(supported()[country])}; {HOW_TO_FIND_CODES}",
        )


@functools.lru_cache(maxsize=256)
def _holidays(country: str, subdivision: str | None) -> holidays.HolidayBase:
    return holidays.country_holidays(country, subdiv=subdivision)


@dataclass(frozen=True)
class BusinessCalendar:
    """Which days an SLA's deadlines apply on, and what a deadline on another day means.

    Args:
        country: ISO 3166-1 alpha-2 code (``validate``), or None: weekends only.
        subdivision: the country's subdivision code, or None: national holidays only.
        non_business_day: ``next_business_day`` or ``skip`` (the module docstring).
    """

    country: str | None = None
    subdivision: str | None = None
    non_business_day: str = NEXT_BUSINESS_DAY

    def is_business_day(self, day: date) -> bool:
        """Whether ``day`` (a local date) is a business day."""
        if self.country is None:
            return day.weekday() not in DEFAULT_WEEKEND
        return _holidays(self.country, self.subdivision).is_working_day(day)

    def describe(self) -> str:
        """The calendar in words, e.g. "business days only (DE-BY: weekends and public
        holidays off); what a deadline on another day owes is due on the next business
        day"."""
        where = self.country or ""
        if where and self.subdivision:
            where += f"-{self.subdivision}"
        off = f"{where}: weekends and public holidays off" if where else "Saturday and Sunday off"
        if self.non_business_day == SKIP:
            return f"business days only ({off}); a deadline on another day is skipped"
        return (
            f"business days only ({off}); what a deadline on another day owes is due on "
            "the next business day"
        )


def _local_date(instant: datetime, zone: ZoneInfo) -> date:
    return instant.astimezone(zone).date()


def _day_starts(day: date, zone: ZoneInfo) -> datetime:
    """The first instant (UTC) whose local date is ``day`` (midnight, or the end of a gap
    over it)."""
    midnight = datetime(day.year, day.month, day.day)  # noqa: DTZ001 - a wall time in zone
    return wall_time_to_utc(midnight, zone)


def next_business_deadline(
    expression: str, time_zone: str, calendar: BusinessCalendar, after: datetime
) -> datetime:
    """The first firing strictly after ``after`` whose local date is a business day (UTC).

    Firings' local dates never decrease (nothing fires while the clock repeats times after
    falling back), so a firing on a non-business day lets the walk jump to the next local
    day: a few steps per weekend or holiday, however often the cron fires.

    Raises:
        CalendarError: (field ``cron``) no such firing within ``LONGEST_WALK``.
    """
    return _business_firing(expression, time_zone, calendar, after, forward=True)


def previous_business_deadline(
    expression: str, time_zone: str, calendar: BusinessCalendar, at_or_before: datetime
) -> datetime:
    """The last firing at or before ``at_or_before`` whose local date is a business day
    (UTC).

    Raises:
        CalendarError: (field ``cron``) no such firing within ``LONGEST_WALK``.
    """
    return _business_firing(expression, time_zone, calendar, at_or_before, forward=False)


def _business_firing(
    expression: str, time_zone: str, calendar: BusinessCalendar, start: datetime, *, forward: bool
) -> datetime:
    """The walk both of the above make: firings from ``start`` on (``forward``: strictly
    after it, by ``next_deadline``; else at or before it, by ``previous_deadline``) until
    one's local date is a business day; a firing on another day skips the rest of that day.

    Raises:
        CalendarError: (field ``cron``) no such firing within ``LONGEST_WALK`` of ``start``.
    """
    zone = ZoneInfo(time_zone)
    step = deadlines.next_deadline if forward else deadlines.previous_deadline
    at = start
    while True:
        firing = step(expression, time_zone, at)
        day = _local_date(firing, zone)
        if calendar.is_business_day(day):
            return firing
        if abs(firing - start) > LONGEST_WALK:
            raise _never(expression)
        # A second before the next day starts (forward: the next firing is strictly after
        # it) or before this day starts (back: the previous one is at or before it).
        at = _day_starts(day + timedelta(days=1) if forward else day, zone) - timedelta(seconds=1)


def _never(expression: str) -> CalendarError:
    return CalendarError(
        "cron",
        expression,
        f"{expression!r} never fires on a business day of the SLA's calendar",
    )
