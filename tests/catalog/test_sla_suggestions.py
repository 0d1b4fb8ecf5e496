"""SLA suggestions without the database: examples either way, then a property test of the
"missed too often" rule against a brute-force count."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.arrival_profiles import Arrival
from catalog.sla_suggestions import EARLIER, LATER, suggest
from schedules import FreshnessSla

START = datetime(2026, 9, 1, tzinfo=UTC)


def sla(cron, grace=0, tz="UTC", partition_tz="UTC"):
    return FreshnessSla(
        cron=cron,
        time_zone=tz,
        grace_seconds=grace,
        partitioning="daily",
        partition_time_zone=partition_tz,
    )


def daily(minutes_after_end: list[int]) -> list[Arrival]:
    """Daily partitions from 2026-09-01, the n-th ready ``minutes_after_end[n]`` minutes
    after its period ends (midnight UTC)."""
    return [
        Arrival(
            period_end=START + timedelta(days=n + 1),
            ready_at=START + timedelta(days=n + 1, minutes=m),
        )
        for n, m in enumerate(minutes_after_end)
    ]


USUAL = [5 * 60 + n % 40 for n in range(40)]  # 05:00 to 05:39, every day


def test_a_deadline_hours_after_the_data_is_there_suggests_earlier():
    found = suggest(daily(USUAL), sla("0 9 * * *"), min_periods=14)
    assert found.direction == EARLIER and found.periods == 40 and found.met_percent == 100
    assert found.ready_by_seconds == (5 * 60 + 37) * 60  # rank 38 of 40
    assert found.deadline_seconds == 9 * 3600
    assert found.words.startswith(
        "Ready by 5 h 37 min after the period ends (about 05:37 UTC) on 95% of the last 40 "
        "periods; the deadline is 9 h 00 min after it (about 09:00 UTC)"
    )


def test_a_deadline_missed_more_than_one_period_in_twenty_suggests_later():
    found = suggest(daily(USUAL), sla("30 5 * * *", grace=300), min_periods=14)
    # Ready by 05:35 (deadline plus grace): minutes 0..35 of each 40, 36 of 40 = 90%.
    assert found.direction == LATER and found.met_percent == 90
    assert "only 90% were ready by deadline plus grace" in found.words


@pytest.mark.parametrize(
    ("cron", "grace"),
    [
        ("0 6 * * *", 0),  # 20 minutes after p95: close enough
        ("0 5 * * *", 45 * 60),  # 05:45 with grace: every period met it
        ("30 6 * * *", 0),  # 52 min of slack on 95% of periods: less than an hour
    ],
)
def test_an_sla_close_to_the_arrivals_gets_no_suggestion(cron, grace):
    assert suggest(daily(USUAL), sla(cron, grace), min_periods=14) is None


def test_no_suggestion_before_enough_history():
    assert suggest(daily(USUAL[:13]), sla("0 12 * * *"), min_periods=14) is None
    assert suggest(daily(USUAL[:14]), sla("0 12 * * *"), min_periods=14).direction == EARLIER


def test_a_weekday_only_cron_judges_the_weekend_at_monday():
    # Friday's partition (period ends Saturday) is due Monday 09:00: lots of slack, and
    # only weekday deadlines could be earlier, so the weekday slack decides.
    found = suggest(daily(USUAL), sla("0 9 * * MON-FRI"), min_periods=14)
    assert found.direction == EARLIER and found.deadline_seconds == 9 * 3600


@settings(max_examples=150, deadline=None)
@given(
    minutes=st.lists(st.integers(-60, 36 * 60), min_size=14, max_size=60),
    hour=st.integers(0, 23),
    grace_minutes=st.integers(0, 180),
)
def test_later_exactly_when_fewer_than_95_percent_met_deadline_plus_grace(
    minutes, hour, grace_minutes
):
    rule = sla(f"0 {hour} * * *", grace=grace_minutes * 60)
    arrivals = daily(minutes)
    met = 0
    for a in arrivals:
        deadline = a.period_end.replace(hour=hour)
        if deadline < a.period_end:
            deadline += timedelta(days=1)
        met += a.ready_at <= deadline + timedelta(minutes=grace_minutes)
    found = suggest(arrivals, rule, min_periods=14)
    assert (found is not None and found.direction == LATER) == (met * 100 < 95 * len(arrivals))
    if found is not None:
        assert found.met_percent == met * 100 // len(arrivals)


@settings(max_examples=80, deadline=None)
@given(
    hours=st.lists(st.integers(0, 24 * 20), min_size=14, max_size=60, unique=True),
    delays=st.lists(st.integers(0, 600), min_size=60, max_size=60),
    cron_hours=st.sets(st.integers(0, 23), min_size=1, max_size=3),
    tz=st.sampled_from(["UTC", "Europe/Berlin", "Australia/Lord_Howe"]),
)
def test_hourly_periods_sharing_a_deadline_are_judged_as_deadline_of_judges_them(
    hours, delays, cron_hours, tz
):
    rule = FreshnessSla(
        cron=f"0 {','.join(map(str, sorted(cron_hours)))} * * *",
        time_zone=tz,
        grace_seconds=0,
        partitioning="hourly",
    )
    start = datetime(2026, 10, 15, tzinfo=UTC)  # across Berlin's fall-back
    arrivals = [
        Arrival(start + timedelta(hours=h), start + timedelta(hours=h, minutes=delays[i]))
        for i, h in enumerate(hours)
    ]
    met = sum(
        a.ready_at <= rule.next_deadline(a.period_end - timedelta(seconds=1)) for a in arrivals
    )
    found = suggest(arrivals, rule, min_periods=14)
    assert (found is not None and found.direction == LATER) == (met * 100 < 95 * len(arrivals))
    if found is not None:
        assert found.met_percent == met * 100 // len(arrivals)
