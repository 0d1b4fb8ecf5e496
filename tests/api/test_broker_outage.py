"""A broker outage never fails a publish: the doorbell is best-effort, the outbox row is
the work. Runs against a private redis-server that the test really kills."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import kombu.pools
import pytest
import redis
from django.db import connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from catalog import doorbell
from catalog.models import Delivery, Partition, ReadinessEvent
from tests.catalog.factories import DatasetFactory, SubscriptionFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),  # on_commit doorbells really run
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

DELIVERY_QUEUE = "delivery"  # CELERY_TASK_ROUTES sends deliver_due here
PUBLISH_BUDGET = 5.0  # seconds a publish may take while the broker is down


@pytest.fixture(autouse=True)
def doorbell_not_quiet(monkeypatch):
    """Each test starts with a doorbell that has not failed yet."""
    monkeypatch.setattr(doorbell, "_quiet_until", 0.0)


def _wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PrivateRedis:
    """A redis-server of this test's own, on a spare port, that can crash and come back."""

    port: int
    workdir: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        # No client-side retries: "is it down?" must be answered at once, not after backoff.
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=1,
            socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )

    def _answers(self) -> bool:
        try:
            with self.client() as client:
                return bool(client.ping())
        except redis.ConnectionError:
            return False

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_until(lambda: self.process.poll() is not None or self._answers(), 10, "redis-server")
        if self.process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.process.returncode}")

    def kill(self) -> None:
        """Crash it (SIGKILL): connections drop and the port refuses from now on."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        _wait_until(lambda: not self._answers(), 10, "redis-server to go away")

    def queue_length(self, queue: str) -> int:
        with self.client() as client:
            return client.llen(queue)


@pytest.fixture
def private_redis(tmp_path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(port=_free_port(), workdir=tmp_path)
    try:
        server.start()
    except RuntimeError:  # another process took the port between bind and start
        server.port = _free_port()
        server.start()
    try:
        yield server
    finally:
        server.kill()


def _reset_broker_connections(app) -> None:
    """Forget every pooled broker connection, so the next send connects to the current URL.

    kombu keeps process-wide pools keyed by connection parameters, and the Celery app caches
    its own pool and producer pool on top; all three must go.
    """
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def broker(private_redis, settings, monkeypatch) -> Iterator[PrivateRedis]:
    """Point the web process's Celery app at ``private_redis`` for this test."""
    from config.celery import app

    original = app.conf.broker_url
    # Celery reads CELERY_BROKER_URL from the environment before its own configuration,
    # and config/settings/test.py sets it, so app.conf alone would not move the broker.
    monkeypatch.setenv("CELERY_BROKER_URL", private_redis.url)
    settings.CELERY_BROKER_URL = private_redis.url
    app.conf.broker_url = private_redis.url
    _reset_broker_connections(app)
    writer = app.connection_for_write()
    assert (writer.transport_cls, writer.hostname, writer.port) == (
        "redis",
        "127.0.0.1",
        private_redis.port,
    )
    try:
        yield private_redis
    finally:
        app.conf.broker_url = original
        _reset_broker_connections(app)


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
