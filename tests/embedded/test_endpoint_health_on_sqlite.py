"""An endpoint's health on SQLite (the embedded mode): every outcome is recorded one by
one there, each success adding to its endpoint's hourly counter, which the health reads;
and the migration's backfill of those counters runs on SQLite's datetimes."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import time_machine
from django.apps import apps
from django.db import connection
from django.utils import timezone
from werkzeug import Response

from catalog import delivery, selectors, success_counts
from catalog.actors import Actor
from catalog.models import Delivery, EndpointSuccessHour, Notification
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, EndpointFactory, TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 28, 12, 40, tzinfo=UTC)


def test_a_pass_on_sqlite_counts_its_successes_and_the_health_reads_them(httpserver):
    assert connection.vendor == "sqlite"
    httpserver.expect_request("/ok").respond_with_data("ok")
    httpserver.expect_request("/down").respond_with_response(Response("boom", status=503))
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    consumers = {path: TeamFactory(slug=f"team-{path}") for path in ("ok", "down")}
    for path, team in consumers.items():
        subscription_create(
            actor=Actor(team=team), dataset=dataset, endpoint_url=httpserver.url_for(f"/{path}")
        )
    for day in (1, 2, 3):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=f"2026-11-{day:02d}",
            now=timezone.now(),
        )
    sender = delivery.sender_from_settings()
    try:
        summary = delivery.deliver_due(sender=sender)
    finally:
        sender.close()
    # Full jitter may make a retry to /down due within the same pass: count deliveries.
    assert (summary.by_state["succeeded"], summary.by_state["retrying"] >= 3) == (3, True)
    states = sorted(Delivery.objects.values_list("state", flat=True))
    assert states == ["retrying"] * 3 + ["succeeded"] * 3
    (ok,) = selectors.endpoint_list(team=consumers["ok"])
    (down,) = selectors.endpoint_list(team=consumers["down"])
    assert (ok.n_succeeded, down.n_succeeded) == (3, 0)
    assert sum(EndpointSuccessHour.objects.values_list("succeeded", flat=True)) == 3


def test_the_backfill_counts_the_last_25_hours_on_sqlite():
    endpoint = EndpointFactory()
    for n, age in enumerate([0.1, 0.2, 24.5, 25.5, 25.9]):  # hours before NOW
        Delivery.objects.create(
            notification=Notification.objects.create(
                type="partition.ready", dedup_key=f"n{n}", payload={}
            ),
            endpoint=endpoint,
            state="succeeded",
            next_attempt_at=NOW,
            finished_at=NOW - timedelta(hours=age),
        )
    migration = importlib.import_module("catalog.migrations.0044_endpoint_success_hour")
    with time_machine.travel(NOW, tick=False):
        migration.backfill(apps, SimpleNamespace(connection=connection))
    day = datetime(2026, 11, 28, tzinfo=UTC)
    assert {r.hour: r.succeeded for r in EndpointSuccessHour.objects.all()} == {
        day.replace(hour=12): 2,
        day.replace(day=27, hour=12): 1,
        day.replace(day=27, hour=11): 1,  # 10:46 is before the 25 hours
    }
    (health,) = selectors.endpoint_list(team=endpoint.team, now=NOW)
    assert health.n_succeeded == 3
    assert success_counts.health_window_start(NOW) == day.replace(day=27, hour=12)
