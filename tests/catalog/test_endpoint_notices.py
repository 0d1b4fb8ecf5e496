"""An endpoint's lifecycle told to its team, and a recovery bounded per request, on a real
receiver on loopback: ``endpoint.enabled`` after it is enabled again,
``endpoint.recovered`` with the count after a recovery (both validated against the event
catalog by the suite's payload check, and mailed to the team's contact), and a recovery
larger than its maximum replaying everything across requests and batches, each with its
original webhook-id, oldest first."""

from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks import Webhook
from werkzeug import Response

from catalog import delivery, recovery
from catalog.actors import Actor
from catalog.models import Delivery, Endpoint, Notification
from catalog.services.endpoints import endpoint_enable
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_delivery(settings):
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "read_timeout": 0.5,
        "total_deadline": 2.0,
        "max_attempts": 1,  # a 500 makes a dead letter at once
        "disable_after_failing_seconds": 10**6,  # never disabled by the failures here
        "batch_size": 100,
    }


@pytest.fixture
def world(httpserver):
    owner = TeamFactory(slug="orders")
    consumer = TeamFactory(slug="analytics", contact_email="analytics-oncall@example.com")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    result = subscription_create(
        actor=Actor(team=consumer), dataset=dataset, endpoint_url=httpserver.url_for("/hook")
    )
    state = {"broken": True, "received": []}

    def answer(request):
        payload = Webhook(result.endpoint_secret).verify(request.get_data(), dict(request.headers))
        state["received"].append((request.headers["webhook-id"], payload["data"]["partition"]))
        return Response("down", status=500) if state["broken"] else Response("", status=204)

    httpserver.expect_request("/hook").respond_with_handler(answer)

    def publish(partition):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )

    return publish, state, Endpoint.objects.get(kind="webhook")


def _days(n):
    first = timezone.datetime(2026, 10, 1)
    return [(first + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(n)]


def test_enabling_a_disabled_endpoint_tells_its_team_with_what_waited(world, sender, mailoutbox):
    publish, state, endpoint = world
    publish("2026-11-20")
    delivery.deliver_due(sender=sender)  # a dead letter
    Endpoint.objects.filter(pk=endpoint.pk).update(
        is_active=False, disabled_reason="answered 410 Gone", disabled_at=timezone.now()
    )
    publish("2026-11-21")  # waits while disabled
    now = timezone.now()
    endpoint_enable(endpoint=endpoint, now=now)
    told = Notification.objects.get(type="endpoint.enabled")
    assert told.payload["data"] == {
        "team": "analytics",
        "endpoint_id": endpoint.pk,
        "url": endpoint.url,
        "disabled_at": told.payload["data"]["disabled_at"],
        "disabled_reason": "answered 410 Gone",
        "waiting": 1,
        "dead_letters": 1,
    }
    assert told.payload["data"]["disabled_at"].endswith("Z")
    # Enabling an active endpoint changes nothing and tells nobody.
    endpoint_enable(endpoint=endpoint, now=now + timedelta(seconds=1))
    assert Notification.objects.filter(type="endpoint.enabled").count() == 1

    state["broken"] = False
    delivery.deliver_due(sender=sender)
    [mail] = [m for m in mailoutbox if "enabled" in m.subject]
    assert mail.to == ["analytics-oncall@example.com"]
    assert endpoint.url in mail.body and "answered 410 Gone" in mail.body
    assert f"POST /api/v1/endpoints/{endpoint.pk}/recover" in mail.body
    assert [p for _, p in state["received"]] == ["2026-11-20", "2026-11-21"]


def test_a_recovery_tells_the_team_how_many_it_queued(world, sender, mailoutbox):
    publish, state, endpoint = world
    since = timezone.now()
    publish("2026-11-20")
    publish("2026-11-21")
    delivery.deliver_due(sender=sender)
    state["broken"] = False
    recovered = recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now())
    assert (recovered.queued, recovered.remaining) == (2, 0)
    [told] = Notification.objects.filter(type="endpoint.recovered")
    assert told.payload["data"]["queued"] == 2 and told.payload["data"]["remaining"] == 0
    assert told.payload["data"]["endpoint_id"] == endpoint.pk
    # Nothing queued, nobody told.
    recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now())
    assert Notification.objects.filter(type="endpoint.recovered").count() == 1
    delivery.deliver_due(sender=sender)
    [mail] = [m for m in mailoutbox if "failed deliveries" in m.subject]
    assert mail.to == ["analytics-oncall@example.com"] and "queued 2" in mail.body


def test_a_recovery_over_its_maximum_replays_everything_across_batches(world, sender, settings):
    publish, state, endpoint = world
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "recover_max_per_request": 5,
        "recover_batch_size": 2,
    }
    since = timezone.now()
    days = _days(12)
    for day in days:
        publish(day)
    delivery.deliver_due(sender=sender)
    assert Delivery.objects.filter(endpoint=endpoint, state="dead").count() == 12
    first_ids = {p: i for i, p in state["received"]}
    state["broken"] = False
    state["received"].clear()

    counts = []
    while True:
        recovered = recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now())
        counts.append((recovered.queued, recovered.remaining))
        if not recovered.remaining:
            break
    assert counts == [(5, 7), (5, 2), (2, 0)]
    delivery.deliver_due(sender=sender)
    # Every one, once, oldest first, each with its original webhook-id.
    assert [p for _, p in state["received"]] == days
    assert all(first_ids[p] == i for i, p in state["received"])
    assert not Delivery.objects.filter(endpoint=endpoint).exclude(state="succeeded").exists()
    told = Notification.objects.filter(type="endpoint.recovered").order_by("created_at")
    assert [n.payload["data"]["queued"] for n in told] == [5, 5, 2]


def test_a_recovery_in_small_batches_keeps_the_creation_order(world, sender, settings):
    """Batches (each its own transaction) are taken oldest first and share the request's
    due time, so the recovered deliveries are claimed in the order they were made."""
    publish, _, endpoint = world
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "recover_max_per_request": 100,
        "recover_batch_size": 3,
    }
    since = timezone.now()
    for day in _days(7):
        publish(day)
    delivery.deliver_due(sender=sender)
    recovered = recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now())
    assert (recovered.queued, recovered.remaining) == (7, 0)
    pending = Delivery.objects.filter(endpoint=endpoint, state="pending")
    assert pending.count() == 7
    # Recovered in creation order: they are claimed oldest first.
    assert list(pending.order_by("next_attempt_at", "pk").values_list("pk", flat=True)) == sorted(
        pending.values_list("pk", flat=True)
    )
