"""The DST policy of ``schedules.deadlines`` checked against a brute-force walk of the wall
clock (``firings_oracle``): every cron shape, zones shifting by 30, 60 and 120 minutes,
both hemispheres, changes at midnight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from schedules import next_deadline, previous_deadline

from .firings_oracle import firings
from .strategies import crons, oracle_examples, zone_and_start

WINDOW = timedelta(days=3)
MOST_FIRINGS = 400  # enough to cross a change for every-minute schedules


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@settings(max_examples=oracle_examples(60), deadline=None)
@given(cron=crons, where=zone_and_start(), probes=st.lists(st.integers(0, 3 * 24 * 3600)))
# cronsim's own DST handling skipped 02:00 after Lord Howe fell back from 02:00 to 01:30.
@example(cron="0 */2 * * *", where=("Australia/Lord_Howe", utc(2026, 4, 4, 13)), probes=[])
# Berlin springs forward over 02:00-03:00: 02:30 and 02:45 fire once, at 03:00.
@example(cron="30,45 2 * * *", where=("Europe/Berlin", utc(2026, 3, 28, 12)), probes=[])
# Berlin falls back: */15 fires through the first 02:xx, not again through the second.
@example(cron="*/15 * * * *", where=("Europe/Berlin", utc(2026, 10, 25, 0)), probes=[3600])
# Santiago springs forward at midnight: 00:30 does not exist that day.
@example(cron="30 0 * * *", where=("America/Santiago", utc(2026, 9, 5, 12)), probes=[])
def test_deadlines_are_the_wall_clock_firings(cron, where, probes):
    zone, start = where
    expected = firings(cron, zone, start, start + WINDOW)[:MOST_FIRINGS]
    got, at = [], start
    while len(got) < len(expected) or (not expected and not got):
        at = next_deadline(cron, zone, at)
        if at > start + WINDOW:
            break
        got.append(at)
    assert got[: len(expected)] == expected
    if expected:
        end = expected[-1]
        for offset in probes:
            probe = start + timedelta(seconds=offset)
            before = [f for f in expected if f <= probe]
            if before and probe <= end:
                assert previous_deadline(cron, zone, probe) == before[-1]
        for t in [start, *expected[:-1]]:
            # The previous deadline of the next deadline after t is never after t.
            following = next_deadline(cron, zone, t)
            assert previous_deadline(cron, zone, following - timedelta(seconds=1)) <= t


@pytest.mark.parametrize(
    ("cron", "zone", "after", "firings_"),
    [
        # Lord Howe springs forward from 02:00 to 02:30: 02:15 fires at 02:30.
        (
            "15,45 2 * * *",
            "Australia/Lord_Howe",
            utc(2026, 10, 3, 12),
            [utc(2026, 10, 3, 15, 30), utc(2026, 10, 3, 15, 45), utc(2026, 10, 4, 15, 15)],
        ),
        # ... and falls back from 02:00 to 01:30: 01:45 fires at its first occurrence only.
        (
            "45 1 * * *",
            "Australia/Lord_Howe",
            utc(2026, 4, 4, 0),
            [utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)],
        ),
    ],
)
def test_half_hour_shifts(cron, zone, after, firings_):
    got = [next_deadline(cron, zone, after)]
    while len(got) < len(firings_):
        got.append(next_deadline(cron, zone, got[-1]))
    assert got == firings_
