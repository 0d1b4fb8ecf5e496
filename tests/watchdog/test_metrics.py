"""The watchdog's ``GET /metrics`` (its own server's URLs) after a missed deadline opened an
incident and paged PagerDuty, then after the partition resolved it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from tests.metrics_helpers import scrape, value
from watchdog import loop, monitors, paging
from watchdog.models import Channel, LoopState, Monitor

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)


def cycle(at):
    with time_machine.travel(at, tick=False):
        return loop.run_cycle(sender=paging.sender_from_settings(), now=at)


def daily_monitor(channel):
    with time_machine.travel(T0 - timedelta(hours=12), tick=False):
        return monitors.monitor_create(
            channels=[channel],
            now=T0 - timedelta(hours=12),
            name="orders daily",
            kind=Monitor.Kind.DEADLINE,
            cron="30 5 * * *",
            timezone="UTC",
            partitioning="daily",
            partition_timezone="UTC",
            grace_seconds=600,
        )


def test_an_incident_and_its_page_are_on_the_watchdogs_metrics(pagerduty, channel, settings):
    monitor = daily_monitor(channel)
    settings.WATCHDOG_HEARTBEAT_URL = ""
    before = scrape(Client())
    assert value(before, "tidemark_watchdog_monitors", state="new", system="false") == 1
    assert value(before, "tidemark_watchdog_open_incidents", reason="missed") == 0

    cycle(DEADLINE + timedelta(minutes=11))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    during = scrape(Client())

    def delta(samples, name, **labels):
        return value(samples, name, **labels) - value(before, name, **labels)

    assert delta(during, "tidemark_watchdog_pages_total", channel="pagerduty", result="sent") == 1
    assert delta(during, "tidemark_watchdog_deadlines_missed_total") == 1
    assert delta(during, "tidemark_watchdog_cycle_duration_seconds_count") == 1
    assert value(during, "tidemark_watchdog_open_incidents", reason="missed") == 1
    assert value(during, "tidemark_watchdog_monitors", state="down", system="false") == 1
    assert value(during, "tidemark_watchdog_monitors", state="new", system="false") == 0
    assert value(during, "tidemark_watchdog_pages_pending") == 0
    # The cycle ran at the test's instant, before the real clock's now.
    assert value(during, "tidemark_watchdog_last_cycle_age_seconds") > 0
    assert LoopState.objects.get(pk=1).last_cycle_at == DEADLINE + timedelta(minutes=11)
    # Pings are counted by route: the URL pattern's name, never the ping's secret path.
    with time_machine.travel(DEADLINE + timedelta(minutes=20), tick=False):
        pinged = Client().get(f"/ping/{monitor.ping_key}", {"partition": "2026-11-28"})
    assert pinged.status_code == 200
    cycle(DEADLINE + timedelta(minutes=21))
    assert [e["event_action"] for e in pagerduty] == ["trigger", "resolve"]
    after = scrape(Client())
    assert delta(after, "tidemark_watchdog_pages_total", channel="pagerduty", result="sent") == 2
    assert value(after, "tidemark_watchdog_open_incidents", reason="missed") == 0
    assert value(after, "tidemark_watchdog_monitors", state="up", system="false") == 1
    pings = {"route": "ping", "method": "GET", "status": "200"}
    assert delta(after, "tidemark_http_requests_total", **pings) == 1
    assert not any(str(monitor.ping_key) in label for _, labels in after for _, label in labels)


def test_a_failing_channel_counts_retrying_then_failed(httpserver, settings):
    settings.WATCHDOG_PAGING = {
        **settings.WATCHDOG_PAGING,
        "pagerduty_url": httpserver.url_for("/v2/enqueue"),
        "max_attempts": 2,
        "backoff_base_seconds": 1,
        "backoff_cap_seconds": 1,
    }
    httpserver.expect_request("/v2/enqueue").respond_with_data("down", status=503)
    channel = Channel.objects.create(name="p", kind=Channel.Kind.PAGERDUTY, target="R" * 32)
    daily_monitor(channel)
    before = scrape(Client())
    cycle(DEADLINE + timedelta(minutes=11))  # first attempt: 503, retried later
    during = scrape(Client())
    assert value(during, "tidemark_watchdog_pages_pending") == 1
    cycle(DEADLINE + timedelta(minutes=12))  # second and last attempt
    after = scrape(Client())

    def delta(samples, result):
        labels = {"channel": "pagerduty", "result": result}
        name = "tidemark_watchdog_pages_total"
        return value(samples, name, **labels) - value(before, name, **labels)

    assert (delta(during, "retrying"), delta(during, "failed")) == (1, 0)
    assert (delta(after, "retrying"), delta(after, "failed"), delta(after, "sent")) == (1, 1, 0)
    assert value(after, "tidemark_watchdog_pages_pending") == 0


def test_the_heartbeat_age_and_its_outcome(httpserver, settings):
    settings.WATCHDOG_HEARTBEAT_URL = httpserver.url_for("/hb")
    httpserver.expect_request("/hb").respond_with_data("OK")
    at = datetime.now(UTC) - timedelta(seconds=90)
    loop.run_cycle(sender=paging.sender_from_settings(), now=at)
    samples = scrape(Client())
    assert 90 <= value(samples, "tidemark_watchdog_heartbeat_age_seconds") < 150
    assert value(samples, "tidemark_watchdog_heartbeat_ok") == 1
