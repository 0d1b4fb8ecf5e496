"""A broker outage never fails a publish: the doorbell is best-effort, the outbox row is
the work. Runs against a private redis-server that the test really kills."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterator

import pytest
from django.db import connection

from catalog import doorbell
from catalog.models import Delivery, Partition, ReadinessEvent
from tests.catalog.factories import DatasetFactory, SubscriptionFactory
from tests.catalog.worker_helpers import PrivateRedis, point_celery_at

pytestmark = [
    pytest.mark.django_db(transaction=True),  # on_commit doorbells really run
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

DELIVERY_QUEUE = "delivery"  # CELERY_TASK_ROUTES sends deliver_due here
PUBLISH_BUDGET = 5.0  # seconds a publish may take while the broker is down


@pytest.fixture(autouse=True)
def doorbell_not_quiet(monkeypatch, settings):
    """Each test starts with a doorbell that has not failed yet, and every publish rings
    at once (these tests look at each ring, not at coalesced ones)."""
    monkeypatch.setattr(doorbell, "_quiet_until", 0.0)
    settings.TIDEMARK_DOORBELL_INTERVAL = 0.0


@pytest.fixture
def private_redis(tmp_path) -> Iterator[PrivateRedis]:
    server = PrivateRedis.spare(tmp_path)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def broker(private_redis, settings, monkeypatch) -> Iterator[PrivateRedis]:
    """Point the web process's Celery app at ``private_redis`` for this test."""
    from config.celery import app

    settings.CELERY_BROKER_URL = private_redis.url
    restore = point_celery_at(private_redis.url, monkeypatch)
    writer = app.connection_for_write()
    assert (writer.transport_cls, writer.hostname, writer.port) == (
        "redis",
        "127.0.0.1",
        private_redis.port,
    )
    try:
        yield private_redis
    finally:
        restore()


@pytest.fixture
def publisher(team, client_for):
    """The orders team's dataset with one subscriber webhook, and a client to publish it."""
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")
    endpoint_id = SubscriptionFactory(dataset=dataset).endpoint_id
    client = client_for(team)

    def publish(partition: str):
        started = time.monotonic()
        response = client.post(
            "/api/v1/readiness",
            {"namespace": "s3://lake", "name": "raw/orders", "partition": partition},
            format="json",
        )
        return response, time.monotonic() - started

    publish.endpoint_id = endpoint_id
    return publish


def _assert_committed(partition: str, endpoint_id: int, event_id: int) -> None:
    assert not connection.in_atomic_block  # what we read below is committed data
    part = Partition.objects.get(key=partition)
    event = ReadinessEvent.objects.get(partition=part)
    assert event.pk == event_id
    assert part.current_revision_id == event.revision_id
    delivery = Delivery.objects.get(notification__dedup_key=f"readiness-event:{event.pk}")
    assert (delivery.endpoint_id, delivery.state) == (endpoint_id, Delivery.State.PENDING)


def _readyz(api_client):
    started = time.monotonic()
    response = api_client.get("/readyz")
    return response, time.monotonic() - started


def test_readiness_publish_commits_and_answers_201_while_the_broker_is_down(
    broker, publisher, api_client, caplog, monkeypatch
):
    ready, _ = _readyz(api_client)
    assert (ready.status_code, ready.json()["status"]) == (200, "ok")
    assert ready.json()["checks"] == {"database": "ok", "broker": "ok"}

    rung, _ = publisher("2026-11-27")
    assert rung.status_code == 201, rung.json()
    assert broker.queue_length(DELIVERY_QUEUE) == 1  # the doorbell reached this redis

    broker.kill()
    ready, readyz_took = _readyz(api_client)
    assert (ready.status_code, ready.json()["status"]) == (200, "degraded")
    assert ready.json()["checks"]["database"] == "ok"
    assert ready.json()["checks"]["broker"].startswith("unreachable: ")
    assert readyz_took < PUBLISH_BUDGET

    with caplog.at_level(logging.WARNING, logger="catalog.doorbell"):
        response, took = publisher("2026-11-28")

    assert response.status_code == 201, response.json()
    assert response.json()["partition"] == "2026-11-28"
    assert took < PUBLISH_BUDGET
    assert "doorbell catalog.tasks.deliver_due not rung" in caplog.text
    _assert_committed("2026-11-28", publisher.endpoint_id, response.json()["event_id"])
    _assert_committed("2026-11-27", publisher.endpoint_id, rung.json()["event_id"])

    broker.start()  # the broker comes back on the same address: ringing resumes
    monkeypatch.setattr(doorbell, "_quiet_until", 0.0)  # once the quiet period has passed
    ready, _ = _readyz(api_client)
    assert (ready.status_code, ready.json()["status"]) == (200, "ok")
    response, _ = publisher("2026-11-29")
    assert response.status_code == 201, response.json()
    assert broker.queue_length(DELIVERY_QUEUE) == 1


def test_readiness_publish_stays_fast_through_a_sustained_broker_outage(broker, publisher, caplog):
    rung, _ = publisher("2026-11-24")
    assert rung.status_code == 201
    assert broker.queue_length(DELIVERY_QUEUE) == 1

    broker.kill()
    for partition in ("2026-11-25", "2026-11-26", "2026-11-27"):
        with caplog.at_level(logging.WARNING, logger="catalog.doorbell"):
            response, took = publisher(partition)

        assert response.status_code == 201, response.json()
        _assert_committed(partition, publisher.endpoint_id, response.json()["event_id"])
        assert took < PUBLISH_BUDGET, f"publish of {partition} took {took:.1f}s"
    # One warning for the outage, not one per publish: the doorbell keeps quiet a while.
    assert caplog.text.count("not rung") == 1
