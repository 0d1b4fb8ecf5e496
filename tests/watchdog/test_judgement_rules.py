"""The judgement rules as a person meets them, through the real ping URLs, the REST API
(as the catalog calls it) and the loop paging a local PagerDuty stand-in: one ping fills
one deadline, one cause is one page, and a pause sticks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from rest_framework.test import APIClient

from watchdog import monitors, tokens
from watchdog.models import Incident, Monitor

from .test_watchdog import cycle, ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

# 06:30 Berlin is 05:30 UTC in November.
DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)
DAY = timedelta(days=1)
GRACE = timedelta(minutes=10)


def actions(pagerduty) -> list[str]:
    return [e["event_action"] for e in pagerduty]


@pytest.fixture
def api(db, pagerduty) -> APIClient:
    _, token = tokens.create("catalog")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def upsert(api, external_id: str, version: str, *, at=DEADLINE - timedelta(hours=12), **fields):
    """The catalog's definition of a monitor, as its feed sends it."""
    body = {
        "owner": "orders",
        "kind": "deadline",
        "cron": "30 6 * * *",
        "timezone": "Europe/Berlin",
        "grace_seconds": int(GRACE.total_seconds()),
        "channels": [{"kind": "pagerduty", "target": "R" * 32}],
        "version": version,
        **fields,
    }
    with time_machine.travel(at, tick=False):
        response = api.post(f"/api/v1/monitors/external/{external_id}", body, format="json")
    assert response.status_code in (200, 208), response.content
    return Monitor.objects.get(external_id=external_id)


def deadline_monitor(channel, **fields) -> Monitor:
    at = DEADLINE - timedelta(hours=12)
    with time_machine.travel(at, tick=False):
        return monitors.monitor_create(
            channels=[channel],
            now=at,
            name="orders export",
            kind=Monitor.Kind.DEADLINE,
            cron="30 6 * * *",
            timezone="Europe/Berlin",
            grace_seconds=int(GRACE.total_seconds()),
            **fields,
        )


# --- one ping fills one deadline ----------------------------------------------------------


def test_a_job_that_pings_just_before_its_deadline_is_paged_for_a_skipped_run(pagerduty, channel):
    monitor = deadline_monitor(channel)
    ping(monitor, at=DEADLINE - timedelta(seconds=30))  # today's run, just in time
    cycle(DEADLINE + GRACE)
    # Tomorrow's run is skipped: today's ping, inside tomorrow's early tolerance, does
    # not count a second time.
    cycle(DEADLINE + DAY + GRACE)
    ping(monitor, at=DEADLINE + 2 * DAY - timedelta(seconds=30))
    cycle(DEADLINE + 2 * DAY + GRACE)

    assert actions(pagerduty) == ["trigger", "resolve"]
    [incident] = Incident.objects.all()
    assert (incident.reason, incident.deadline_at) == ("missed", DEADLINE + DAY)


def test_two_pings_at_once_fill_two_deadlines(pagerduty, channel):
    monitor = deadline_monitor(channel)
    at = DEADLINE - timedelta(seconds=30)
    ping(monitor, at=at)
    ping(monitor, at=at)  # a retry in the same second: early for tomorrow
    cycle(DEADLINE + DAY + GRACE)
    assert pagerduty == [] and not Incident.objects.exists()


# --- one cause, one page ------------------------------------------------------------------


def test_a_deadline_both_monitors_of_a_dataset_miss_is_one_page(api, pagerduty):
    data = upsert(api, "tidemark:dataset:7:data", "1", name="orders data", partitioning="daily")
    pipeline = upsert(api, "tidemark:dataset:7:pipeline", "1", name="orders pipeline")

    cycle(DEADLINE + GRACE)
    cycle(DEADLINE + GRACE + timedelta(minutes=1))

    assert actions(pagerduty) == ["trigger"]
    paging = Incident.objects.get(part_of=None)
    part = Incident.objects.get(part_of=paging)
    assert {paging.monitor_id, part.monitor_id} == {data.pk, pipeline.pk}
    assert paging.deadline_at == part.deadline_at == DEADLINE

    # The pipeline ran late; the page stays until the data lands too.
    ping(pipeline, at=DEADLINE + timedelta(minutes=20))
    cycle(DEADLINE + timedelta(minutes=21))
    assert actions(pagerduty) == ["trigger"]
    with time_machine.travel(DEADLINE + timedelta(minutes=30), tick=False):
        landed = api.post(
            "/api/v1/monitors/external/tidemark:dataset:7:data/ping?partition=2026-11-28"
        )
    assert landed.status_code == 200, landed.content
    cycle(DEADLINE + timedelta(minutes=31))
    assert actions(pagerduty) == ["trigger", "resolve"]
    assert pagerduty[1]["dedup_key"] == pagerduty[0]["dedup_key"]
    assert not Incident.objects.filter(resolved_at=None).exists()


def test_a_run_that_failed_and_then_misses_its_deadline_is_one_page(pagerduty, channel):
    monitor = deadline_monitor(channel)
    ping(monitor, "/1", at=DEADLINE - timedelta(hours=1))
    cycle(DEADLINE - timedelta(minutes=59))
    assert actions(pagerduty) == ["trigger"]
    assert "exit status 1" in pagerduty[0]["payload"]["summary"]

    cycle(DEADLINE + GRACE)
    cycle(DEADLINE + GRACE + timedelta(minutes=1))
    assert actions(pagerduty) == ["trigger"]  # the lateness joins the failure's page
    missed = Incident.objects.get(reason="missed")
    assert missed.part_of == Incident.objects.get(reason="failed")

    ping(monitor, at=DEADLINE + timedelta(minutes=40))
    cycle(DEADLINE + timedelta(minutes=41))
    assert actions(pagerduty) == ["trigger", "resolve"]
    assert not Incident.objects.filter(resolved_at=None).exists()


# --- pauses stick ---------------------------------------------------------------------------


def test_no_ping_update_or_catalog_upsert_resumes_a_paused_monitor(api, pagerduty):
    monitor = upsert(api, "tidemark:dataset:7:pipeline", "1", name="orders pipeline")
    with time_machine.travel(DEADLINE - timedelta(hours=6), tick=False):
        assert api.post(f"/api/v1/monitors/{monitor.pk}/pause").status_code == 200
    for suffix in ("", "/start", "/fail", "/0", "/3"):
        assert ping(monitor, suffix, at=DEADLINE - timedelta(hours=5)).status_code == 200
    with time_machine.travel(DEADLINE - timedelta(hours=4), tick=False):
        patched = api.patch(
            f"/api/v1/monitors/{monitor.pk}", {"grace_seconds": 900, "name": "p"}, format="json"
        )
    assert patched.status_code == 200, patched.content
    # The catalog sends the definition again, newer and active, as after any dataset edit.
    upsert(api, "tidemark:dataset:7:pipeline", "2", name="orders pipeline", active=True)

    cycle(DEADLINE + 3 * DAY)
    monitor.refresh_from_db()
    assert (monitor.state, monitor.paused_by) == ("paused", "API token catalog")
    assert monitor.check_at is None
    assert pagerduty == [] and not Incident.objects.exists()


def test_only_the_definitions_own_pause_is_lifted_by_the_definition(api, pagerduty):
    key = "tidemark:dataset:7:pipeline"
    monitor = upsert(api, key, "1", name="orders pipeline", active=False)
    assert (monitor.state, monitor.paused_by_definition) == ("paused", True)
    monitor = upsert(api, key, "2", name="orders pipeline", active=True)
    assert monitor.state == "new" and monitor.check_at == DEADLINE + GRACE

    upsert(api, key, "3", name="orders pipeline", active=False)
    # An operator pauses it too: now the pause is theirs.
    monitors.monitor_pause(monitor, now=DEADLINE - timedelta(hours=1), by="alice")
    monitor = upsert(api, key, "4", name="orders pipeline", active=True)
    assert (monitor.state, monitor.paused_by) == ("paused", "alice")
    monitor = monitors.monitor_resume(monitor, now=DEADLINE - timedelta(minutes=30))
    assert monitor.state == "new"


def test_resuming_a_monitor_that_is_not_paused_changes_nothing(pagerduty, channel):
    monitor = deadline_monitor(channel)
    cycle(DEADLINE + GRACE)
    monitor.refresh_from_db()
    before = (monitor.state, monitor.deadline_at, monitor.check_at)
    assert before == ("down", DEADLINE + DAY, DEADLINE + DAY + GRACE)

    monitors.monitor_resume(monitor, now=DEADLINE + DAY + timedelta(minutes=5))
    monitor.refresh_from_db()
    assert (monitor.state, monitor.deadline_at, monitor.check_at) == before
    cycle(DEADLINE + DAY + GRACE)
    assert Incident.objects.filter(resolved_at=None).count() == 2


def test_a_failure_reported_for_an_earlier_deadline_does_not_hide_a_later_miss(pagerduty, channel):
    monitor = deadline_monitor(channel)
    ping(monitor, "/fail", at=DEADLINE - timedelta(hours=1))
    cycle(DEADLINE + GRACE)
    assert actions(pagerduty) == ["trigger"]
    # Nobody fixed it: the next deadline's run never reported. A new page.
    cycle(DEADLINE + DAY + GRACE)
    assert actions(pagerduty) == ["trigger", "trigger"]
    later = Incident.objects.get(deadline_at=DEADLINE + DAY)
    assert (later.reason, later.part_of) == ("missed", None)


# --- a schedule change never skips a deadline still in its grace ---------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"grace_seconds": 300},  # a shorter grace
        {"cron": "35 6 * * *"},  # the deadline moved by five minutes
        {"timezone": "Europe/Paris"},  # same offset, another zone
    ],
    ids=["grace", "cron", "zone"],
)
def test_a_schedule_change_inside_a_grace_period_still_judges_that_deadline(
    pagerduty, channel, change
):
    monitor = deadline_monitor(channel)
    with time_machine.travel(DEADLINE + timedelta(minutes=2), tick=False):
        monitor = monitors.monitor_update(monitor, now=DEADLINE + timedelta(minutes=2), **change)
    assert monitor.deadline_at <= DEADLINE + timedelta(minutes=5)
    cycle(DEADLINE + timedelta(minutes=20))
    assert actions(pagerduty) == ["trigger"]
    [incident] = Incident.objects.all()
    assert incident.reason == "missed"
    assert incident.deadline_at in (DEADLINE, DEADLINE + timedelta(minutes=5))


def test_a_schedule_change_after_a_judged_deadline_does_not_judge_it_again(pagerduty, channel):
    monitor = deadline_monitor(channel)
    cycle(DEADLINE + GRACE)  # judged: missed, paged once
    with time_machine.travel(DEADLINE + GRACE + timedelta(minutes=1), tick=False):
        monitor = monitors.monitor_update(
            Monitor.objects.get(pk=monitor.pk),
            now=DEADLINE + GRACE + timedelta(minutes=1),
            grace_seconds=60,
        )
    assert monitor.deadline_at == DEADLINE + DAY
    cycle(DEADLINE + timedelta(hours=6))
    assert actions(pagerduty) == ["trigger"]
    assert Incident.objects.count() == 1
