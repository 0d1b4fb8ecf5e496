from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedules import (
    FreshnessSla,
    next_deadline,
    period_containing,
    periods_ending_in,
    previous_deadline,
)
from schedules.periods import wall_time_to_utc


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "tz", "after", "expected"),
    [
        # 06:30 Berlin is 05:30 UTC in winter, 04:30 in summer
        ("30 6 * * *", "Europe/Berlin", utc(2026, 11, 29, 5, 30), utc(2026, 11, 30, 5, 30)),
        ("30 6 * * *", "Europe/Berlin", utc(2026, 7, 1, 0, 0), utc(2026, 7, 1, 4, 30)),
        # spring forward: 02:30 does not exist on 2026-03-29; it moves to 03:00 CEST
        ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12), utc(2026, 3, 29, 1, 0)),
        # fall back: 01:30 occurs twice in New York on 2026-11-01; the first one counts
        ("30 1 * * *", "America/New_York", utc(2026, 10, 31, 12), utc(2026, 11, 1, 5, 30)),
        ("30 1 * * *", "America/New_York", utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)),
        # zones far from UTC
        ("0 9 * * *", "Pacific/Kiritimati", utc(2026, 11, 29), utc(2026, 11, 29, 19)),
        ("0 9 1 * *", "Pacific/Pago_Pago", utc(2026, 11, 29), utc(2026, 12, 1, 20)),
    ],
)
def test_next_deadline_across_dst_and_far_zones(cron, tz, after, expected):
    assert next_deadline(cron, tz, after) == expected


def test_previous_deadline_includes_the_instant_itself():
    at = utc(2026, 11, 29, 5, 30)
    assert previous_deadline("30 6 * * *", "Europe/Berlin", at) == at
    assert previous_deadline(
        "30 6 * * *", "Europe/Berlin", at - timedelta(seconds=1)
    ) == at - timedelta(days=1)


def test_daily_sla_makes_yesterdays_partition_due():
    sla = FreshnessSla("30 6 * * *", "Europe/Berlin", 1800, "daily")
    deadline = sla.next_deadline(utc(2026, 11, 29, 0))
    assert deadline == utc(2026, 11, 29, 5, 30)
    assert [p.key for p in sla.due_at(deadline)] == ["2026-11-28"]
    assert sla.late_after(deadline) == utc(2026, 11, 29, 6, 0)


def test_weekday_sla_makes_the_weekend_due_on_monday():
    sla = FreshnessSla("0 8 * * 1-5", "America/New_York", 0, "daily")
    monday = sla.next_deadline(utc(2026, 11, 28, 12))  # a Saturday
    assert monday == utc(2026, 11, 30, 13)
    assert [p.key for p in sla.due_at(monday)] == ["2026-11-27", "2026-11-28", "2026-11-29"]


def test_hourly_sla_on_hourly_partitions():
    sla = FreshnessSla("15 * * * *", "UTC", 0, "hourly")
    deadline = sla.next_deadline(utc(2026, 11, 29, 10, 20))
    assert [p.key for p in sla.due_at(deadline)] == ["2026-11-29T10"]


def test_monthly_partitions_in_a_zone_far_from_utc():
    sla = FreshnessSla("0 6 2 * *", "Asia/Tokyo", 0, "monthly", "Asia/Tokyo")
    deadline = sla.next_deadline(utc(2026, 11, 15))
    assert deadline == utc(2026, 12, 1, 21)
    assert [p.key for p in sla.due_at(deadline)] == ["2026-11"]


def test_describe_sla_in_words():
    sla = FreshnessSla("30 6 * * *", "Europe/Berlin", 0, "daily")
    assert sla.describe() == (
        "At 06:30 every day, Europe/Berlin, "
        "for each day's partition closed since the previous deadline"
    )


def test_period_containing_the_repeated_hour_has_one_key():
    first = period_containing(utc(2026, 10, 25, 0, 30), "hourly", "Europe/Berlin")
    second = period_containing(utc(2026, 10, 25, 1, 30), "hourly", "Europe/Berlin")
    assert first == second and first.key == "2026-10-25T02"


# --- property tests against brute-force oracles -------------------------------------------

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Kiritimati",
    "Pacific/Pago_Pago",
    "America/St_Johns",
]


@st.composite
def daily_or_coarser_crons(draw):
    minute, hour = draw(st.integers(0, 59)), draw(st.integers(0, 23))
    kind = draw(st.sampled_from(["daily", "weekdays", "weekly", "monthly"]))
    if kind == "daily":
        return f"{minute} {hour} * * *", (lambda d: True)
    if kind == "weekdays":
        return f"{minute} {hour} * * 1-5", (lambda d: d.weekday() < 5)
    if kind == "weekly":
        dow = draw(st.integers(0, 6))  # cron: 0 = Sunday
        return f"{minute} {hour} * * {dow}", (lambda d: (d.weekday() + 1) % 7 == dow)
    dom = draw(st.integers(1, 28))
    return f"{minute} {hour} {dom} * *", (lambda d: d.day == dom)


instants = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2027, 12, 1), timezones=st.just(UTC)
)


def oracle_next_daily(cron, matches, tz, after):
    """Day by day: the matching wall time of each local day, first occurrence or gap end."""
    zone = ZoneInfo(tz)
    minute, hour = (int(x) for x in cron.split()[:2])
    day = after.astimezone(zone).date() - timedelta(days=1)
    for _ in range(80):
        if matches(day):
            instant = wall_time_to_utc(datetime(day.year, day.month, day.day, hour, minute), zone)
            if instant > after:
                return instant
        day += timedelta(days=1)
    raise AssertionError("no firing in 80 days")


@settings(max_examples=150, deadline=None)
@given(cron=daily_or_coarser_crons(), tz=st.sampled_from(ZONES), after=instants)
def test_next_deadline_agrees_with_a_day_by_day_oracle(cron, tz, after):
    expression, matches = cron
    assert next_deadline(expression, tz, after) == oracle_next_daily(expression, matches, tz, after)


@settings(max_examples=60, deadline=None)
@given(minute=st.integers(0, 59), tz=st.sampled_from(ZONES), after=instants)
def test_hourly_deadline_agrees_with_a_minute_by_minute_oracle(minute, tz, after):
    zone = ZoneInfo(tz)
    instant = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while instant.astimezone(zone).minute != minute:  # every real instant whose wall clock matches
        instant += timedelta(minutes=1)
    assert next_deadline(f"{minute} * * * *", tz, after) == instant


@settings(max_examples=50, deadline=None)
@given(
    partitioning=st.sampled_from(["hourly", "daily", "monthly"]),
    tz=st.sampled_from(ZONES),
    after=instants,
    hours=st.integers(1, 24 * 10),
)
def test_periods_ending_in_agrees_with_a_minute_by_minute_oracle(partitioning, tz, after, hours):
    """Walk the window minute by minute; a period ends where the containing key changes."""
    until = after + timedelta(hours=hours)
    expected = []
    previous = period_containing(after, partitioning, tz)
    instant = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while instant <= until:
        current = period_containing(instant, partitioning, tz)
        if current.key != previous.key:
            assert previous.end == current.start  # periods tile time: no gap, no overlap
            if previous.end <= until and previous.end > after:
                expected.append(previous.key)
            previous = current
        instant += timedelta(minutes=1)
    if previous.end <= until:
        expected.append(previous.key)
    assert [p.key for p in periods_ending_in(after, until, partitioning, tz)] == expected
