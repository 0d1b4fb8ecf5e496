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
    # Late since deadline plus grace, as freshness counts it.
    assert found["2026-11-25"] == ("missing", 2 * 86400 + 2 * 3600 + 1800)  # since 26th 06:30
    assert found["2026-11-27"] == ("missing", 2 * 3600 + 1800)  # since today 06:30
    assert "not tracked" in timeline.WORDS["untracked"]


@pytest.mark.parametrize(
    ("info", "late_keys", "expected"),
    [
        # Its deadline (the 24th 06:00) came before registration: never judged, so
        # neither on time nor late.
        ({"state": "ready", "ready_at": REGISTERED}, {}, ("unjudged", None)),
        ({"state": "failed"}, {}, ("failed", None)),
        ({"state": "pending"}, {}, ("untracked", None)),
        (
            {"state": "ready", "ready_at": REGISTERED + timedelta(hours=1)},
            {"2026-11-23": None},
            ("late", 28 * 3600 + 1800),  # after deadline plus grace, the 24th 06:30
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


def test_a_partition_ready_days_after_a_deadline_before_registration_is_not_on_time():
    """Its deadline was never judged (freshness does not judge deadlines before the
    dataset was registered): the picture says so instead of "ready on time"."""
    ready_late = {"state": "ready", "ready_at": REGISTERED + timedelta(days=2)}
    assert statuses(partitions={"2026-11-22": ready_late})["2026-11-22"] == ("unjudged", None)
    assert timeline.WORDS["unjudged"] == "ready (deadline before registration, not judged)"
    # Registered before its deadline: judged, and late by the same measure as freshness.
    tracked = statuses(partitions={"2026-11-22": ready_late}, tracked_since=None)
    assert tracked["2026-11-22"] == (
        "late",
        int(
            (
                ready_late["ready_at"] - SLA.late_after(datetime(2026, 11, 23, 6, tzinfo=UTC))
            ).total_seconds()
        ),
    )


@pytest.mark.parametrize("grace", [0, 1800, 7200])
def test_a_missing_partition_is_late_by_what_freshness_says(grace):
    """One measure: since deadline plus grace, ``FreshnessSla.late_seconds``."""
    sla = FreshnessSla(cron="0 6 * * *", time_zone="UTC", grace_seconds=grace, partitioning=DAILY)
    found = statuses(sla=sla)
    assert found["2026-11-27"] == ("missing", 3 * 3600 - grace)
    assert sla.late_seconds(datetime(2026, 11, 28, 6, tzinfo=UTC), NOW) == 3 * 3600 - grace
