"""Lineage processing in a real Celery worker on a private redis-server: the doorbell rung
after commit gets an event processed, and an event whose doorbell message was lost is
processed by the beat sweep."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator

import pytest
from django.conf import settings

from catalog import doorbell
from catalog.models import Claim
from lineage.models import LineageEvent, LineageRun
from lineage.services import processing
from tests.catalog.factories import TeamFactory
from tests.catalog.worker_helpers import (
    PrivateRedis,
    Worker,
    point_celery_at,
    wait_until,
    worker_environment,
)
from tests.lineage import events as ev

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the worker reads committed rows
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

LINEAGE_QUEUE = "lineage"  # CELERY_TASK_ROUTES sends process_events here


@pytest.fixture
def broker(tmp_path, monkeypatch, settings) -> Iterator[PrivateRedis]:
    """A private redis-server this process's doorbell publishes to, ringing at once."""
    monkeypatch.setattr(doorbell, "_quiet_until", 0.0)
    server = PrivateRedis.spare(tmp_path)
    settings.CELERY_BROKER_URL = server.url
    restore = point_celery_at(server.url, monkeypatch)
    try:
        yield server
    finally:
        restore()
        server.kill()


@pytest.fixture
def worker(broker, tmp_path) -> Iterator[Worker]:
    """One ``celery worker`` consuming only the lineage queue, as the Procfile's does too."""
    process = Worker(
        name="lineage",
        log_path=tmp_path / "worker.log",
        env=worker_environment(broker_url=broker.url, lease_seconds=30),
        queues=LINEAGE_QUEUE,
    )
    process.start()
    try:
        process.wait_ready()
        yield process
    finally:
        process.kill()


@pytest.fixture
def sender(client_for):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    client = client_for(team, scopes=["lineage"])

    def send(payload: dict) -> int:
        response = client.post(
            "/api/v1/lineage", data=json.dumps(payload), content_type="application/json"
        )
        assert response.status_code == 201, response.json()
        return response.json()["id"]

    return send


def _processed(event_id: int) -> bool:
    return LineageEvent.objects.filter(pk=event_id, state="processed").exists()


def test_the_doorbell_gets_an_event_processed_by_a_worker(broker, worker, sender):
    event_id = sender(ev.run_event("COMPLETE", inputs=[ev.dataset("s3://lake", "raw/orders")]))
    wait_until(lambda: _processed(event_id), 30, "the worker to process the event")
    assert LineageRun.objects.get().state == "complete"
    assert "lineage events: claimed 1: processed 1" in worker.log()


def test_an_event_whose_doorbell_was_lost_is_processed_by_the_beat_sweep(broker, sender, tmp_path):
    event_id = sender(ev.run_event("START"))
    assert broker.queue_length(LINEAGE_QUEUE) == 1  # the doorbell rang after commit
    with broker.client() as client:
        client.delete(LINEAGE_QUEUE)  # ... and its message is lost
    worker = Worker(
        name="lineage",
        log_path=tmp_path / "worker.log",
        env=worker_environment(broker_url=broker.url, lease_seconds=30),
        queues=LINEAGE_QUEUE,
    )
    worker.start()
    try:
        worker.wait_ready()
        time.sleep(1.0)
        assert LineageEvent.objects.get(pk=event_id).state == "pending"  # nothing rang

        # What beat sends every 30 s (CELERY_BEAT_SCHEDULE), routed to the lineage queue.
        from config.celery import app

        sweep = settings.CELERY_BEAT_SCHEDULE["sweep-lineage"]
        assert sweep["task"] == processing.PROCESS_EVENTS
        app.send_task(sweep["task"])
        wait_until(lambda: _processed(event_id), 30, "the sweep to process the event")
    finally:
        worker.kill()
    assert LineageRun.objects.get().state == "running"
