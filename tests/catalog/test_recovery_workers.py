"""An endpoint's lifecycle through a real Celery worker process, a real Redis broker and a
real HTTP receiver on loopback: failing until disabled, enabled again once fixed, and
"recover since T" delivering every failed delivery since T once, with its original
webhook-id (``catalog.recovery``). The fixtures are the catalog's
(``tests/catalog/conftest.py``)."""

from __future__ import annotations

import json
import shutil

import pytest
from django.utils import timezone
from standardwebhooks import Webhook

from catalog import endpoint_actions, recovery
from catalog.models import Delivery, Endpoint
from tests.catalog.test_delivery_workers import (  # noqa: F401 (an autouse fixture)
    DELIVERED_WITHIN,
    doorbell_not_quiet,
)
from tests.catalog.worker_helpers import ring_deliveries, subscribers, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the worker sees committed rows only
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(120),
]


def _partition(hit) -> str:
    return json.loads(hit.body)["data"]["partition"]


def test_disabled_enabled_and_recovered_since_t_through_a_worker(start_worker, receiver):
    broken = {"now": True}
    # (200, not 204: this receiver always answers a body.)
    receiver.respond = lambda hit: 500 if broken["now"] else 200
    publish, secrets = subscribers(receiver, ["/hook"])
    # One attempt a delivery; disabled at the second failure in a row, at once.
    worker = start_worker(
        "lifecycle",
        TIDEMARK_DELIVERY_MAX_ATTEMPTS="1",
        TIDEMARK_DISABLE_AFTER="0",
        TIDEMARK_DISABLE_AFTER_FAILURES="2",
    )
    worker.wait_ready()

    publish("2026-11-20")
    wait_until(lambda: len(receiver.snapshot()) == 1, DELIVERED_WITHIN, "the first failure")
    since = timezone.now()
    publish("2026-11-21")
    publish("2026-11-22")
    endpoint = Endpoint.objects.get(kind="webhook")
    wait_until(
        lambda: not Endpoint.objects.get(pk=endpoint.pk).is_active,
        DELIVERED_WITHIN,
        "the endpoint to be disabled",
        every=ring_deliveries,
    )
    # Nothing in flight: the batch that held the disabling failure is recorded; what was
    # not claimed by then waits for the endpoint, pending.
    wait_until(
        lambda: not Delivery.objects.filter(claim_token__isnull=False).exists(),
        DELIVERED_WITHIN,
        "every claimed attempt to be recorded",
    )
    first_ids = {_partition(h): h.webhook_id for h in receiver.snapshot()}
    failed_since = Delivery.objects.filter(endpoint=endpoint, state="dead", created_at__gte=since)
    dead = failed_since.count()
    assert dead >= 1  # at least the failure that disabled it

    broken["now"] = False
    endpoint_actions.endpoint_enable(endpoint=endpoint)  # a pending one is sent now
    recovered = recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now())
    assert recovered.queued == dead
    again = recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now())
    assert again.queued == 0

    def done() -> bool:
        return not Delivery.objects.filter(
            endpoint=endpoint, state__in=["pending", "retrying"]
        ).exists()

    wait_until(done, DELIVERED_WITHIN, "the recovered deliveries", every=ring_deliveries)
    succeeded = [h for h in receiver.snapshot() if h.status == 200]
    assert sorted(_partition(h) for h in succeeded) == ["2026-11-21", "2026-11-22"]
    ids = dict(
        Delivery.objects.values_list("notification__payload__data__partition", "notification_id")
    )
    for hit in succeeded:  # the original webhook-id (one that waited was never sent before)
        assert hit.webhook_id == first_ids.get(_partition(hit), hit.webhook_id)
        assert hit.webhook_id == str(ids[_partition(hit)])
        Webhook(secrets["/hook"]).verify(hit.body, hit.headers)
    states = dict(
        Delivery.objects.filter(endpoint=endpoint).values_list(
            "notification__payload__data__partition", "state"
        )
    )
    assert states == {"2026-11-20": "dead", "2026-11-21": "succeeded", "2026-11-22": "succeeded"}
