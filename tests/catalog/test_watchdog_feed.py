"""The catalog feeds the watchdog through its delivery engine: a data monitor for each
critical dataset and a ping for each ready partition, over the watchdog's REST API (a live
server on 127.0.0.1)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.utils import timezone

from catalog import delivery, sla_schedule
from catalog.actors import Actor
from catalog.models import Dataset, Delivery, Endpoint
from catalog.services import datasets, publishing
from tests.catalog.factories import TeamFactory
from watchdog import schedule, tokens
from watchdog.models import Monitor, Ping

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.urls("tests.urls_catalog_and_watchdog"),
]


@pytest.fixture
def watchdog_api(live_server, settings):
    settings.ROOT_URLCONF = "tests.urls_catalog_and_watchdog"
    _, token = tokens.create("catalog")
    settings.TIDEMARK_WATCHDOG_URL = live_server.url
    settings.TIDEMARK_WATCHDOG_TOKEN = token
    return live_server.url


def deliver():
    return delivery.deliver_due(sender=delivery.sender_from_settings())


def register(team, **fields):
    fields = {
        "criticality": Dataset.Criticality.CRITICAL,
        "sla_cron": "30 6 * * *",
        "sla_timezone": "Europe/Berlin",
        "sla_grace_seconds": 600,
        **fields,
    }
    return datasets.dataset_register(
        actor=Actor(team=team), namespace="s3://lake", name="orders", **fields
    )


def test_a_critical_dataset_gets_a_data_monitor_fed_with_its_partitions(watchdog_api):
    team = TeamFactory(slug="orders", paging_routing_key="R" * 32)
    dataset = register(team)

    deliver()

    monitor = Monitor.objects.get(external_id=f"tidemark:dataset:{dataset.pk}:data")
    assert (monitor.kind, monitor.cron, monitor.timezone, monitor.partitioning) == (
        "deadline",
        "30 6 * * *",
        "Europe/Berlin",
        "daily",
    )
    assert monitor.grace_seconds == 600 and monitor.owner == "orders"
    [channel] = monitor.channels.all()
    assert (channel.kind, channel.target) == ("pagerduty", "R" * 32)

    publishing.readiness_publish(
        actor=Actor(team=team),
        namespace="s3://lake",
        name="orders",
        partition="2026-11-28",
        now=dataset.created_at,
    )
    deliver()

    ping = Ping.objects.get(monitor=monitor)
    assert (ping.kind, ping.partition) == ("success", "2026-11-28")
    monitor.refresh_from_db()
    assert monitor.last_partition == "2026-11-28" and monitor.state == "up"
    assert set(Delivery.objects.values_list("state", flat=True)) == {"succeeded"}


def test_an_sla_change_updates_the_monitor_and_an_older_definition_loses(watchdog_api):
    team = TeamFactory(slug="orders")
    dataset = register(team)
    deliver()
    datasets.dataset_update(actor=Actor(team=team), dataset=dataset, sla_cron="0 7 * * *")
    deliver()
    monitor = Monitor.objects.get(external_id__endswith=":data")
    assert monitor.cron == "0 7 * * *"

    # A retry of the first definition arriving late (its delivery re-sent) changes nothing.
    first = (
        Delivery.objects.filter(
            notification__type="watchdog.monitor",
            notification__payload__data__external_id=monitor.external_id,
        )
        .order_by("id")
        .first()
    )
    claim = delivery.Claim(
        delivery_id=first.pk,
        token=first.claim_token,
        attempt=2,
        attempt_in_budget=2,
        endpoint_id=first.endpoint_id,
        endpoint_failing=False,
        kind=Endpoint.Kind.WATCHDOG,
        url=first.endpoint.url,
        msg_id=str(first.notification_id),
        body=json.dumps(first.notification.payload),
        secrets=(),
    )
    result = delivery.delivery_send(claim, sender=delivery.sender_from_settings(), now=None)
    assert result.status_code == 208  # already reported: nothing changed
    monitor.refresh_from_db()
    assert monitor.cron == "0 7 * * *"


def test_the_sla_calendar_travels_to_the_monitors_and_they_judge_the_same_deadlines(
    watchdog_api,
):
    team = TeamFactory(slug="orders")
    dataset = register(team, partitioning="daily", partition_timezone="Europe/Berlin")
    deliver()
    datasets.dataset_update(
        actor=Actor(team=team),
        dataset=dataset,
        sla_calendar="business_days",
        sla_holidays_country="DE",
        sla_holidays_subdivision="BY",
        sla_non_business_day="skip",
    )
    deliver()
    dataset.refresh_from_db()
    after = datetime(2026, 12, 23, 12, tzinfo=UTC)
    catalog_deadlines = sla_schedule.upcoming_deadlines(dataset, now=after, count=5)
    for monitor in Monitor.objects.filter(external_id__startswith="tidemark:dataset:"):
        assert (
            monitor.calendar,
            monitor.holidays_country,
            monitor.holidays_subdivision,
            monitor.non_business_day,
        ) == ("business_days", "DE", "BY", "skip")
        assert schedule.upcoming_deadlines(monitor, now=after, count=5) == catalog_deadlines
    # Christmas Eve, then Monday: the 25th and 26th are Bavarian holidays.
    assert catalog_deadlines[:2] == [
        datetime(2026, 12, 24, 5, 30, tzinfo=UTC),
        datetime(2026, 12, 28, 5, 30, tzinfo=UTC),
    ]


def test_a_future_partition_is_pinged_when_its_period_starts(watchdog_api):
    """The watchdog refuses a ping from the future; a dataset that accepts future
    partitions has its ready ones pinged when their period starts, not lost."""
    team = TeamFactory(slug="orders")
    dataset = register(team, accepts_future_partitions=True)
    deliver()
    now = timezone.now()
    future = (now + timedelta(days=3)).date().isoformat()
    for key in (now.date().isoformat(), future):
        publishing.readiness_publish(
            actor=Actor(team=team), namespace="s3://lake", name="orders", partition=key, now=now
        )
    deliver()

    monitor = Monitor.objects.get(external_id=f"tidemark:dataset:{dataset.pk}:data")
    assert list(Ping.objects.filter(monitor=monitor).values_list("partition", flat=True)) == [
        now.date().isoformat()
    ]
    held = Delivery.objects.get(notification__payload__data__partition=future)
    assert (held.state, held.attempts) == ("pending", 0)
    assert held.next_attempt_at == datetime.combine(date.fromisoformat(future), time(0), tzinfo=UTC)


def test_datasets_that_are_not_critical_feed_nothing(watchdog_api):
    register(TeamFactory(slug="orders"), criticality=Dataset.Criticality.HIGH)
    deliver()
    assert not Endpoint.objects.filter(kind=Endpoint.Kind.WATCHDOG).exists()
    assert not Monitor.objects.exists()


def test_a_ping_that_overtakes_its_monitor_is_retried_not_dropped(watchdog_api, client, settings):
    response = client.post(
        "/api/v1/monitors/external/tidemark:dataset:999:data/ping?partition=2026-11-28",
        HTTP_AUTHORIZATION=f"Bearer {settings.TIDEMARK_WATCHDOG_TOKEN}",
    )
    assert response.status_code == 425
    assert response["Content-Type"] == "application/problem+json"


def test_the_heartbeat_provisions_system_monitors_and_pings_the_healthy_parts(
    watchdog_api, monkeypatch
):
    from django.utils import timezone

    from catalog import self_monitoring
    from tests.catalog.factories import EndpointFactory
    from watchdog.models import Monitor as WatchdogMonitor

    monkeypatch.setattr(self_monitoring, "_provisioned", set())
    now = timezone.now()
    # A delivery due for 20 minutes: the delivery machinery is stuck.
    endpoint = EndpointFactory(team=TeamFactory(slug="finance"))
    from catalog import notices

    notification = notices.notification_write(
        type="partition.ready", dedup_key="stuck", data={}, now=now
    )
    Delivery.objects.create(
        notification=notification, endpoint=endpoint, next_attempt_at=now - timedelta(minutes=20)
    )

    status = self_monitoring.heartbeat(sender=delivery.sender_from_settings(), now=now)

    assert status == {
        "tidemark:system:scheduler": True,
        "tidemark:system:deliveries": False,
        "tidemark:system:poll": True,
        "tidemark:system:freshness": True,
        "tidemark:system:change-notices": True,
        "tidemark:system:lineage": True,
    }
    system = {m.external_id: m for m in WatchdogMonitor.objects.filter(system=True)}
    assert set(system) == set(self_monitoring.system_monitors())
    assert system["tidemark:system:scheduler"].pings.count() == 1
    assert system["tidemark:system:deliveries"].pings.count() == 0


def test_a_dataset_that_stops_being_critical_pauses_its_monitor(watchdog_api):
    team = TeamFactory(slug="orders")
    dataset = register(team)
    deliver()
    datasets.dataset_update(
        actor=Actor(team=team), dataset=dataset, criticality=Dataset.Criticality.HIGH
    )
    deliver()
    assert set(Monitor.objects.values_list("state", flat=True)) == {"paused"}
    datasets.dataset_update(
        actor=Actor(team=team),
        dataset=dataset,
        criticality=Dataset.Criticality.CRITICAL,
    )
    deliver()
    assert set(Monitor.objects.values_list("state", flat=True)) == {"new"}


def test_the_owner_sees_the_pipeline_ping_url_its_last_task_calls(watchdog_api, client_for):
    team = TeamFactory(slug="orders")
    dataset = register(team)
    deliver()

    body = client_for(team).get(f"/api/v1/datasets/{dataset.pk}").json()
    other = client_for(TeamFactory(slug="finance")).get(f"/api/v1/datasets/{dataset.pk}").json()

    url = body["pipeline_ping_url"]
    assert "pipeline_ping_url" not in other
    pipeline = Monitor.objects.get(external_id__endswith=":pipeline")
    assert url.endswith(f"/ping/{pipeline.ping_key}")
    assert pipeline.partitioning == "" and pipeline.cron == "30 6 * * *"
    from django.test import Client

    assert Client().post(f"/ping/{pipeline.ping_key}/0").status_code == 200
    assert pipeline.pings.get().kind == "success"


def test_the_monitors_link_to_the_dataset_page_and_page_by_its_criticality(watchdog_api, settings):
    settings.TIDEMARK_PUBLIC_URL = "https://catalog.example/"
    team = TeamFactory(slug="orders")
    dataset = register(team)
    deliver()
    link = {
        "href": f"https://catalog.example/datasets/{dataset.pk}/",
        "text": "Dataset s3://lake/orders",
    }
    assert {(m.severity, json.dumps(m.links)) for m in Monitor.objects.all()} == {
        ("critical", json.dumps([link]))
    }
    datasets.dataset_update(
        actor=Actor(team=team), dataset=dataset, criticality=Dataset.Criticality.HIGH
    )
    deliver()  # paused, and as urgent as a high dataset would be
    assert set(Monitor.objects.values_list("severity", flat=True)) == {"error"}

    settings.TIDEMARK_PUBLIC_URL = ""
    datasets.dataset_update(
        actor=Actor(team=team), dataset=dataset, criticality=Dataset.Criticality.CRITICAL
    )
    deliver()
    assert [m.links for m in Monitor.objects.all()] == [[], []]


def test_lineage_learned_later_tells_the_watchdog_the_upstream_once(watchdog_api):
    from catalog import tasks, watchdog_feed
    from tests.catalog.lineage_helpers import job_between

    team = TeamFactory(slug="orders")
    upstream = register(team)
    downstream = datasets.dataset_register(
        actor=Actor(team=team),
        namespace="s3://lake",
        name="revenue",
        criticality=Dataset.Criticality.CRITICAL,
        sla_cron="30 7 * * *",
        sla_timezone="Europe/Berlin",
    )
    deliver()
    monitor = Monitor.objects.get(external_id=watchdog_feed.external_id(downstream))
    assert monitor.depends_on == []
    assert tasks.sync_watchdog_dependencies() == 0  # nothing changed: nothing sent

    job_between(team, "build_revenue", upstream, downstream, seen_at=timezone.now())
    assert tasks.sync_watchdog_dependencies() == 1
    assert tasks.sync_watchdog_dependencies() == 0  # idempotent
    deliver()
    monitor.refresh_from_db()
    assert monitor.depends_on == [watchdog_feed.external_id(upstream)]
    # Only the data monitor depends on anything; the pipeline monitor keeps its own.
    assert (
        Monitor.objects.get(external_id=watchdog_feed.pipeline_external_id(downstream)).depends_on
        == []
    )
    assert Monitor.objects.get(external_id=watchdog_feed.external_id(upstream)).depends_on == []
    assert set(Delivery.objects.values_list("state", flat=True)) == {"succeeded"}
