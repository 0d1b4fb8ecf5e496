"""Per-endpoint rate limits and Retry-After throttles on SQLite (the embedded mode): the
claim's window function and float arithmetic, and a real loopback receiver."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from werkzeug import Response

from catalog import delivery
from catalog.actors import Actor
from catalog.models import Delivery, Endpoint
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db


def _world(httpserver, paths):
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    endpoints = {}
    for path in paths:
        result = subscription_create(
            actor=Actor(team=TeamFactory(slug=f"team-{path}")),
            dataset=dataset,
            endpoint_url=httpserver.url_for(f"/{path}"),
        )
        endpoints[path] = result.subscription.endpoint

    def publish(days):
        for day in days:
            readiness_publish(
                actor=Actor(team=owner),
                namespace="s3://lake",
                name="raw/orders",
                partition=f"2026-11-{day:02d}",
                now=timezone.now(),
            )

    return endpoints, publish


def test_rate_limits_claim_per_endpoint_on_sqlite(httpserver, settings):
    assert connection.vendor == "sqlite"
    settings.TIDEMARK_DELIVERY = {**settings.TIDEMARK_DELIVERY, "endpoint_rate_per_second": 10}
    endpoints, publish = _world(httpserver, ["a", "b"])
    Endpoint.objects.filter(pk=endpoints["a"].pk).update(rate_limit_per_second=2)
    publish(range(1, 21))
    now = timezone.now()
    claims = delivery.delivery_claim_due(limit=50, lease_seconds=60, now=now)
    counts = {p: sum(c.endpoint_id == e.pk for c in claims) for p, e in endpoints.items()}
    assert counts == {"a": 2, "b": 10}
    assert delivery.delivery_claim_due(limit=50, lease_seconds=60, now=now) == []
    later = delivery.delivery_claim_due(limit=50, lease_seconds=60, now=now + timedelta(seconds=1))
    assert sum(c.endpoint_id == endpoints["a"].pk for c in later) == 2


def test_a_429_retry_after_pauses_the_endpoint_on_sqlite(httpserver):
    endpoints, publish = _world(httpserver, ["a", "b"])
    answers = iter([Response("slow down", status=429, headers={"Retry-After": "30"})])
    httpserver.expect_request("/a").respond_with_handler(lambda r: next(answers, Response("ok")))
    httpserver.expect_request("/b").respond_with_data("ok")
    publish(range(1, 4))
    sender = delivery.sender_from_settings()
    try:
        summary = delivery.deliver_due(sender=sender)
    finally:
        sender.close()
    paths = [request.path for request, _ in httpserver.log]
    assert (paths.count("/a"), paths.count("/b")) == (1, 3)
    assert summary.throttled == 2
    assert Endpoint.objects.get(pk=endpoints["a"].pk).throttled_until > timezone.now()
    assert Delivery.objects.filter(endpoint=endpoints["a"], state="pending").count() == 2
