"""A request's id reaches the tasks it enqueues (``config.celery_logging``): in the
message's headers on a private redis-server, and in the log lines a real ``celery
worker`` process writes, in the JSON format, while it runs the task."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
import structlog

from catalog import doorbell
from config.celery_logging import HEADER
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.catalog.worker_helpers import (
    PrivateRedis,
    Receiver,
    Worker,
    point_celery_at,
    wait_until,
    worker_environment,
)

pytestmark = [
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(120),
]


@pytest.fixture
def broker(tmp_path, monkeypatch) -> Iterator[PrivateRedis]:
    """A private redis-server, and this process's Celery app publishing to it."""
    server = PrivateRedis.spare(tmp_path)
    restore = point_celery_at(server.url, monkeypatch)
    try:
        yield server
    finally:
        restore()
        server.kill()


@pytest.fixture(autouse=True)
def _no_context() -> Iterator[None]:
    structlog.contextvars.clear_contextvars()
    yield
    structlog.contextvars.clear_contextvars()


def _queued_headers(broker: PrivateRedis, queue: str) -> list[dict]:
    """The headers of the messages waiting on ``queue``, oldest first (kombu pushes on
    the left and pops on the right)."""
    with broker.client() as client:
        return [json.loads(raw)["headers"] for raw in reversed(client.lrange(queue, 0, -1))]


def test_a_task_published_within_a_request_carries_its_id_in_the_headers(broker):
    from config.celery import app

    structlog.contextvars.bind_contextvars(request_id="req-42")
    app.send_task(doorbell.DELIVER_DUE)
    structlog.contextvars.clear_contextvars()
    app.send_task(doorbell.DELIVER_DUE)  # as beat publishes: outside any request

    inside, outside = _queued_headers(broker, "delivery")
    assert inside[HEADER] == "req-42"
    assert HEADER not in outside


@pytest.mark.django_db(transaction=True)  # the worker sees committed rows only
def test_the_worker_logs_the_enqueuing_request_id_in_json(broker, client_for, tmp_path):
    receiver = Receiver()
    worker = Worker(
        name="logs",
        log_path=tmp_path / "worker.log",
        env=worker_environment(broker_url=broker.url, lease_seconds=8, TIDEMARK_LOG_FORMAT="json"),
        queues="delivery",
    )
    try:
        team = TeamFactory(slug="orders")
        dataset = DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")
        SubscriptionFactory(dataset=dataset, endpoint__url=receiver.url_for("/hook"))
        worker.start().wait_ready()

        response = client_for(team, scopes=["publish"]).post(
            "/api/v1/readiness",
            {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"},
            format="json",
            headers={"X-Request-ID": "req-from-proxy"},
        )
        assert response.status_code == 201, response.content
        assert response["X-Request-ID"] == "req-from-proxy"
        wait_until(lambda: receiver.snapshot(), 30, "the delivery at the receiver")
        wait_until(lambda: "deliveries: " in worker.log(), 30, "the pass's summary")
    finally:
        worker.kill()
        receiver.close()

    text = worker.log()
    # Celery prints its start-up banner on standard output; every log record is JSON.
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(r["event"] == "logs@tidemark-test ready." for r in records), text[-3000:]
    summary = next(r for r in records if r["event"].startswith("deliveries: "))
    assert summary["logger"] == "catalog.tasks"
    assert summary["request_id"] == "req-from-proxy"
    assert summary["task"] == doorbell.DELIVER_DUE and summary["task_id"]
    # The worker's own records, outside the task, carry no request id.
    ready = next(r for r in records if r["event"] == "logs@tidemark-test ready.")
    assert "request_id" not in ready and "task" not in ready


def test_beat_logs_json_and_its_tasks_carry_no_request_id(broker, tmp_path):
    from tests.catalog.stack_helpers import Beat

    beat = Beat(
        name="beat",
        log_path=tmp_path / "beat.log",
        env=worker_environment(broker_url=broker.url, lease_seconds=8, TIDEMARK_LOG_FORMAT="json"),
        schedule={"ring": {"task": doorbell.DELIVER_DUE, "schedule": 0.2}},
        schedule_file=tmp_path / "beat-schedule",
    )
    try:
        beat.start().wait_ready()
        wait_until(lambda: broker.queue_length("delivery") >= 2, 30, "beat to send twice")
    finally:
        beat.kill()

    assert all(HEADER not in headers for headers in _queued_headers(broker, "delivery"))
    # Celery prints its start-up banner on standard output; every log record is JSON.
    records = [json.loads(line) for line in beat.log().splitlines() if line.startswith("{")]
    starting = next(r for r in records if r["event"] == "beat: Starting...")
    assert starting["logger"] == "celery.beat" and "request_id" not in starting
