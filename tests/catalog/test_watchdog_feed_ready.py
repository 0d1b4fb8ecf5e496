"""A data monitor is fed from the start: when a dataset becomes watched (critical, an SLA,
re-activation) or its watched definition changes, the partitions already ready within the
monitor's horizon travel with the definition, so the watchdog never pages for data that is
there; a partition that is really missing pages once, naming itself.

The catalog's deliveries run through to the watchdog's REST API (a live server on
127.0.0.1) and the clock is moved with time-machine, so the watchdog plans its deadlines
from the same "now" the catalog acted at."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import time_machine

from catalog import delivery, watchdog_feed
from catalog import freshness as catalog_freshness
from catalog.actors import Actor
from catalog.models import Dataset, Delivery, Endpoint, Notification
from catalog.services import datasets, publishing
from tests.catalog.factories import TeamFactory
from watchdog import evaluation, tokens
from watchdog.models import Incident, Monitor, Ping

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.urls("tests.urls_catalog_and_watchdog"),
]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def watchdog_api(live_server, settings):
    settings.ROOT_URLCONF = "tests.urls_catalog_and_watchdog"
    _, token = tokens.create("catalog")
    settings.TIDEMARK_WATCHDOG_URL = live_server.url
    settings.TIDEMARK_WATCHDOG_TOKEN = token
    return live_server.url


def deliver() -> None:
    delivery.deliver_due(sender=delivery.sender_from_settings())
    assert set(Delivery.objects.values_list("state", flat=True)) <= {"succeeded"}


def register(team, **fields) -> Dataset:
    fields = {
        "criticality": Dataset.Criticality.HIGH,
        "partitioning": Dataset.Partitioning.DAILY,
        "sla_cron": "0 6 * * *",
        "sla_timezone": "UTC",
        "sla_grace_seconds": 600,
        **fields,
    }
    return datasets.dataset_register(
        actor=Actor(team=team), namespace="s3://lake", name="orders", **fields
    )


def publish(team, *keys: str, at: datetime) -> None:
    for key in keys:
        publishing.readiness_publish(
            actor=Actor(team=team), namespace="s3://lake", name="orders", partition=key, now=at
        )


def judge(at: datetime) -> list[evaluation.Missed]:
    """The data monitors' deadlines missed by ``at`` (the pipeline monitor, pinged by the
    producer's own job, is not what this feed is about)."""
    with time_machine.travel(at, tick=False):
        missed = evaluation.evaluate_due(now=at)
    return [m for m in missed if m.monitor.endswith(" data")]


def data_monitor(dataset: Dataset) -> Monitor:
    return Monitor.objects.get(external_id=f"tidemark:dataset:{dataset.pk}:data")


def missed_partitions(monitor: Monitor) -> list[str]:
    return list(
        Incident.objects.filter(monitor=monitor)
        .order_by("deadline_at")
        .values_list("partition", flat=True)
    )


def test_a_dataset_patched_to_critical_is_not_paged_for_partitions_already_ready(
    watchdog_api, client_for
):
    team = TeamFactory(slug="orders", paging_routing_key="R" * 32)
    with time_machine.travel(utc(2026, 11, 25, 12), tick=False):
        dataset = register(team)
    publish(team, "2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28", at=utc(2026, 11, 28, 2))

    with time_machine.travel(utc(2026, 11, 28, 3), tick=False):
        response = client_for(team).patch(
            f"/api/v1/datasets/{dataset.pk}", {"criticality": "critical"}, format="json"
        )
        assert response.status_code == 200
        deliver()
    monitor = data_monitor(dataset)
    assert monitor.deadline_at == utc(2026, 11, 28, 6)
    # The ready partitions the monitor's deadlines can still expect, each once.
    assert sorted(Ping.objects.filter(monitor=monitor).values_list("partition", flat=True)) == [
        "2026-11-27",
        "2026-11-28",
    ]

    def freshness(at: datetime) -> str:
        """The catalog's own judgement at ``at``, its evaluation run as beat runs it."""
        with time_machine.travel(at, tick=False):
            catalog_freshness.evaluate_due(now=at)
            body = client_for(team).get(f"/api/v1/datasets/{dataset.pk}/freshness").json()
        return body["state"]

    assert judge(utc(2026, 11, 28, 6, 11)) == []  # expects 2026-11-27: ready
    assert judge(utc(2026, 11, 29, 6, 11)) == []  # expects 2026-11-28: ready
    assert freshness(utc(2026, 11, 29, 6, 11)) == "fresh"
    assert not Incident.objects.filter(monitor=monitor).exists()

    [missed] = judge(utc(2026, 11, 30, 6, 11))  # expects 2026-11-29: never published
    assert missed.partition == "2026-11-29"
    assert missed_partitions(monitor) == ["2026-11-29"]
    monitor.refresh_from_db()
    assert monitor.state == "down"
    assert freshness(utc(2026, 11, 30, 6, 11)) == "late"


def test_an_sla_given_to_a_critical_dataset_feeds_its_ready_partitions(watchdog_api):
    team = TeamFactory(slug="orders")
    with time_machine.travel(utc(2026, 11, 25, 12), tick=False):
        dataset = register(team, criticality=Dataset.Criticality.CRITICAL, sla_cron="")
    publish(team, "2026-11-26", "2026-11-27", at=utc(2026, 11, 28, 2))
    with time_machine.travel(utc(2026, 11, 28, 3), tick=False):
        datasets.dataset_update(actor=Actor(team=team), dataset=dataset, sla_cron="0 6 * * *")
        deliver()

    assert judge(utc(2026, 11, 28, 6, 11)) == []
    [missed] = judge(utc(2026, 11, 29, 6, 11))
    assert missed.partition == "2026-11-28"
    assert missed_partitions(data_monitor(dataset)) == ["2026-11-28"]


def test_an_sla_moved_later_keeps_the_partitions_fed(watchdog_api):
    """A critical dataset fed from the start changes its deadline: the re-planned monitor
    is told again what is ready (a re-sent partition is not a second ping)."""
    team = TeamFactory(slug="orders")
    with time_machine.travel(utc(2026, 11, 25, 12), tick=False):
        dataset = register(team, sla_cron="")
    publish(team, "2026-11-26", "2026-11-27", at=utc(2026, 11, 28, 2))
    with time_machine.travel(utc(2026, 11, 28, 3), tick=False):
        datasets.dataset_update(
            actor=Actor(team=team),
            dataset=dataset,
            criticality=Dataset.Criticality.CRITICAL,
            sla_cron="0 6 * * *",
        )
        deliver()
    with time_machine.travel(utc(2026, 11, 28, 4), tick=False):
        datasets.dataset_update(actor=Actor(team=team), dataset=dataset, sla_cron="0 8 * * *")
        deliver()

    monitor = data_monitor(dataset)
    assert (monitor.cron, monitor.deadline_at) == ("0 8 * * *", utc(2026, 11, 28, 8))
    assert Ping.objects.filter(monitor=monitor, partition="2026-11-27").count() == 1
    assert judge(utc(2026, 11, 28, 8, 11)) == []
    [missed] = judge(utc(2026, 11, 29, 8, 11))
    assert missed.partition == "2026-11-28"


def test_a_reactivated_dataset_feeds_what_was_ready_before_it_was_retired(watchdog_api):
    team = TeamFactory(slug="orders")
    with time_machine.travel(utc(2026, 11, 25, 12), tick=False):
        dataset = register(team)
    publish(team, "2026-11-26", "2026-11-27", at=utc(2026, 11, 28, 1))
    actor = Actor(team=team, username="ana")
    with time_machine.travel(utc(2026, 11, 28, 2), tick=False):
        datasets.dataset_update(
            actor=actor, dataset=dataset, lifecycle="retired", override_reason="moved"
        )
        datasets.dataset_update(
            actor=actor, dataset=dataset, criticality=Dataset.Criticality.CRITICAL
        )
        deliver()
    assert not Monitor.objects.exists()  # retired: nothing to watch

    with time_machine.travel(utc(2026, 11, 28, 3), tick=False):
        datasets.dataset_update(actor=actor, dataset=dataset, lifecycle="active")
        deliver()

    assert judge(utc(2026, 11, 28, 6, 11)) == []
    [missed] = judge(utc(2026, 11, 29, 6, 11))
    assert missed.partition == "2026-11-28"


def test_a_late_retry_of_an_older_definition_feeds_nothing_twice(watchdog_api):
    team = TeamFactory(slug="orders")
    with time_machine.travel(utc(2026, 11, 25, 12), tick=False):
        dataset = register(team)
    publish(team, "2026-11-27", at=utc(2026, 11, 28, 1))
    with time_machine.travel(utc(2026, 11, 28, 2), tick=False):
        datasets.dataset_update(
            actor=Actor(team=team), dataset=dataset, criticality=Dataset.Criticality.CRITICAL
        )
        deliver()
    with time_machine.travel(utc(2026, 11, 28, 3), tick=False):
        datasets.dataset_update(actor=Actor(team=team), dataset=dataset, sla_grace_seconds=900)
        deliver()
        for first in Delivery.objects.filter(
            notification__type=Notification.Type.WATCHDOG_MONITOR
        ).order_by("id"):
            result = delivery.delivery_send(
                delivery.Claim(
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
                ),
                sender=delivery.sender_from_settings(),
                now=None,
            )
            assert result.status_code in (200, 208)

    monitor = data_monitor(dataset)
    assert monitor.grace_seconds == 900
    assert list(Ping.objects.filter(monitor=monitor).values_list("partition", flat=True)) == [
        "2026-11-27"
    ]


def test_ready_partitions_beyond_what_a_definition_carries_follow_as_pings(
    watchdog_api, monkeypatch
):
    """A weekly deadline on daily partitions: the week's partitions are all in the horizon;
    past the definition's limit they are queued as pings, each once, however often the
    definition is sent again."""
    monkeypatch.setattr(watchdog_feed, "READY_PARTITIONS_IN_DEFINITION", 2)
    team = TeamFactory(slug="orders")
    with time_machine.travel(utc(2026, 11, 20, 12), tick=False):
        dataset = register(team, sla_cron="0 6 * * 1")  # Mondays; 2026-11-30 is one
    week = ["2026-11-23", "2026-11-24", "2026-11-25", "2026-11-26"]
    publish(team, "2026-11-22", *week, at=utc(2026, 11, 27, 2))
    for at, changes in [
        (utc(2026, 11, 27, 3), {"criticality": Dataset.Criticality.CRITICAL}),
        (utc(2026, 11, 27, 4), {"sla_grace_seconds": 900}),
    ]:
        with time_machine.travel(at, tick=False):
            datasets.dataset_update(actor=Actor(team=team), dataset=dataset, **changes)
            deliver()

    monitor = data_monitor(dataset)
    definitions = Notification.objects.filter(
        type=Notification.Type.WATCHDOG_MONITOR,
        payload__data__external_id=monitor.external_id,
    ).order_by("id")
    assert [n.payload["data"]["monitor"]["ready_partitions"] for n in definitions] == [
        week[:2],
        week[:2],
    ]
    pings = Notification.objects.filter(type=Notification.Type.WATCHDOG_PING)
    assert sorted(n.payload["data"]["partition"] for n in pings) == week[2:]
    # 2026-11-22 closed before the deadline the week's first partition is due at.
    assert sorted(Ping.objects.filter(monitor=monitor).values_list("partition", flat=True)) == week


def test_partitions_ready_ahead_of_their_period_are_pinged_when_it_starts(watchdog_api):
    """A forecast (accepts future partitions) made critical: its started partitions travel
    with the definition; the watchdog refuses partitions from the future, so one ready
    ahead of its period is queued as a ping due when its period starts."""
    team = TeamFactory(slug="orders")
    with time_machine.travel(utc(2026, 11, 25, 12), tick=False):
        dataset = register(team, accepts_future_partitions=True)
    publish(team, "2026-11-27", "2099-12-05", at=utc(2026, 11, 27, 2))
    with time_machine.travel(utc(2026, 11, 27, 3), tick=False):
        datasets.dataset_update(
            actor=Actor(team=team), dataset=dataset, criticality=Dataset.Criticality.CRITICAL
        )
        # The ping waits for its period (deliveries are due by the database's clock).
        delivery.deliver_due(sender=delivery.sender_from_settings())

    [definition] = Notification.objects.filter(
        type=Notification.Type.WATCHDOG_MONITOR,
        payload__data__external_id=f"tidemark:dataset:{dataset.pk}:data",
    )
    assert definition.payload["data"]["monitor"]["ready_partitions"] == ["2026-11-27"]
    ahead = Delivery.objects.get(notification__type=Notification.Type.WATCHDOG_PING)
    assert ahead.notification.payload["data"]["partition"] == "2099-12-05"
    assert (ahead.state, ahead.next_attempt_at) == ("pending", utc(2099, 12, 5))
    monitor = data_monitor(dataset)
    assert list(Ping.objects.filter(monitor=monitor).values_list("partition", flat=True)) == [
        "2026-11-27"
    ]
