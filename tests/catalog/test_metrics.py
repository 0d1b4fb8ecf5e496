"""The catalog's ``GET /metrics`` after real work on PostgreSQL and Redis: publishes through
the API, deliveries to loopback receivers, a late dataset, a lineage event, the broker's
queues; read back with ``prometheus_client``'s parser."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import redis
import time_machine
from django.conf import settings
from django.db.models import F
from django.test import Client
from django.utils import timezone

from catalog import delivery, freshness, metrics
from catalog.actors import Actor
from catalog.models import Claim, Delivery
from catalog.services.datasets import dataset_register
from catalog.services.subscriptions import subscription_create
from lineage.services import processing
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev
from tests.metrics_helpers import parse, scrape, value

pytestmark = pytest.mark.django_db

PUBLISH = "/api/v1/readiness"


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def world(httpserver, client_for):
    """``orders`` publishes ``raw/orders``; ``analytics`` subscribes with a webhook that
    answers 200, ``billing`` with one that answers 400 (a dead letter at once)."""
    owner = TeamFactory(slug="orders")
    DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    httpserver.expect_request("/ok", method="POST").respond_with_data("ok")
    httpserver.expect_request("/bad", method="POST").respond_with_data("no", status=400)
    for slug, path in (("analytics", "/ok"), ("billing", "/bad")):
        subscription_create(
            actor=Actor(team=TeamFactory(slug=slug)),
            dataset=owner.datasets.get(),
            endpoint_url=httpserver.url_for(path),
        )
    return client_for(owner, scopes=["publish"])


def publish(client, partition: str, **headers):
    body = {"namespace": "s3://lake", "name": "raw/orders", "partition": partition}
    return client.post(PUBLISH, data=json.dumps(body), content_type="application/json", **headers)


def test_publishes_are_counted_by_result_and_requests_by_route(world):
    before = scrape(Client())
    assert publish(world, "2026-11-27").status_code == 201
    assert publish(world, "2026-11-27").status_code == 200  # a repeat
    assert publish(world, "2026-11-28", HTTP_IDEMPOTENCY_KEY="k1").status_code == 201
    replay = publish(world, "2026-11-28", HTTP_IDEMPOTENCY_KEY="k1")
    assert replay["Idempotent-Replayed"] == "true"
    assert publish(world, "not-a-date").status_code == 400
    after = scrape(Client())

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    published = {
        result: delta("tidemark_publishes_total", result=result)
        for result in metrics.PUBLISH_RESULTS
    }
    assert published == {"recorded": 2, "unchanged": 1, "replayed": 1, "refused": 1, "failed": 0}
    route = {"route": "readiness-publish", "method": "POST"}
    # A replay answers with the stored status: 201.
    assert delta("tidemark_http_requests_total", status="201", **route) == 3
    assert delta("tidemark_http_requests_total", status="200", **route) == 1
    assert delta("tidemark_http_requests_total", status="400", **route) == 1
    assert delta("tidemark_http_request_duration_seconds_count", route=route["route"]) == 5
    # The scrape before this one is counted under the metrics route.
    assert delta("tidemark_http_requests_total", route="metrics", method="GET", status="200") == 1
    # No label holds a path or a dataset's name.
    for _, labels in after:
        for _, label_value in labels:
            assert "/" not in label_value and "orders" not in label_value, labels


def test_deliveries_dead_letters_and_the_oldest_due_delivery(world):
    assert publish(world, "2026-11-27").status_code == 201
    assert publish(world, "2026-11-28").status_code == 201
    # The oldest due delivery has waited two minutes.
    Delivery.objects.update(next_attempt_at=F("next_attempt_at") - timedelta(seconds=120))
    before = scrape(Client())
    assert value(before, "tidemark_deliveries_waiting", state="pending") == 4
    assert value(before, "tidemark_oldest_due_work_age_seconds", work="deliveries") >= 120
    assert value(before, "tidemark_dead_letters", team="billing") == 0

    sender = delivery.sender_from_settings()
    try:
        summary = delivery.deliver_due(sender=sender)
    finally:
        sender.close()
    assert summary.by_state == {"succeeded": 2, "rejected": 2}
    after = scrape(Client())

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("tidemark_deliveries_total", kind="webhook", outcome="succeeded") == 2
    assert delta("tidemark_deliveries_total", kind="webhook", outcome="rejected") == 2
    assert delta("tidemark_delivery_attempt_duration_seconds_count", kind="webhook") == 4
    assert value(after, "tidemark_deliveries_waiting", state="pending") == 0
    assert value(after, "tidemark_oldest_due_work_age_seconds", work="deliveries") == 0
    assert value(after, "tidemark_dead_letters", team="billing") == 2
    assert ("tidemark_dead_letters", frozenset({("team", "analytics")})) not in after


def test_a_late_dataset_and_its_open_late_partition():
    owner = TeamFactory(slug="payments")
    with time_machine.travel(utc(2026, 11, 28, 12), tick=False):
        dataset_register(
            actor=Actor(team=owner, username="t"),
            namespace="s3://lake",
            name="raw/payments",
            sla_cron="30 6 * * *",
            sla_timezone="UTC",
            sla_grace_seconds=600,
        )
    before = scrape(Client())
    assert value(before, "tidemark_late_datasets") == 0
    [late] = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 41))
    assert late.partition == "2026-11-28"
    after = scrape(Client())
    assert value(after, "tidemark_late_datasets") == 1
    assert value(after, "tidemark_late_partitions_open") == 1
    assert value(after, "tidemark_datasets") == 1


def test_the_lineage_backlog_and_events_processed(client_for):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    sender = client_for(team, scopes=["lineage"])
    payload = ev.run_event("START", inputs=[ev.dataset("postgres://db:5432", "a.b.c")])
    response = sender.post(
        "/api/v1/lineage", data=json.dumps(payload), content_type="application/json"
    )
    assert response.status_code == 201
    before = scrape(Client())
    assert value(before, "tidemark_lineage_backlog_events", state="due") == 1
    assert value(before, "tidemark_lineage_backlog_events", state="waiting") == 0

    assert processing.lineage_events_process_due(now=timezone.now()).by_state == {"processed": 1}
    after = scrape(Client())
    assert value(after, "tidemark_lineage_backlog_events", state="due") == 0
    processed = "tidemark_lineage_events_processed_total"
    assert (
        value(after, processed, outcome="processed") - value(before, processed, outcome="processed")
        == 1
    )


def test_queue_lengths_are_read_from_redis():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.delete(*metrics.QUEUES)
        client.rpush("poll", "a", "b")
        client.rpush("housekeeping", "c")
        samples = scrape(Client())
    finally:
        client.delete(*metrics.QUEUES)
        client.close()
    assert value(samples, "tidemark_broker_up") == 1
    # Every queue is there; these two are rung by nothing in these tests (a doorbell of a
    # publish or a lineage event may still be ringing meanwhile).
    queues = {q for name, labels in samples if name == "tidemark_queue_messages" for _, q in labels}
    assert queues == set(metrics.QUEUES)
    assert value(samples, "tidemark_queue_messages", queue="poll") == 2
    assert value(samples, "tidemark_queue_messages", queue="housekeeping") == 1


def test_a_broker_that_does_not_answer_is_broker_up_0(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = Client().get("/metrics")
    assert response.status_code == 200
    samples = parse(response.content.decode())
    assert value(samples, "tidemark_broker_up") == 0
    assert not any(name == "tidemark_queue_messages" for name, _ in samples)
    assert value(samples, "tidemark_deliveries_waiting", state="pending") == 0  # the rest is there


def test_every_routed_queue_has_a_depth_gauge():
    """A queue added to the routes without a depth gauge would go unwatched."""
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert routed | {"default"} == set(metrics.QUEUES)
