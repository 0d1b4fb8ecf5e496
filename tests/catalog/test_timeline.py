"""The dataset page's timeline: which status each period gets (pure, no database)."""

from datetime import UTC, datetime, timedelta

import pytest

from catalog import timeline
from schedules import DAILY, FreshnessSla

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
SLA = FreshnessSla(cron="0 6 * * *", time_zone="UTC", grace_seconds=1800, partitioning=DAILY)
# Registered on the 25th at 10:00: the 24th's deadline (25th 06:00) came before it.
REGISTERED = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def statuses(*, partitions=None, late_keys=None, sla=SLA, tracked_since=REGISTERED):
    periods = timeline.last_periods(NOW, DAILY, "UTC", 6)
    cells = timeline.cells(
        periods,
        partitions=partitions or {},
        late_keys=late_keys or {},
        sla=sla,
        now=NOW,
        tracked_since=tracked_since,
    )
    return {c.key: (c.status, c.late_seconds) for c in cells}


def test_periods_whose_deadline_precedes_registration_are_not_tracked():
    found = statuses()
    assert found["2026-11-22"] == ("untracked", None)
    assert found["2026-11-24"] == ("untracked", None)
    assert found["2026-11-25"] == ("missing", 2 * 86400 + 3 * 3600)  # deadline 26th 06:00
    assert found["2026-11-27"] == ("missing", 3 * 3600)  # deadline today 06:00
    assert "not tracked" in timeline.WORDS["untracked"]


@pytest.mark.parametrize(
    ("info", "late_keys", "expected"),
    [
        ({"state": "ready", "ready_at": REGISTERED}, {}, ("on_time", None)),
        ({"state": "failed"}, {}, ("failed", None)),
        ({"state": "pending"}, {}, ("untracked", None)),
        (
            {"state": "ready", "ready_at": REGISTERED + timedelta(hours=1)},
            {"2026-11-23": None},
            ("late", 29 * 3600),  # after its deadline, the 24th 06:00
        ),
    ],
)
def test_a_partition_before_registration_shows_its_own_state(info, late_keys, expected):
    assert statuses(partitions={"2026-11-23": info}, late_keys=late_keys)["2026-11-23"] == expected


def test_without_an_sla_a_period_ended_before_registration_is_not_tracked():
    found = statuses(sla=None)
    assert found["2026-11-24"] == ("untracked", None)  # ended the 25th 00:00
    assert found["2026-11-25"] == ("missing", None)


def test_without_tracked_since_every_period_is_judged():
    assert statuses(tracked_since=None)["2026-11-22"][0] == "missing"
