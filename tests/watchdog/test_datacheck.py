"""The storage check at a deadline: a partition whose success marker landed meets the
deadline without its ping; a missing marker, or a store that cannot answer, leaves the
deadline judged as without the check. Against moto's S3 server on loopback and a ``file``
source in a temp directory; time is moved with time-machine."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime, timedelta
from time import monotonic

import pytest
import time_machine
from rest_framework.test import APIClient

from watchdog import datacheck, monitors, schedule, tokens
from watchdog.models import Incident, Monitor, Ping

from .test_watchdog import cycle, ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)  # 06:30 Berlin, expects 2026-11-28
JUDGED = DEADLINE + timedelta(minutes=11)  # after the 600 s grace
TEMPLATE = "sales/orders/dt={partition}/"
CHECK = {"storage_source": "lake", "storage_template": TEMPLATE}


def daily_monitor(channel, **fields) -> Monitor:
    """Due by 06:30 Berlin with 600 s grace, daily partitions unless ``fields`` say not."""
    created_at = DEADLINE - timedelta(hours=12)
    definition = {
        "name": "orders daily",
        "kind": Monitor.Kind.DEADLINE,
        "cron": "30 6 * * *",
        "timezone": "Europe/Berlin",
        "partitioning": "daily",
        "partition_timezone": "Europe/Berlin",
        "grace_seconds": 600,
        **fields,
    }
    with time_machine.travel(created_at, tick=False):
        return monitors.monitor_create(channels=[channel], now=created_at, **definition)


@pytest.fixture(autouse=True)
def _no_quiet_sources():
    """A source that failed in one test is not left quiet for the next."""
    datacheck._quiet_until.clear()
    yield
    datacheck._quiet_until.clear()


class FileLake:
    """A ``file`` source ``lake`` in a temp directory; ``put`` takes paths relative to it."""

    def __init__(self, root):
        self.root = root

    def put(self, relative: str, body: bytes = b"") -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


@pytest.fixture(params=["s3", "file"])
def lake(request, settings, tmp_path):
    """Storage source ``lake`` in the watchdog's settings: moto S3, or a temp directory."""
    if request.param == "s3":
        store = request.getfixturevalue("s3_bucket")("tidemark-lake", "landing")
        settings.WATCHDOG_STORAGE_SOURCES = {"lake": store.source()}
        return store
    root = tmp_path / "lake"
    root.mkdir()
    settings.WATCHDOG_STORAGE_SOURCES = {"lake": {"url": f"file://{root}"}}
    return FileLake(root)


@pytest.fixture
def file_lake(settings, tmp_path) -> FileLake:
    root = tmp_path / "lake"
    root.mkdir()
    settings.WATCHDOG_STORAGE_SOURCES = {"lake": {"url": f"file://{root}"}}
    return FileLake(root)


@pytest.fixture
def closed_port_source(settings) -> dict:
    """Source ``lake`` on an S3 endpoint where nothing listens (connections refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = {
        "url": "s3://tidemark-lake/landing",
        "options": {"key": "test", "secret": "test", "endpoint_url": f"http://127.0.0.1:{port}"},
    }
    settings.WATCHDOG_STORAGE_SOURCES = {"lake": source}
    return source


# --- at the deadline ---------------------------------------------------------------------


def test_a_landed_marker_meets_the_deadline_without_a_ping(pagerduty, channel, lake):
    monitor = daily_monitor(channel, **CHECK)
    lake.put("sales/orders/dt=2026-11-28/part-0.parquet", b"data")
    lake.put("sales/orders/dt=2026-11-28/_SUCCESS")

    report = cycle(JUDGED)

    assert report.missed == [] and pagerduty == []
    assert not Incident.objects.exists()
    check = Ping.objects.get()
    assert (check.kind, check.partition, check.method) == ("success", "2026-11-28", "CHECK")
    assert check.user_agent == "watchdog storage check"
    assert check.received_at == JUDGED
    assert "_SUCCESS found at lake:sales/orders/dt=2026-11-28/_SUCCESS" in check.body
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.UP
    assert (monitor.last_partition, monitor.last_success_at) == ("2026-11-28", JUDGED)
    assert monitor.deadline_at == DEADLINE + timedelta(days=1)


def test_a_missing_marker_opens_the_incident_and_pages(pagerduty, channel, lake):
    monitor = daily_monitor(channel, **CHECK)
    lake.put("sales/orders/dt=2026-11-28/part-0.parquet", b"data")  # data, no marker yet
    lake.put("sales/orders/dt=2026-11-27/_SUCCESS")  # yesterday's does not count

    report = cycle(JUDGED)

    assert [m.partition for m in report.missed] == ["2026-11-28"]
    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    assert Incident.objects.get().partition == "2026-11-28"
    assert not Ping.objects.exists()
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.DOWN


def test_the_marker_is_checked_only_when_the_deadline_is_judged(pagerduty, channel, file_lake):
    monitor = daily_monitor(channel, **CHECK)
    file_lake.put("sales/orders/dt=2026-11-28/_SUCCESS")
    cycle(DEADLINE + timedelta(minutes=9))  # inside the grace: nothing judged, nothing read
    assert not Ping.objects.exists()
    cycle(JUDGED)
    assert Ping.objects.filter(monitor=monitor, method="CHECK").count() == 1
    assert not Incident.objects.exists()


def test_a_custom_marker_and_a_template_with_an_inner_path(pagerduty, channel, file_lake):
    daily_monitor(
        channel,
        storage_source="lake",
        storage_template="exports/dt={partition}/orders",
        storage_marker="_READY",
    )
    file_lake.put("exports/dt=2026-11-28/orders/_SUCCESS")  # not the marker asked for
    assert [m.partition for m in cycle(JUDGED).missed] == ["2026-11-28"]

    file_lake.put("exports/dt=2026-11-29/orders/_READY")
    assert cycle(JUDGED + timedelta(days=1)).missed == []


def test_every_partition_a_deadline_expects_is_checked(pagerduty, channel, file_lake):
    """An hourly partitioned monitor with a daily deadline expects 24 partitions, checked
    oldest first: each found is recorded, and the first one missing opens the incident
    (the deadline is missed; the rest are not read)."""
    monitor = daily_monitor(channel, partitioning="hourly", **CHECK)
    expected = schedule.expected_partitions(monitor, DEADLINE)
    assert len(expected) == 24
    missing = expected[17]
    for key in expected:
        if key != missing:
            file_lake.put(f"sales/orders/dt={key}/_SUCCESS")

    report = cycle(JUDGED)

    assert [m.partition for m in report.missed] == [missing]
    checked = set(Ping.objects.filter(method="CHECK").values_list("partition", flat=True))
    assert checked == set(expected[:17])
    assert [e["event_action"] for e in pagerduty] == ["trigger"]


def test_after_downtime_each_deadline_is_checked_on_its_own(pagerduty, channel, file_lake):
    daily_monitor(channel, **CHECK)
    for key in ("2026-11-28", "2026-11-30"):
        file_lake.put(f"sales/orders/dt={key}/_SUCCESS")

    report = cycle(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))  # three deadlines passed

    assert [m.partition for m in report.missed] == ["2026-11-29"]
    assert sorted(Ping.objects.values_list("partition", flat=True)) == [
        "2026-11-28",
        "2026-11-30",
    ]


def test_a_ping_that_came_needs_no_check(pagerduty, channel, closed_port_source, caplog):
    """A met deadline never reads the store (the unreachable source is never asked)."""
    monitor = daily_monitor(channel, **CHECK)
    ping(monitor, partition="2026-11-28", at=DEADLINE)
    with caplog.at_level(logging.WARNING, logger="watchdog.datacheck"):
        assert cycle(JUDGED).missed == []
    assert [r for r in caplog.records if r.name.startswith("watchdog.datacheck")] == []


def test_an_unreachable_store_is_judged_without_the_check(
    pagerduty, channel, closed_port_source, caplog
):
    monitor = daily_monitor(channel, **CHECK)
    other = daily_monitor(channel, name="orders daily (eu)", **CHECK)

    started = monotonic()
    with caplog.at_level(logging.WARNING, logger="watchdog.datacheck"):
        report = cycle(JUDGED)  # raises nothing
    took = monotonic() - started

    assert sorted(m.monitor for m in report.missed) == ["orders daily", "orders daily (eu)"]
    assert [e["event_action"] for e in pagerduty] == ["trigger", "trigger"]
    assert Incident.objects.count() == 2 and not Ping.objects.exists()
    for m in (monitor, other):
        m.refresh_from_db()
        assert m.state == Monitor.State.DOWN
        assert m.deadline_at == DEADLINE + timedelta(days=1)
    # One failed check, then the source is left quiet: the second monitor is not made to
    # wait for the same dead store.
    failures = [r for r in caplog.records if "failed; judged without it" in r.getMessage()]
    assert len(failures) == 1
    assert took < 30, f"the cycle took {took:.1f} s"


def test_a_failed_source_is_left_quiet_for_a_while(closed_port_source, s3_bucket, settings):
    monitor = Monitor(name="orders", kind="deadline", partitioning="daily", **CHECK)
    assert datacheck.partition_landed(monitor, "2026-11-28") is None

    store = s3_bucket("tidemark-lake", "landing")
    store.put("sales/orders/dt=2026-11-28/_SUCCESS")
    settings.WATCHDOG_STORAGE_SOURCES = {"lake": store.source()}
    assert datacheck.partition_landed(monitor, "2026-11-28") is None  # still quiet

    datacheck._quiet_until["lake"] = monotonic() - 1  # the quiet time is over
    assert datacheck.partition_landed(monitor, "2026-11-28") is True


@pytest.mark.parametrize(
    ("fields", "sources"),
    [
        ({}, {"lake": {"url": "file:///nonexistent"}}),  # no storage check
        ({"storage_source": "gone", "storage_template": TEMPLATE}, {}),  # source removed
        (CHECK, {"lake": {"url": "ftp://example.org/lake"}}),  # protocol not allowed
        (CHECK, {"lake": {"endpoint": "nowhere"}}),  # malformed entry
    ],
)
def test_partition_landed_is_none_without_a_usable_check(settings, fields, sources):
    settings.WATCHDOG_STORAGE_SOURCES = sources
    monitor = Monitor(name="orders", kind="deadline", partitioning="daily", **fields)
    assert datacheck.partition_landed(monitor, "2026-11-28") is None


# --- the API ------------------------------------------------------------------------------


@pytest.fixture
def api(db) -> APIClient:
    _, token = tokens.create("test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def clock():
    with time_machine.travel(DEADLINE - timedelta(hours=12), tick=False) as traveller:
        yield traveller


DAILY = {
    "name": "orders daily",
    "kind": "deadline",
    "cron": "30 6 * * *",
    "timezone": "Europe/Berlin",
    "partitioning": "daily",
    "partition_timezone": "Europe/Berlin",
}


def test_the_api_takes_and_returns_a_storage_check(api, clock, file_lake):
    response = api.post("/api/v1/monitors", {**DAILY, **CHECK}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["storage_source"], body["storage_template"], body["storage_marker"]) == (
        "lake",
        TEMPLATE,
        "_SUCCESS",
    )

    patched = api.patch(
        f"/api/v1/monitors/{body['id']}",
        {"storage_marker": "_READY"},
        format="json",
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["storage_marker"] == "_READY"

    off = api.patch(
        f"/api/v1/monitors/{body['id']}",
        {"storage_source": "", "storage_template": ""},
        format="json",
    )
    assert off.status_code == 200, off.content
    assert (off.json()["storage_source"], off.json()["storage_template"]) == ("", "")


@pytest.mark.parametrize(
    ("payload", "field", "rule"),
    [
        ({**DAILY, **CHECK, "storage_source": "warehouse"}, "storage_source", "invalid_choice"),
        ({**DAILY, "storage_template": TEMPLATE}, "storage_source", "required"),
        ({**DAILY, "storage_source": "lake"}, "storage_template", "required"),
        ({**DAILY, **CHECK, "storage_template": "sales/orders/"}, "storage_template", None),
        (
            {**DAILY, **CHECK, "storage_template": "dt={partition}/{partition}/"},
            "storage_template",
            None,
        ),
        ({**DAILY, **CHECK, "storage_template": "/etc/dt={partition}/"}, "storage_template", None),
        ({**DAILY, **CHECK, "storage_template": "../dt={partition}/"}, "storage_template", None),
        (
            {**DAILY, **CHECK, "storage_template": "s3://other-bucket/dt={partition}/"},
            "storage_template",
            None,
        ),
        ({**DAILY, **CHECK, "storage_template": "dt={date}/"}, "storage_template", None),
        ({**DAILY, **CHECK, "storage_marker": "../_SUCCESS"}, "storage_marker", "file_name"),
        ({**DAILY, **CHECK, "storage_marker": ".."}, "storage_marker", "file_name"),
        ({**DAILY, **CHECK, "storage_marker": "done/_SUCCESS"}, "storage_marker", "file_name"),
        ({**DAILY, **CHECK, "storage_marker": "_*"}, "storage_marker", "file_name"),
        ({**DAILY, **CHECK, "storage_marker": ""}, "storage_marker", "required"),
        (
            {**DAILY, **CHECK, "partitioning": ""},
            "storage_source",
            "partitioned_deadline_only",
        ),
        (
            {"name": "hourly", "kind": "period", "period_seconds": 3600, **CHECK},
            "storage_source",
            "partitioned_deadline_only",
        ),
    ],
)
def test_a_storage_check_that_breaks_a_rule_is_a_problem_naming_the_field(
    api, clock, file_lake, payload, field, rule
):
    response = api.post("/api/v1/monitors", payload, format="json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["code"] == "validation_error"
    errors = {e["field"]: e["rule"] for e in problem["errors"]}
    assert field in errors, problem
    if rule:
        assert errors[field] == rule
    assert not Monitor.objects.exists()


def test_a_patch_to_an_unknown_source_is_refused(api, clock, file_lake):
    created = api.post("/api/v1/monitors", {**DAILY, **CHECK}, format="json").json()
    response = api.patch(
        f"/api/v1/monitors/{created['id']}", {"storage_source": "warehouse"}, format="json"
    )
    assert response.status_code == 400
    assert {e["field"] for e in response.json()["errors"]} == {"storage_source"}
    assert Monitor.objects.get().storage_source == "lake"
