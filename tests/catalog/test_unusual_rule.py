"""The later-than-usual rule (``catalog.unusual_rule``), table-driven, no database."""

from datetime import UTC, datetime, timedelta

import pytest

from catalog import arrival_profiles, unusual_rule
from catalog.arrival_profiles import Arrival
from schedules import period_containing

RULE = unusual_rule.Rule(min_periods=14, min_margin_seconds=1800, spread_factor=3.0)
MONDAY = datetime(2026, 10, 12, tzinfo=UTC)


def profile_of(offsets_by_day: dict[int, list[int]]):
    """A daily profile: for each days-back n, the arrival ``seconds`` after period end."""
    arrivals = []
    for back, seconds in offsets_by_day.items():
        end = MONDAY - timedelta(days=back)
        arrivals += [Arrival(period_end=end, ready_at=end + timedelta(seconds=s)) for s in seconds]
    return arrivals


def daily(seconds_of_day: callable, days: int):
    """``days`` daily arrivals ending before MONDAY, the offset a function of the day."""
    arrivals = []
    for back in range(1, days + 1):
        end = MONDAY - timedelta(days=back)
        arrivals.append(Arrival(end, end + timedelta(seconds=seconds_of_day(end))))
    return arrival_profiles.profile(arrivals, time_zone="UTC", min_periods=5)


@pytest.mark.parametrize(
    ("seconds", "after"),
    [
        # Every day at 05:00: p50 = p90 = p99, the minimum margin decides: 05:30.
        (lambda end: 18000, 18000 + 1800),
        # Spread out: p50 + 3 x (p90 - p50) is past the minimum margin.
        (lambda end: 18000 + (end.day % 10) * 600, None),
    ],
)
def test_usual_arrival_is_p50_plus_a_margin_and_never_before_p99(seconds, after):
    profile = daily(seconds, 70)
    usual = unusual_rule.usual_arrival(profile, MONDAY, time_zone="UTC", rule=RULE)
    assert usual is not None and usual.group == "monday"
    spread = 3 * (usual.p90_seconds - usual.p50_seconds)
    assert usual.after_seconds == max(usual.p99_seconds, usual.p50_seconds + max(1800, spread))
    assert usual.after_seconds >= usual.p99_seconds
    if after is not None:
        assert usual.after_seconds == after


def test_p99_wins_when_one_arrival_in_a_hundred_is_far_later():
    # Monday arrivals at 05:00, but 2 of 12 Mondays at 09:00: p99 = 09:00.
    profile = daily(lambda end: 32400 if end.day in (5, 28) else 18000, 84)
    usual = unusual_rule.usual_arrival(profile, MONDAY, time_zone="UTC", rule=RULE)
    assert usual.p99_seconds == 32400
    assert usual.after_seconds == max(
        32400, usual.p50_seconds + max(1800, 3 * (usual.p90_seconds - usual.p50_seconds))
    )


def test_too_little_history_is_not_judged():
    profile = daily(lambda end: 18000, 13)
    assert unusual_rule.usual_arrival(profile, MONDAY, time_zone="UTC", rule=RULE) is None
    profile = daily(lambda end: 18000, 14)
    assert unusual_rule.usual_arrival(profile, MONDAY, time_zone="UTC", rule=RULE) is not None


def test_a_weekday_with_few_arrivals_uses_business_days_or_weekends():
    # 20 days: no weekday has 5 arrivals, business days and weekends do.
    profile = daily(lambda end: 18000 if end.weekday() < 5 else 28800, 20)
    monday = unusual_rule.usual_arrival(profile, MONDAY, time_zone="UTC", rule=RULE)
    sunday = unusual_rule.usual_arrival(
        profile, MONDAY - timedelta(days=1), time_zone="UTC", rule=RULE
    )
    assert (monday.group, monday.after_seconds) == ("business_days", 18000 + 1800)
    assert (sunday.group, sunday.after_seconds) == ("weekends", 28800 + 1800)


def test_a_producer_that_never_delivers_weekends_is_not_watched_on_weekends():
    arrivals = []
    for back in range(1, 43):
        end = MONDAY - timedelta(days=back)
        if end.weekday() < 5:
            arrivals.append(Arrival(end, end + timedelta(hours=5)))
    profile = arrival_profiles.profile(arrivals, time_zone="UTC", min_periods=5)
    saturday = MONDAY - timedelta(days=2)
    assert unusual_rule.usual_arrival(profile, saturday, time_zone="UTC", rule=RULE) is None


def test_watching_starts_at_the_oldest_period_not_yet_past_its_usual_time():
    profile = daily(lambda end: 18000, 30)

    def usual_of(period):
        return unusual_rule.usual_arrival(profile, period.end, time_zone="UTC", rule=RULE)

    # At 03:00 yesterday's partition is still within its usual time (due by 05:30).
    at = MONDAY + timedelta(hours=3)
    period, usual = unusual_rule.first_watched_from(
        at, partitioning="daily", time_zone="UTC", usual_of=usual_of
    )
    assert period.key == "2026-10-11"
    assert unusual_rule.expected_by(period, usual) == MONDAY + timedelta(hours=5, minutes=30)
    # At 05:30 it is past: watching starts with today's.
    period, _ = unusual_rule.first_watched_from(
        MONDAY + timedelta(hours=5, minutes=30),
        partitioning="daily",
        time_zone="UTC",
        usual_of=usual_of,
    )
    assert period.key == "2026-10-12"
    following, _ = unusual_rule.first_watched_after(
        period_containing(MONDAY, "daily"), partitioning="daily", time_zone="UTC", usual_of=usual_of
    )
    assert following.key == "2026-10-13"
