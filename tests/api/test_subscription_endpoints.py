"""Several endpoints per subscription over the API, on real receivers on loopback:
``POST /api/v1/subscriptions/{id}/endpoints`` adds one, ``DELETE .../endpoints/{id}``
removes one; each endpoint receives every notification signed with its own secret, with
the notification's webhook-id; a declaration never moves nor adds an endpoint."""

import pytest
from django.utils import timezone
from standardwebhooks import Webhook, WebhookVerificationError
from werkzeug import Response

from catalog import delivery
from catalog.actors import Actor
from catalog.models import Delivery, Endpoint, Subscription, SubscriptionEndpoint
from catalog.services import subscription_endpoints
from catalog.services.publishing import readiness_publish
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/subscriptions"


class Receiver:
    """One consumer receiver at ``path``: verifies each request with its own secret and
    keeps (webhook-id, partition) of each, in order."""

    def __init__(self, httpserver, path):
        self.url = httpserver.url_for(path)
        self.secret = None
        self.received = []
        self.raw = []
        httpserver.expect_request(path).respond_with_handler(self.answer)

    def answer(self, request):
        self.raw.append((request.get_data(), dict(request.headers)))
        payload = Webhook(self.secret).verify(request.get_data(), dict(request.headers))
        self.received.append((request.headers["webhook-id"], payload["data"]["partition"]))
        return Response("", status=204)

    def partitions(self):
        return [partition for _, partition in self.received]


@pytest.fixture
def world(client_for, httpserver):
    """orders publishes raw/orders; analytics subscribed to it with receiver ``a``;
    receivers ``b`` and ``c`` are ready for more endpoints."""
    owner = TeamFactory(slug="orders")
    consumer = TeamFactory(slug="analytics")
    DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    a, b, c = (Receiver(httpserver, f"/hook-{n}") for n in "abc")
    client = client_for(consumer)
    body = client.post(
        URL,
        {"namespace": "s3://lake", "name": "raw/orders", "endpoint_url": a.url},
        format="json",
    ).json()
    a.secret = body["endpoint_secret"]

    def publish(partition):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )

    return client, publish, body["id"], (a, b, c)


def run_pass():
    sender = delivery.sender_from_settings()
    try:
        return delivery.deliver_due(sender=sender)
    finally:
        sender.close()


def test_two_endpoints_each_receive_every_notification_with_their_own_secret(world):
    client, publish, subscription_id, (a, b, _) = world
    publish("2026-11-27")  # before the second endpoint: to a alone
    run_pass()
    added = client.post(f"{URL}/{subscription_id}/endpoints", {"url": b.url}, format="json")
    assert added.status_code == 201, added.json()
    body = added.json()
    b.secret = body["endpoint_secret"]
    assert b.secret.startswith("whsec_") and b.secret != a.secret
    assert body["subscription_id"] == subscription_id and body["url"] == b.url
    assert body["caught_up"] == 0
    assert body["id"] == Endpoint.objects.get(url=b.url).pk

    publish("2026-11-28")
    publish("2026-11-29")
    run_pass()
    assert a.partitions() == ["2026-11-27", "2026-11-28", "2026-11-29"]
    assert b.partitions() == ["2026-11-28", "2026-11-29"]
    # The same notification, so the same webhook-id at both; a delivery each.
    assert a.received[1:] == b.received
    assert Delivery.objects.filter(state="succeeded").count() == 5
    # Each is signed with its own endpoint's secret only.
    data, headers = b.raw[0]
    with pytest.raises(WebhookVerificationError):
        Webhook(a.secret).verify(data, headers)

    [listed] = client.get(URL).json()["results"]
    assert listed["endpoint_url"] == a.url
    assert [e["url"] for e in listed["endpoints"]] == [a.url, b.url]


def test_adding_a_url_it_delivers_to_changes_nothing_and_an_existing_endpoint_keeps_its_secret(
    world, client_for
):
    client, _, subscription_id, (a, b, _) = world
    again = client.post(f"{URL}/{subscription_id}/endpoints", {"url": a.url}, format="json")
    assert again.status_code == 200, again.json()
    assert "endpoint_secret" not in again.json()
    assert not SubscriptionEndpoint.objects.exists()
    # b is already the team's endpoint (another subscription's): reused, secret not shown.
    other = DatasetFactory(owner=TeamFactory(slug="sales"), namespace="s3://lake", name="x")
    client.post(URL, {"dataset_id": other.id, "endpoint_url": b.url}, format="json")
    reused = client.post(f"{URL}/{subscription_id}/endpoints", {"url": b.url}, format="json")
    assert reused.status_code == 201 and "endpoint_secret" not in reused.json()
    assert Endpoint.objects.filter(url=b.url).count() == 1


def test_removing_an_endpoint_stops_its_deliveries_and_the_first_passes_on(world):
    client, publish, subscription_id, (a, b, c) = world
    for receiver in (b, c):
        body = client.post(
            f"{URL}/{subscription_id}/endpoints", {"url": receiver.url}, format="json"
        ).json()
        receiver.secret = body["endpoint_secret"]
    b_id, a_id = Endpoint.objects.get(url=b.url).pk, Endpoint.objects.get(url=a.url).pk

    assert client.delete(f"{URL}/{subscription_id}/endpoints/{b_id}").status_code == 204
    publish("2026-11-28")
    run_pass()
    assert (a.partitions(), b.partitions(), c.partitions()) == (["2026-11-28"], [], ["2026-11-28"])

    # Removing the first makes the oldest other one first.
    assert client.delete(f"{URL}/{subscription_id}/endpoints/{a_id}").status_code == 204
    subscription = client.get(URL).json()["results"][0]
    assert subscription["endpoint_url"] == c.url
    assert [e["url"] for e in subscription["endpoints"]] == [c.url]
    publish("2026-11-29")
    run_pass()
    assert (a.partitions(), c.partitions()) == (["2026-11-28"], ["2026-11-28", "2026-11-29"])
    # The endpoints themselves stay the team's, with their logs.
    assert Endpoint.objects.filter(url__in=[a.url, b.url]).count() == 2

    gone = client.delete(f"{URL}/{subscription_id}/endpoints/{b_id}")
    assert gone.status_code == 404 and gone.json()["code"] == "endpoint_not_found"


def test_declaring_again_with_another_url_is_still_a_409_and_moves_nothing(world):
    client, _, subscription_id, (a, b, c) = world
    client.post(f"{URL}/{subscription_id}/endpoints", {"url": b.url}, format="json")
    declare = {"namespace": "s3://lake", "name": "raw/orders"}
    moved = client.post(URL, {**declare, "endpoint_url": c.url}, format="json")
    assert moved.status_code == 409 and moved.json()["code"] == "subscription_exists"
    assert moved.json()["existing"]["endpoints_path"] == f"{URL}/{subscription_id}/endpoints"
    # Its second endpoint's URL is one of its own: a 200 that keeps the first one first.
    again = client.post(
        URL, {**declare, "endpoint_url": b.url, "event_types": ["dataset.late"]}, format="json"
    )
    assert again.status_code == 200, again.json()
    assert again.json()["endpoint_url"] == a.url
    assert [e["url"] for e in again.json()["endpoints"]] == [a.url, b.url]
    assert not Endpoint.objects.filter(url=c.url).exists()


def test_a_new_endpoint_with_since_catches_up_alone(world):
    client, publish, subscription_id, (a, b, _) = world
    since = timezone.now()
    publish("2026-11-28")
    run_pass()
    body = client.post(
        f"{URL}/{subscription_id}/endpoints",
        {"url": b.url, "since": since.isoformat()},
        format="json",
    ).json()
    b.secret = body["endpoint_secret"]
    assert body["caught_up"] == 1
    run_pass()
    assert a.received == b.received  # a was not told twice; b got the same webhook-id


def test_limits_and_refusals(world, client_for, monkeypatch):
    client, _, subscription_id, (_, b, c) = world
    monkeypatch.setattr(subscription_endpoints, "MAX_ENDPOINTS", 2)
    client.post(f"{URL}/{subscription_id}/endpoints", {"url": b.url}, format="json")
    full = client.post(f"{URL}/{subscription_id}/endpoints", {"url": c.url}, format="json")
    assert full.status_code == 400
    assert [(e["field"], e["rule"]) for e in full.json()["errors"]] == [("url", "max_endpoints")]
    for url, rule in (
        ("ftp://example.com/x", "https_url"),
        ("https://user:pw@example.com/x", "no_credentials"),
    ):
        refused = client.post(f"{URL}/{subscription_id}/endpoints", {"url": url}, format="json")
        assert refused.status_code == 400
        [error] = refused.json()["errors"]
        assert (error["field"], error["rule"]) == ("url", rule)
        assert url in error["detail"]
    intruder = client_for(TeamFactory(slug="intruder"))
    hidden = intruder.post(f"{URL}/{subscription_id}/endpoints", {"url": c.url}, format="json")
    assert hidden.status_code == 404 and hidden.json()["code"] == "subscription_not_found"
    first = Subscription.objects.get().endpoint_id
    denied = intruder.delete(f"{URL}/{subscription_id}/endpoints/{first}")
    assert denied.status_code == 404
    reader = client_for(Subscription.objects.get().team, scopes=["read"])
    assert (
        reader.post(f"{URL}/{subscription_id}/endpoints", {"url": c.url}, format="json").status_code
        == 403
    )
