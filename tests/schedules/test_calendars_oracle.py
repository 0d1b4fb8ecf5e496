"""SLA calendars checked against brute force: the wall clock walked minute by minute
(``firings_oracle``) gives every cron firing, a firing is a deadline when its local date
is a business day (weekday, holidays of the ``holidays`` package: the data, not the walk,
is shared), and each period is owed at the first deadline at or after its end
(``next_business_day``) or, with ``skip``, at the first firing at or after its end when
that one is on a business day, else never."""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from schedules import NEXT_BUSINESS_DAY, SKIP, BusinessCalendar, FreshnessSla, periods_ending_in

from .firings_oracle import firings
from .strategies import ZONES, cron_expressions, oracle_examples, transitions

WINDOW = timedelta(days=7)  # a weekend, and the holiday the start is drawn before
MOST_FIRINGS = 200

# (country, subdivision, the zone people there read deadlines in)
PLACES = [
    (None, None, "Europe/Berlin"),
    ("DE", "BY", "Europe/Berlin"),
    ("US", "CA", "America/Los_Angeles"),
    ("GB", "SCT", "Europe/London"),
    ("IL", None, "Asia/Jerusalem"),  # the weekend is Friday and Saturday
    ("AU", "NSW", "Australia/Sydney"),
    ("CL", None, "America/Santiago"),  # the clock changes at midnight
    ("NZ", "CIT", "Pacific/Chatham"),  # +12:45 / +13:45
    ("CN", None, "Asia/Shanghai"),  # weekend days worked to bridge holidays
]


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@functools.cache
def _holidays(country: str, subdivision: str | None) -> holidays.HolidayBase:
    return holidays.country_holidays(country, subdiv=subdivision)


def oracle_business_day(country: str | None, subdivision: str | None, day: date) -> bool:
    """Saturday and Sunday off without a country; else the country's weekend and public
    holidays, less the weekend days it works."""
    if country is None:
        return day.weekday() < 5
    calendar = _holidays(country, subdivision)
    holiday = day in calendar  # fills the year, weekend workdays too
    if day in calendar.weekend_workdays:
        return True
    return day.weekday() not in calendar.weekend and not holiday


@st.composite
def calendar_cases(draw):
    """(cron, zone, BusinessCalendar, start): most often a few days before one of the
    country's holidays, sometimes before a DST change, sometimes in a zone unlike the
    country's own."""
    country, subdivision, zone = draw(st.sampled_from(PLACES))
    if draw(st.integers(0, 4)) == 0:
        zone = draw(st.sampled_from(ZONES))
    rule = draw(st.sampled_from([NEXT_BUSINESS_DAY, SKIP]))
    calendar = BusinessCalendar(country, subdivision, rule)
    year = draw(st.sampled_from([2025, 2026, 2027]))
    anchor_kind = draw(st.sampled_from(["holiday", "holiday", "dst", "any"]))
    anchors: list[datetime] = []
    if anchor_kind == "holiday" and country is not None:
        days = sorted(holidays.country_holidays(country, subdiv=subdivision, years=year))
        anchors = [datetime(d.year, d.month, d.day, tzinfo=UTC) for d in days]
    elif anchor_kind == "dst":
        anchors = list(transitions(zone, year))
    if anchors:
        start = draw(st.sampled_from(anchors)) - timedelta(
            minutes=draw(st.integers(0, 5 * 24 * 60))
        )
    else:
        start = utc(year, 1, 1) + timedelta(minutes=draw(st.integers(0, 364 * 24 * 60)))
    cron = draw(
        st.one_of(
            st.builds(lambda m, h: f"{m} {h} * * *", st.integers(0, 59), st.integers(0, 23)),
            cron_expressions(last_day=28, months=False),
        )
    )
    return cron, zone, calendar, start


def _business(firing: datetime, zone: str, calendar: BusinessCalendar) -> bool:
    local = firing.astimezone(ZoneInfo(zone)).date()
    return oracle_business_day(calendar.country, calendar.subdivision, local)


@settings(max_examples=oracle_examples(25), deadline=None)
@given(case=calendar_cases(), probes=st.lists(st.integers(0, 7 * 24 * 3600), max_size=5))
# Christmas in Bavaria: the 24th is worked, the 25th and 26th are holidays.
@example(
    case=("30 6 * * *", "Europe/Berlin", BusinessCalendar("DE", "BY"), utc(2026, 12, 22)),
    probes=[3 * 24 * 3600],
)
# Santiago springs forward at midnight on a Sunday: 00:30 fires at 01:00, still Sunday.
@example(
    case=("30 0 * * *", "America/Santiago", BusinessCalendar("CL"), utc(2026, 9, 4, 12)),
    probes=[],
)
def test_deadlines_are_the_firings_on_business_days(case, probes):
    cron, zone, calendar, start = case
    sla = FreshnessSla(cron, zone, 0, "daily", calendar=calendar)
    raw = firings(cron, zone, start, start + WINDOW)
    expected = [f for f in raw if _business(f, zone, calendar)][:MOST_FIRINGS]
    got, at = [], start
    while len(got) < len(expected):
        at = sla.next_deadline(at)
        got.append(at)
    assert got == expected
    if expected and len(expected) < MOST_FIRINGS:
        # None in the rest of the window: the next one is after it.
        assert sla.next_deadline(expected[-1]) > start + WINDOW
    for offset in probes:
        probe = start + timedelta(seconds=offset)
        before = [f for f in expected if f <= probe]
        if before and (len(expected) < MOST_FIRINGS or probe <= expected[-1]):
            assert sla.previous_deadline(probe) == before[-1]


@settings(max_examples=oracle_examples(25), deadline=None)
@given(case=calendar_cases(), partitioning=st.sampled_from(["daily", "hourly"]))
@example(
    case=("30 6 * * *", "Europe/Berlin", BusinessCalendar("DE", "BY", SKIP), utc(2026, 12, 22)),
    partitioning="daily",
)
@example(
    case=(
        "0 8 * * *",
        "America/Los_Angeles",
        BusinessCalendar("US", "CA", NEXT_BUSINESS_DAY),
        utc(2026, 7, 1),
    ),
    partitioning="hourly",
)
def test_each_period_is_owed_where_the_oracle_says(case, partitioning):
    cron, zone, calendar, start = case
    partition_zone = zone if partitioning == "daily" else "UTC"
    sla = FreshnessSla(cron, zone, 0, partitioning, partition_zone, calendar)
    end = start + WINDOW
    raw = firings(cron, zone, start, end)
    business = [f for f in raw if _business(f, zone, calendar)]

    def oracle_deadline(period):
        """The deadline ``period`` is owed at, None when never; ... when the window
        does not tell."""
        first_raw = next((f for f in raw if f >= period.end), None)
        if first_raw is None:
            return ...
        if calendar.non_business_day == SKIP:
            return first_raw if first_raw in business else None
        return next((f for f in business if f >= period.end), ...)

    periods = [
        p
        for p in periods_ending_in(start, end, partitioning, partition_zone)
        if p.end > (raw[0] if raw else end)  # the firing before the first is not in view
    ]
    owed_at = {p.key: oracle_deadline(p) for p in periods}
    known = [p for p in periods if owed_at[p.key] is not ...]
    for period in known[:200]:
        assert sla.deadline_of(period) == owed_at[period.key], period.key
    if known:
        assert sla.owed_periods(known[0].start, known[-1].end, None) == [
            p for p in known if owed_at[p.key] is not None
        ]
    # Each deadline owes exactly the periods the oracle puts at it (from the second
    # deadline in view on: the deadline and the firing before it are in view, so every
    # period it owes is listed).
    for deadline in business[1:60]:
        assert [p.key for p in sla.due_at(deadline)] == [
            p.key for p in periods if owed_at[p.key] == deadline
        ]


def test_a_cron_that_fires_only_on_weekends_is_refused():
    sla = FreshnessSla("0 6 * * 6", "UTC", 0, "daily", calendar=BusinessCalendar())
    with pytest.raises(ValueError, match="never fires on a business day") as refused:
        sla.next_deadline(utc(2026, 12, 1))
    assert refused.value.field == "cron"


@pytest.mark.parametrize(
    ("rule", "monday_owes"),
    [
        # Friday's, Saturday's and Sunday's partitions are due on Monday ...
        (NEXT_BUSINESS_DAY, ["2026-11-27", "2026-11-28", "2026-11-29"]),
        # ... or Friday's and Saturday's, due at the weekend's firings, are owed never.
        (SKIP, ["2026-11-29"]),
    ],
)
def test_a_weekend_in_words_of_the_rule(rule, monday_owes):
    sla = FreshnessSla("30 6 * * *", "UTC", 0, "daily", calendar=BusinessCalendar(None, None, rule))
    monday = sla.next_deadline(utc(2026, 11, 27, 7))  # after Friday's deadline
    assert monday == utc(2026, 11, 30, 6, 30)
    assert [p.key for p in sla.due_at(monday)] == monday_owes
