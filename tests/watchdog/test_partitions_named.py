"""A managed monitor's definition carries the partitions already ready
(``ready_partitions``), recorded with it in one transaction, each once; and every incident
of a partitioned monitor names its partition, whatever path opens it: a missed deadline
(with or without a storage check), a failure, an overdue run, a late start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from rest_framework.test import APIClient

from watchdog import tokens
from watchdog.api import serializers as watchdog_api
from watchdog.models import Incident, Monitor, Ping

from .test_datacheck import FileLake
from .test_watchdog import cycle, ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

# 06:30 Berlin is 05:30 UTC in November: this deadline expects 2026-11-28.
DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)
DEFINED = DEADLINE - timedelta(hours=12)
GRACE = timedelta(minutes=10)
EXTERNAL_ID = "tidemark:dataset:7:data"
PROBLEM = "application/problem+json"


@pytest.fixture
def api(db) -> APIClient:
    _, token = tokens.create("catalog")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def upsert(api, version: str = "1", *, at=DEFINED, **fields):
    """The catalog's definition of a dataset's data monitor, as its feed sends it."""
    body = {
        "name": "orders data",
        "owner": "orders",
        "kind": "deadline",
        "cron": "30 6 * * *",
        "timezone": "Europe/Berlin",
        "partitioning": "daily",
        "partition_timezone": "Europe/Berlin",
        "grace_seconds": int(GRACE.total_seconds()),
        "channels": [{"kind": "pagerduty", "target": "R" * 32}],
        "version": version,
        **fields,
    }
    with time_machine.travel(at, tick=False):
        return api.post(f"/api/v1/monitors/external/{EXTERNAL_ID}", body, format="json")


@pytest.fixture
def lake(settings, tmp_path) -> FileLake:
    """Storage source ``lake`` in the watchdog's settings: a temp directory."""
    root = tmp_path / "lake"
    root.mkdir()
    settings.WATCHDOG_STORAGE_SOURCES = {"lake": {"url": f"file://{root}"}}
    return FileLake(root)


def pinged(monitor: Monitor) -> list[str]:
    return sorted(
        Ping.objects.filter(monitor=monitor, kind="success").values_list("partition", flat=True)
    )


# --- ready partitions with the definition ------------------------------------------------


def test_ready_partitions_are_recorded_with_the_definition(api, pagerduty):
    response = upsert(api, ready_partitions=["2026-11-28", "2026-11-27"])

    assert response.status_code == 200, response.content
    monitor = Monitor.objects.get(external_id=EXTERNAL_ID)
    assert pinged(monitor) == ["2026-11-27", "2026-11-28"]
    assert (monitor.state, monitor.last_partition) == ("up", "2026-11-28")
    assert response.json()["last_partition"] == "2026-11-28"

    cycle(DEADLINE + GRACE)
    assert pagerduty == [] and not Incident.objects.exists()


def test_a_definition_sent_again_records_nothing_twice_and_an_older_one_nothing(api):
    assert upsert(api, "2", ready_partitions=["2026-11-27"]).status_code == 200
    assert upsert(api, "2", ready_partitions=["2026-11-27", "2026-11-28"]).status_code == 200
    # A late retry of an older definition changes nothing, not even what is ready.
    older = upsert(api, "1", ready_partitions=["2026-11-26"])

    assert older.status_code == 208
    monitor = Monitor.objects.get(external_id=EXTERNAL_ID)
    assert pinged(monitor) == ["2026-11-27", "2026-11-28"]
    assert Ping.objects.filter(monitor=monitor).count() == 2


def test_ready_partitions_resolve_the_missed_deadline_they_satisfy(api, pagerduty):
    assert upsert(api, "1").status_code == 200
    cycle(DEADLINE + GRACE)
    [incident] = Incident.objects.all()
    assert incident.partition == "2026-11-28"

    fed = upsert(api, "2", at=DEADLINE + timedelta(hours=1), ready_partitions=["2026-11-28"])
    assert fed.status_code == 200
    incident.refresh_from_db()
    assert incident.resolved_at == DEADLINE + timedelta(hours=1)
    assert Monitor.objects.get(external_id=EXTERNAL_ID).state == "up"


@pytest.mark.parametrize(
    ("fields", "field", "rule"),
    [
        (
            {"ready_partitions": ["2026-11-28", "2026-11-28T05"]},
            "ready_partitions.1",
            "partition_key",
        ),
        (
            {"ready_partitions": ["2026-11-28"], "partitioning": ""},
            "ready_partitions",
            "partitioned_deadline_only",
        ),
        ({"ready_partitions": ["x" * 33]}, "ready_partitions.0", "max_length"),
        (
            {"ready_partitions": ["2026-11-28"] * (watchdog_api.MAX_READY_PARTITIONS + 1)},
            "ready_partitions",
            "max_length",
        ),
    ],
)
def test_ready_partitions_that_break_a_rule_are_refused_and_nothing_is_written(
    api, fields, field, rule
):
    response = upsert(api, **fields)

    assert response.status_code == 400, response.content
    assert response["Content-Type"] == PROBLEM
    errors = response.json()["errors"]
    assert {(e["field"], e["rule"]) for e in errors} == {(field, rule)}
    assert not Monitor.objects.exists() and not Ping.objects.exists()


def test_a_refused_ready_partition_leaves_an_existing_monitor_as_it_was(api):
    assert upsert(api, "1").status_code == 200
    assert upsert(api, "2", grace_seconds=60, ready_partitions=["28-11-2026"]).status_code == 400
    monitor = Monitor.objects.get(external_id=EXTERNAL_ID)
    assert (monitor.external_version, monitor.grace_seconds) == ("1", 600)


# --- every incident of a partitioned monitor names its partition -------------------------


def data_monitor(api, **fields) -> Monitor:
    assert upsert(api, **fields).status_code == 200
    return Monitor.objects.get(external_id=EXTERNAL_ID)


def test_a_missed_deadline_names_the_missing_partition(api, pagerduty):
    monitor = data_monitor(api, ready_partitions=["2026-11-27"])
    cycle(DEADLINE + GRACE)
    [incident] = Incident.objects.filter(monitor=monitor)
    assert (incident.reason, incident.partition) == ("missed", "2026-11-28")
    assert pagerduty[0]["payload"]["custom_details"]["partition"] == "2026-11-28"


def test_a_missed_deadline_with_a_storage_check_names_the_missing_partition(api, pagerduty, lake):
    monitor = data_monitor(
        api, storage_source="lake", storage_template="sales/orders/dt={partition}/"
    )
    lake.put("sales/orders/dt=2026-11-27/_SUCCESS")  # not the one expected
    cycle(DEADLINE + GRACE)
    [incident] = Incident.objects.filter(monitor=monitor)
    assert (incident.reason, incident.partition) == ("missed", "2026-11-28")


@pytest.mark.parametrize(
    ("suffix", "params", "partition"),
    [
        ("/fail", {}, "2026-11-28"),  # the run for this morning's deadline
        ("/1", {}, "2026-11-28"),
        ("/fail", {"partition": "2026-11-25"}, "2026-11-25"),  # a rerun names its own
    ],
)
def test_a_failure_names_its_partition(api, pagerduty, suffix, params, partition):
    monitor = data_monitor(api)
    response = ping(monitor, suffix, at=DEADLINE - timedelta(hours=1), **params)
    assert response.status_code == 200
    [incident] = Incident.objects.filter(monitor=monitor)
    assert (incident.reason, incident.partition) == ("failed", partition)


def test_a_failure_after_the_partition_landed_names_the_next_one(api, pagerduty):
    monitor = data_monitor(api, ready_partitions=["2026-11-28"])
    ping(monitor, "/fail", at=DEADLINE + timedelta(minutes=20), method="post")
    [incident] = Incident.objects.filter(monitor=monitor)
    assert incident.partition == "2026-11-29"  # this morning's grace has passed


def test_an_overdue_run_names_its_partition(api, pagerduty):
    monitor = data_monitor(api, max_runtime_seconds=600)
    ping(monitor, "/start", at=DEADLINE - timedelta(hours=2), method="post")
    cycle(DEADLINE - timedelta(hours=1))
    [incident] = Incident.objects.filter(monitor=monitor)
    assert (incident.reason, incident.partition) == ("runtime", "2026-11-28")


def test_a_late_start_names_its_partition(api, pagerduty):
    # Starts at 04:00 Berlin (03:00 UTC), 15 minutes' grace: it never does.
    monitor = data_monitor(api, start_cron="0 4 * * *", start_grace_seconds=900)
    cycle(DEADLINE - timedelta(hours=2))
    [incident] = Incident.objects.filter(monitor=monitor)
    assert (incident.reason, incident.partition) == ("start_late", "2026-11-28")


def test_an_hourly_deadline_on_daily_partitions_names_the_day_it_works_towards(api, pagerduty):
    """Most deadlines of a cron firing more often than periods close expect nothing: the
    incident names the partition of the next deadline that does."""
    monitor = data_monitor(api, cron="0 * * * *", max_runtime_seconds=60)
    ping(monitor, "/fail", at=DEADLINE, method="post")  # 06:30 Berlin on the 29th
    [incident] = Incident.objects.filter(monitor=monitor)
    assert incident.partition == "2026-11-29"


def test_a_dataset_whose_data_and_pipeline_miss_one_deadline_pages_naming_the_partition(
    api, pagerduty
):
    pipeline = {"partitioning": "", "partition_timezone": "UTC", "name": "orders pipeline"}
    with time_machine.travel(DEFINED, tick=False):
        # The pipeline monitor defined first, so it would be judged first.
        body = {
            "owner": "orders",
            "kind": "deadline",
            "cron": "30 6 * * *",
            "timezone": "Europe/Berlin",
            "grace_seconds": 600,
            "channels": [{"kind": "pagerduty", "target": "R" * 32}],
            "version": "1",
            **pipeline,
        }
        assert (
            api.post(
                "/api/v1/monitors/external/tidemark:dataset:7:pipeline", body, format="json"
            ).status_code
            == 200
        )
    data = data_monitor(api)
    cycle(DEADLINE + GRACE)

    paging = Incident.objects.get(part_of=None)
    assert (paging.monitor_id, paging.partition) == (data.pk, "2026-11-28")
    [event] = pagerduty
    assert event["payload"]["custom_details"]["partition"] == "2026-11-28"
