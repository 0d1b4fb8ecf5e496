"""Concurrent recoveries of one endpoint, each bounded and batched, on real PostgreSQL
connections: together they queue every failed delivery exactly once (each batch's update
re-checks each row's state under its lock), whatever the interleaving."""

from __future__ import annotations

import pytest
from django.utils import timezone

from catalog import recovery
from catalog.models import Delivery, Notification
from tests.catalog.factories import EndpointFactory
from tests.catalog.test_publish_concurrency import _errors, _race

pytestmark = pytest.mark.django_db(transaction=True)

DEAD = 60


@pytest.fixture
def dead_letters():
    endpoint = EndpointFactory()
    now = timezone.now()
    notifications = Notification.objects.bulk_create(
        Notification(type="partition.ready", dedup_key=f"n{i}", payload={"i": i})
        for i in range(DEAD)
    )
    Delivery.objects.bulk_create(
        Delivery(notification=n, endpoint=endpoint, state="dead", attempts=15, next_attempt_at=now)
        for n in notifications
    )
    return endpoint, now


def test_racing_recoveries_queue_every_dead_letter_once(dead_letters, settings):
    endpoint, made = dead_letters
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "recover_max_per_request": 7,
        "recover_batch_size": 3,
    }

    def recover_until_done(i):
        queued = []
        while True:
            found = recovery.endpoint_recover(endpoint=endpoint, since=made, now=timezone.now())
            queued.append(found.queued)
            if not found.remaining:
                return queued

    outcomes = _race(4, recover_until_done)
    assert not _errors(outcomes), _errors(outcomes)
    per_call = [n for _, calls in outcomes for n in calls]
    assert sum(per_call) == DEAD and max(per_call) <= 7
    assert Delivery.objects.filter(endpoint=endpoint, state="pending").count() == DEAD
    # A fresh attempt budget each, counted from the attempts made before.
    recovered = Delivery.objects.filter(endpoint=endpoint)
    assert set(recovered.values_list("attempts_before_replay", flat=True)) == {15}
