"""Two prunes at once, and a publish during a prune, on PostgreSQL (each thread on its own
connection)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from catalog.actors import Actor
from catalog.models import ApiKey, Delivery, Notification
from catalog.services.publishing import readiness_publish
from catalog.services.teams import api_key_create
from pruning import engine
from tests.catalog.factories import DatasetFactory, EndpointFactory, SubscriptionFactory
from tests.catalog.threads import race

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


def test_two_prunes_at_once_delete_each_row_once_while_a_publish_goes_through():
    endpoint = EndpointFactory()
    with time_machine.travel(NOW - timedelta(days=60), tick=False):
        for i in range(60):
            notification = Notification.objects.create(
                type="partition.ready", dedup_key=f"old-{i}", payload={}
            )
            Delivery.objects.create(
                notification=notification,
                endpoint=endpoint,
                state="succeeded",
                next_attempt_at=NOW - timedelta(days=60),
                finished_at=NOW - timedelta(days=59),
            )
    dataset = DatasetFactory(name="raw/orders")
    SubscriptionFactory(dataset=dataset)
    key, _ = api_key_create(team=dataset.owner, name="p", scopes=[ApiKey.Scope.PUBLISH])
    actor = Actor(team=dataset.owner, api_key=key)

    def prune():
        [outcome] = engine.prune(engine.rules(["deliveries"]), now=NOW, batch_size=5)
        return outcome.deleted

    def publish():
        return [
            readiness_publish(
                actor=actor,
                namespace=dataset.namespace,
                name=dataset.name,
                partition=f"2026-11-{day:02d}",
                now=NOW,
            )
            for day in range(1, 11)
        ]

    first, second, published = race([prune, prune, publish])

    assert first + second == 60
    assert len(published) == 10
    # Only the publishes' deliveries are left, all still to be sent.
    assert Delivery.objects.filter(state="pending").count() == 10
    assert Delivery.objects.count() == 10
