"""Arrival profiles without the database: examples, then a property test against an
oracle that states each rule in the simplest code."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.arrival_profiles import (
    BUSINESS_DAYS,
    WEEKDAYS,
    Arrival,
    Quantiles,
    nearest_rank,
    profile,
    quantiles,
    weekday_of,
    window_start,
    without_backfills,
)
from catalog.timeline import last_periods


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def daily(day: datetime, ready_after: timedelta) -> Arrival:
    """The arrival of the daily partition of ``day`` (UTC), ``ready_after`` its end."""
    end = day + timedelta(days=1)
    return Arrival(period_end=end, ready_at=end + ready_after)


@pytest.mark.parametrize(
    ("values", "percent", "expected"),
    [
        ([7], 50, 7),
        ([7], 99, 7),
        ([1, 2], 50, 1),  # rank ceil(1.0) = 1
        ([1, 2, 3], 50, 2),  # rank ceil(1.5) = 2
        (list(range(1, 11)), 90, 9),  # exactly 9 of 10 at or before 9
        (list(range(1, 11)), 99, 10),  # fewer than 100: the latest seen
        (list(range(1, 101)), 99, 99),
        (list(range(1, 101)), 90, 90),
        (list(range(1, 31)), 90, 27),  # 0.9 * 30 = 27 without float error
    ],
)
def test_nearest_rank_is_the_smallest_value_covering_the_percent(values, percent, expected):
    assert nearest_rank(values, percent) == expected


def test_nearest_rank_refuses_nothing_and_bad_percents():
    with pytest.raises(ValueError):
        nearest_rank([], 50)
    with pytest.raises(ValueError):
        nearest_rank([1], 0)


def test_quantiles_below_min_periods_keep_only_the_count():
    assert quantiles([5, 1, 3], min_periods=4) == Quantiles(periods=3)
    assert quantiles([], min_periods=1) == Quantiles(periods=0)
    assert quantiles([5, 1, 3, 9], min_periods=4) == Quantiles(4, 3, 9, 9)


def test_a_partition_ready_after_a_newer_one_is_a_backfill():
    # Days 1..4 land in order at 05:00; day 0 is filled in later, after day 4.
    arrivals = [daily(utc(2026, 11, d), timedelta(hours=5)) for d in (1, 2, 3, 4)]
    backfill = Arrival(period_end=utc(2026, 11, 1), ready_at=utc(2026, 11, 5, 12))
    kept, dropped = without_backfills([*arrivals, backfill])
    assert kept == arrivals
    assert dropped == [backfill]


def test_an_outage_caught_up_oldest_first_is_late_not_a_backfill():
    # Three days land together, oldest first, two seconds apart: each was the newest ready.
    late = [
        Arrival(period_end=utc(2026, 11, d), ready_at=utc(2026, 11, 4, 9, 0, d)) for d in (2, 3, 4)
    ]
    kept, dropped = without_backfills(late)
    assert kept == late and dropped == []


def test_a_batch_at_one_instant_has_no_backfills():
    at = utc(2026, 11, 4, 9)
    batch = [Arrival(period_end=utc(2026, 11, d), ready_at=at) for d in (2, 3, 4)]
    assert without_backfills(batch) == (batch, [])


def test_weekday_is_the_local_day_the_period_ends():
    # Friday 2026-11-27's daily partition ends at midnight into Saturday.
    assert weekday_of(utc(2026, 11, 28), "UTC") == "saturday"
    # Berlin midnight into Monday 2026-11-30 is 23:00 UTC on Sunday.
    assert weekday_of(utc(2026, 11, 29, 23), "Europe/Berlin") == "monday"
    assert weekday_of(utc(2026, 11, 29, 23), "UTC") == "sunday"


def test_profile_of_a_business_day_producer_separates_weekends():
    # Four weeks of daily partitions from Sunday 2026-11-01: on weekdays' mornings the
    # job lands at 05:00 + d minutes; Friday's and Saturday's partitions wait for Monday.
    arrivals = []
    for offset in range(28):
        day = utc(2026, 11, 1) + timedelta(days=offset)
        end = day + timedelta(days=1)
        if end.weekday() < 5:
            arrivals.append(Arrival(end, end + timedelta(hours=5, minutes=offset)))
        else:
            monday = end + timedelta(days=7 - end.weekday())
            arrivals.append(Arrival(end, monday + timedelta(hours=5, minutes=offset)))
    result = profile(arrivals, time_zone="UTC", min_periods=5)
    assert result.periods == 28 and result.backfills == 0
    assert result.business_days.periods == 20 and result.weekends.periods == 8
    # Business-day minutes 0-4, 7-11, 14-18, 21-25: the 10th of 20 is 11, the 20th 25.
    assert result.business_days.p50_seconds == 5 * 3600 + 11 * 60
    assert result.business_days.p99_seconds == 5 * 3600 + 25 * 60
    assert result.weekends.p50_seconds > 24 * 3600
    assert result.weekdays["monday"].periods == 4
    assert result.weekdays["monday"].p50_seconds is None  # 4 < min_periods


def test_profile_counts_only_periods_ending_by_until_but_judges_backfills_with_newer():
    old = daily(utc(2026, 11, 1), timedelta(hours=30))  # ready 2026-11-03 06:00
    newer = daily(utc(2026, 11, 2), timedelta(hours=1))  # ready 2026-11-03 01:00
    result = profile([old, newer], time_zone="UTC", min_periods=1, until=utc(2026, 11, 2))
    assert result.periods == 0 and result.backfills == 1


@settings(max_examples=150, deadline=None)
@given(
    instant=st.datetimes(
        min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
    ),
    partitioning=st.sampled_from(["hourly", "daily", "monthly"]),
    tz=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]),
    count=st.integers(1, 120),
)
def test_window_start_is_the_start_of_the_last_count_periods(instant, partitioning, tz, count):
    periods = last_periods(instant, partitioning, tz, count)
    found = window_start(instant, partitioning, tz, count)
    if partitioning == "hourly":
        # A fall-back hour inside the window (one period, two hours) may shorten it by one.
        assert found in {periods[0].start, periods[1].start if count > 1 else None}
    else:
        assert found == periods[0].start


def test_window_start_refuses_unpartitioned_data():
    with pytest.raises(ValueError):
        window_start(utc(2026, 11, 1), "none", "UTC", 90)


# --- property: the profile against an oracle -------------------------------------------


def oracle_percentile(values: list[int], percent: int) -> int:
    """The smallest seen value that at least ``percent`` % of values are at or below."""
    return min(v for v in values if 100 * sum(1 for w in values if w <= v) >= percent * len(values))


def oracle_groups(arrivals: list[Arrival], tz: str, until: datetime) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {"all": [], "business_days": [], "weekends": []}
    groups.update({day: [] for day in WEEKDAYS})
    for a in arrivals:
        backfill = any(b.period_end > a.period_end and b.ready_at < a.ready_at for b in arrivals)
        if backfill or a.period_end > until:
            continue
        seconds = int((a.ready_at - a.period_end).total_seconds() // 1)
        day = WEEKDAYS[a.period_end.astimezone(ZoneInfo(tz)).weekday()]
        groups["all"].append(seconds)
        groups["business_days" if day in BUSINESS_DAYS else "weekends"].append(seconds)
        groups[day].append(seconds)
    return groups


ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Pacific/Kiritimati"])


@st.composite
def histories(draw):
    """Distinct hourly-aligned period ends over six weeks (around a DST change), each
    ready a random number of seconds (early, usual or very late) after it."""
    start = utc(2026, 3, 1)
    hours = draw(st.lists(st.integers(0, 42 * 24), min_size=0, max_size=40, unique=True))
    offsets = st.one_of(st.integers(-3600, 0), st.integers(0, 6 * 3600), st.integers(0, 5 * 86400))
    return [
        Arrival(
            period_end=start + timedelta(hours=h),
            ready_at=start
            + timedelta(hours=h, seconds=draw(offsets), microseconds=draw(st.integers(0, 999_999))),
        )
        for h in hours
    ]


@settings(max_examples=200, deadline=None)
@given(
    arrivals=histories(),
    tz=ZONES,
    min_periods=st.integers(1, 6),
    until_hour=st.integers(0, 42 * 24),
)
def test_profile_matches_the_oracle(arrivals, tz, min_periods, until_hour):
    until = utc(2026, 3, 1) + timedelta(hours=until_hour)
    result = profile(arrivals, time_zone=tz, min_periods=min_periods, until=until)
    groups = oracle_groups(arrivals, tz, until)
    found = {
        "all": result.all_days,
        "business_days": result.business_days,
        "weekends": result.weekends,
        **result.weekdays,
    }
    assert found.keys() == groups.keys()
    for name, values in groups.items():
        q = found[name]
        assert q.periods == len(values), name
        if len(values) < min_periods:
            assert (q.p50_seconds, q.p90_seconds, q.p99_seconds) == (None, None, None)
        else:
            assert q.p50_seconds == oracle_percentile(values, 50), name
            assert q.p90_seconds == oracle_percentile(values, 90), name
            assert q.p99_seconds == oracle_percentile(values, 99), name
    assert result.periods == len(groups["all"])
    assert result.backfills == sum(
        1
        for a in arrivals
        if a.period_end <= until
        and any(b.period_end > a.period_end and b.ready_at < a.ready_at for b in arrivals)
    )
