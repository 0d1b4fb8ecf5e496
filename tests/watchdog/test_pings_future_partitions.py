"""A ping naming a partition whose period has not started (``2027-01-01`` typed for
``2026-01-01``) is refused, by the ping URLs and by the API the catalog pings through, and
never moves the monitor's ``last_partition``: the catalog's rule (``schedules.has_started``
with the watchdog's own clock-skew allowance, ``WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from watchdog import monitors
from watchdog.models import Monitor, Ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

# 22:58 UTC on 29 November is 23:58 in Berlin: Berlin's 30 November starts in 2 minutes.
NOW = datetime(2026, 11, 29, 22, 58, tzinfo=UTC)


@pytest.fixture
def monitor(channel) -> Monitor:
    return monitors.monitor_create(
        channels=[channel],
        now=NOW - timedelta(days=1),
        name="orders data",
        external_id="tidemark:dataset:7:data",
        kind="deadline",
        cron="30 6 * * *",
        timezone="Europe/Berlin",
        partitioning="daily",
        partition_timezone="Europe/Berlin",
        last_partition="2026-11-28",
    )


def get(path: str):
    with time_machine.travel(NOW, tick=False):
        return Client().get(path)


@pytest.mark.parametrize("suffix", ["", "/start", "/fail", "/0"])
@pytest.mark.parametrize("key", ["2027-01-01", "2026-12-01"])
def test_a_ping_for_a_future_partition_is_refused_in_plain_text(monitor, suffix, key):
    response = get(f"/ping/{monitor.ping_key}{suffix}?partition={key}")
    assert response.status_code == 422
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert f"partition {key!r}" in text and "has not started" in text
    assert "'2026-11-30'" in text  # the newest partition accepted now
    monitor.refresh_from_db()
    assert monitor.last_partition == "2026-11-28"
    assert not Ping.objects.exists()


def test_a_partition_starting_within_the_skew_is_taken(monitor, settings):
    settings.WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS = 300
    assert get(f"/ping/{monitor.ping_key}?partition=2026-11-30").status_code == 200
    monitor.refresh_from_db()
    assert monitor.last_partition == "2026-11-30"


def test_the_skew_allowance_is_the_watchdogs_setting(monitor, settings):
    settings.WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS = 60
    assert get(f"/ping/{monitor.ping_key}?partition=2026-11-30").status_code == 422
    assert get(f"/ping/{monitor.ping_key}?partition=2026-11-29").status_code == 200
    monitor.refresh_from_db()
    assert monitor.last_partition == "2026-11-29"


def test_the_api_ping_refuses_a_future_partition_with_a_problem(monitor, api):
    with time_machine.travel(NOW, tick=False):
        response = api.post(
            "/api/v1/monitors/external/tidemark:dataset:7:data/ping?partition=2027-01-01"
        )
    assert response.status_code == 422
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert (body["code"], body["rule"], body["partition"]) == (
        "ping_rejected",
        "partition_started",
        "2027-01-01",
    )
    assert (body["newest_accepted_partition"], body["clock_skew_seconds"]) == ("2026-11-30", 300)
    assert body["starts_at"] == "2026-12-31T23:00:00Z"
    monitor.refresh_from_db()
    assert monitor.last_partition == "2026-11-28"
    assert not Ping.objects.exists()


def test_a_definitions_ready_partitions_from_the_future_are_refused(monitor, api):
    definition = {
        "name": "orders data",
        "kind": "deadline",
        "cron": "30 6 * * *",
        "timezone": "Europe/Berlin",
        "partitioning": "daily",
        "partition_timezone": "Europe/Berlin",
        "channels": [{"kind": "pagerduty", "target": "R" * 32}],
        "version": "2",
        "ready_partitions": ["2026-11-29", "2027-01-01"],
    }
    with time_machine.travel(NOW, tick=False):
        response = api.post(
            "/api/v1/monitors/external/tidemark:dataset:7:data", definition, format="json"
        )
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == ("ready_partitions.1", "partition_started")
    assert "has not started" in error["detail"]
    monitor.refresh_from_db()
    assert monitor.last_partition == "2026-11-28"
    assert not Ping.objects.exists()
