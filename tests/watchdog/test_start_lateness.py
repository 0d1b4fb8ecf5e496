"""Start lateness: a job that has not sent ``/start`` by its scheduled start plus the start
grace pages, separately from its deadline and its maximum run time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from watchdog import monitors, tokens
from watchdog.models import Incident, Monitor

from .test_watchdog import cycle, ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)


def nightly(channel, **fields):
    """Starts at 02:00 Berlin (01:00 UTC in winter), must be done by 06:30 Berlin."""
    with time_machine.travel(T0, tick=False):
        return monitors.monitor_create(
            channels=[channel],
            now=T0,
            name="orders nightly",
            kind=Monitor.Kind.DEADLINE,
            cron="30 6 * * *",
            timezone="Europe/Berlin",
            start_cron="0 2 * * *",
            start_grace_seconds=900,
            **fields,
        )


def started(monitor, at):
    assert ping(monitor, "/start", at=at).status_code == 200


def test_no_start_by_the_scheduled_start_plus_grace_pages_once(pagerduty, channel):
    monitor = nightly(channel)
    expected = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
    assert (monitor.start_expected_at, monitor.start_check_at) == (
        expected,
        expected + timedelta(minutes=15),
    )

    cycle(expected + timedelta(minutes=14))
    assert pagerduty == []
    cycle(expected + timedelta(minutes=15))
    cycle(expected + timedelta(minutes=16))

    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    assert "no start by 2026-11-29 01:00 UTC" in pagerduty[0]["payload"]["summary"]
    incident = Incident.objects.get()
    assert (incident.reason, incident.deadline_at) == (Incident.Reason.START_LATE, expected)
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.DOWN
    # Tomorrow's start is watched already.
    assert monitor.start_expected_at == expected + timedelta(days=1)

    # The job starts late: the incident resolves, and the start does not count for tomorrow.
    started(monitor, expected + timedelta(minutes=40))
    cycle(expected + timedelta(minutes=41))
    assert [e["event_action"] for e in pagerduty] == ["trigger", "resolve"]
    assert pagerduty[1]["dedup_key"] == pagerduty[0]["dedup_key"]
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.UP
    assert monitor.start_expected_at == expected + timedelta(days=1)


def test_a_start_in_time_or_a_little_early_means_no_page(pagerduty, channel):
    monitor = nightly(channel)
    expected = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
    started(monitor, expected - timedelta(minutes=30))  # early, but for tonight's run
    ping(monitor, at=expected + timedelta(minutes=50))
    cycle(expected + timedelta(hours=5))
    # A retry of tonight's run does not count for tomorrow's start.
    started(monitor, expected + timedelta(hours=2))
    cycle(expected + timedelta(days=1, minutes=16))

    assert [
        (e["event_action"], "2026-11-30 01:00" in e["payload"]["summary"]) for e in pagerduty
    ] == [("trigger", True)]


def test_after_downtime_each_missed_start_is_one_incident(pagerduty, channel):
    nightly(channel)
    cycle(datetime(2026, 12, 2, 12, 0, tzinfo=UTC))
    late = Incident.objects.filter(reason=Incident.Reason.START_LATE).order_by("deadline_at")
    assert [i.deadline_at for i in late] == [
        datetime(2026, 11, 29, 1, 0, tzinfo=UTC) + timedelta(days=n) for n in range(4)
    ]
    # ... next to the four missed deadlines (06:30 Berlin), each its own incident.
    assert Incident.objects.filter(reason=Incident.Reason.MISSED).count() == 4


def test_a_period_monitor_expects_each_start_one_period_after_the_last(pagerduty, channel):
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[channel],
            now=T0,
            name="every 10 min",
            kind=Monitor.Kind.PERIOD,
            period_seconds=600,
            grace_seconds=300,
            start_grace_seconds=60,
        )
    assert monitor.start_expected_at is None  # watched from its first start
    started(monitor, T0)
    ping(monitor, at=T0 + timedelta(minutes=2))
    monitor.refresh_from_db()
    assert monitor.start_check_at == T0 + timedelta(minutes=11)

    cycle(T0 + timedelta(minutes=11, seconds=1))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    assert Incident.objects.get().reason == Incident.Reason.START_LATE
    # Waits for the next start: no page per period (the missed success pages on its own).
    cycle(T0 + timedelta(minutes=30))
    assert Incident.objects.filter(reason=Incident.Reason.START_LATE).count() == 1
    assert Incident.objects.filter(reason=Incident.Reason.MISSED).count() == 1

    started(monitor, T0 + timedelta(minutes=31))
    cycle(T0 + timedelta(minutes=31, seconds=1))
    monitor.refresh_from_db()
    assert monitor.start_check_at == T0 + timedelta(minutes=42)
    assert [e["event_action"] for e in pagerduty] == ["trigger", "trigger", "resolve"]
    assert pagerduty[2]["dedup_key"] == pagerduty[0]["dedup_key"]  # the start-late one


def test_pausing_stops_watching_starts(pagerduty, channel):
    monitor = nightly(channel)
    monitors.monitor_pause(monitor, now=T0)
    cycle(datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    assert pagerduty == [] and not Incident.objects.exists()
    monitor = monitors.monitor_resume(monitor, now=datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    assert monitor.start_expected_at == datetime(2026, 12, 1, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "deadline", "cron": "30 6 * * *", "start_grace_seconds": 60}, "start_cron"),
        (
            {"kind": "deadline", "cron": "30 6 * * *", "start_cron": "0 2 * *"},
            "start_cron",
        ),
        (
            {"kind": "deadline", "cron": "30 6 * * *", "start_cron": "0 2 * * *"},
            "start_grace_seconds",
        ),
        (
            {
                "kind": "period",
                "period_seconds": 60,
                "start_cron": "0 2 * * *",
                "start_grace_seconds": 5,
            },
            "start_cron",
        ),
        (
            {"kind": "period", "period_seconds": 60, "start_grace_seconds": -1},
            "start_grace_seconds",
        ),
    ],
)
def test_bad_start_rules_are_refused_naming_the_field(fields, field):
    _, token = tokens.create("test")
    response = Client().post(
        "/api/v1/monitors",
        {"name": "bad", **fields},
        content_type="application/json",
        headers={"authorization": f"Bearer {token}"},
    )
    assert response.status_code == 400, response.content
    assert field in {e["field"] for e in response.json()["errors"]}
    assert not Monitor.objects.exists()
