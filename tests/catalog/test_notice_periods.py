"""The steps of a change notice and what is due when, without the database."""

from datetime import UTC, datetime, timedelta

import pytest

from catalog.notice_periods import EFFECTIVE, REMINDER, Due, Step, due, earliest_effective_at, plan

DAY = 86400
ANNOUNCED = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
EFFECTIVE_AT = ANNOUNCED + timedelta(days=14)


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def test_earliest_effective_at_counts_whole_days_of_24_hours():
    assert earliest_effective_at(utc(2026, 3, 20, 12), 14) == utc(2026, 4, 3, 12)
    assert earliest_effective_at(ANNOUNCED, 0) == ANNOUNCED


@pytest.mark.parametrize(
    ("effective_at", "reminders", "expected"),
    [
        # 14 days' notice: both default points, then the effective step.
        (
            EFFECTIVE_AT,
            [7 * DAY, DAY],
            [(utc(2026, 12, 6, 7), REMINDER, 7 * DAY), (utc(2026, 12, 12, 7), REMINDER, DAY)],
        ),
        # 3 days' notice: the 7-day point was past at announcement and is never sent.
        (ANNOUNCED + timedelta(days=3), [7 * DAY, DAY], [(utc(2026, 12, 1, 7), REMINDER, DAY)]),
        # A point exactly at the announcement is skipped too; order and duplicates do not
        # matter, non-positive points are ignored.
        (
            ANNOUNCED + timedelta(days=1),
            [DAY, DAY, 3600, 0, -5],
            [(utc(2026, 11, 30, 6), REMINDER, 3600)],
        ),
        # Effective at once (an emergency): nothing but the effective step.
        (ANNOUNCED, [7 * DAY, DAY], []),
    ],
)
def test_plan_lists_reminders_after_the_announcement_then_the_effective_step(
    effective_at, reminders, expected
):
    steps = plan(announced_at=ANNOUNCED, effective_at=effective_at, reminder_seconds=reminders)
    assert [(s.at, s.kind, s.seconds_before) for s in steps[:-1]] == expected
    assert steps[-1] == Step(at=effective_at, kind=EFFECTIVE)


STEPS = plan(announced_at=ANNOUNCED, effective_at=EFFECTIVE_AT, reminder_seconds=[7 * DAY, DAY])
SEVEN, ONE, EFFECT = STEPS


@pytest.mark.parametrize(
    ("since", "now", "step", "next_at"),
    [
        (SEVEN.at, SEVEN.at - timedelta(seconds=1), None, SEVEN.at),  # not yet
        (SEVEN.at, SEVEN.at, SEVEN, ONE.at),  # on time
        (SEVEN.at, ONE.at + timedelta(hours=1), ONE, EFFECT.at),  # overdue: the latest only
        (ONE.at, EFFECT.at + timedelta(minutes=1), EFFECT, None),  # effective wins
        (SEVEN.at, EFFECT.at + timedelta(days=1), EFFECT, None),  # after an outage
        (None, EFFECT.at, None, None),  # nothing left
    ],
)
def test_due_picks_one_step_and_the_next_time(since, now, step, next_at):
    assert due(STEPS, since=since, now=now) == Due(step, next_at)
