"""Which ready partitions a data monitor's definition carries: those whose period ends
after ``watchdog_feed.horizon_start``, the deadline before the first one not yet judged."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from catalog.watchdog_feed import horizon_start
from schedules import SKIP, BusinessCalendar, FreshnessSla


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


DAILY_AT_6 = FreshnessSla("0 6 * * *", "UTC", 600, "daily")


@pytest.mark.parametrize(
    ("sla", "now", "start"),
    [
        # Before today's deadline: today's expects yesterday's partition, which ended at
        # midnight, after yesterday's deadline.
        (DAILY_AT_6, utc(2026, 11, 28, 5), utc(2026, 11, 27, 6)),
        # In today's grace: today's deadline is still to be judged.
        (DAILY_AT_6, utc(2026, 11, 28, 6, 5), utc(2026, 11, 27, 6)),
        # Judged: tomorrow's deadline comes next, expecting today's partition.
        (DAILY_AT_6, utc(2026, 11, 28, 6, 10), utc(2026, 11, 28, 6)),
        # Mondays only: the deadline before next Monday's is this Monday's.
        (
            FreshnessSla("0 6 * * 1", "UTC", 0, "daily"),
            utc(2026, 11, 27, 3),
            utc(2026, 11, 23, 6),
        ),
        # Berlin's 06:30 is 05:30 UTC in winter.
        (
            FreshnessSla("30 6 * * *", "Europe/Berlin", 600, "daily", "Europe/Berlin"),
            utc(2026, 11, 28, 3),
            utc(2026, 11, 27, 5, 30),
        ),
        # Business days, on a Saturday: Monday's deadline is next and owes the weekend too,
        # so the horizon starts at Friday's deadline ...
        (
            FreshnessSla("0 6 * * *", "UTC", 0, "daily", calendar=BusinessCalendar()),
            utc(2026, 11, 28, 12),
            utc(2026, 11, 27, 6),
        ),
        # ... and with skip Monday owes only Sunday's partition: from Sunday's firing.
        (
            FreshnessSla(
                "0 6 * * *", "UTC", 0, "daily", calendar=BusinessCalendar(non_business_day=SKIP)
            ),
            utc(2026, 11, 28, 12),
            utc(2026, 11, 29, 6),
        ),
    ],
)
def test_horizon_start_is_the_deadline_before_the_first_not_yet_judged(sla, now, start):
    assert horizon_start(sla, now=now) == start
