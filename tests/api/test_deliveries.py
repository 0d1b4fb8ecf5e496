import pytest
from django.utils import timezone
from standardwebhooks import Webhook

from catalog import delivery
from catalog.actors import Actor
from catalog.models import Delivery, Endpoint
from catalog.services.publishing import readiness_publish
from tests.catalog.factories import DatasetFactory, EndpointFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def consumer():
    return TeamFactory(slug="analytics")


@pytest.fixture
def world(client_for, consumer, httpserver):
    """orders publishes raw/orders; analytics subscribed with the test receiver."""
    owner = TeamFactory(slug="orders")
    DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    client = client_for(consumer)
    body = client.post(
        "/api/v1/subscriptions",
        {
            "namespace": "s3://lake",
            "name": "raw/orders",
            "endpoint_url": httpserver.url_for("/hook"),
        },
        format="json",
    ).json()

    def publish(partition):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )

    return client, publish, body["endpoint_secret"]


def run_pass():
    sender = delivery.sender_from_settings()
    try:
        return delivery.deliver_due(sender=sender)
    finally:
        sender.close()


def test_rejected_delivery_is_listed_with_attempts_and_replayed_with_same_webhook_id(
    world, httpserver
):
    client, publish, secret = world
    httpserver.expect_ordered_request("/hook").respond_with_data("who are you?", status=401)
    httpserver.expect_ordered_request("/hook").respond_with_data("", status=204)
    publish("2026-11-28")
    run_pass()

    listed = client.get("/api/v1/deliveries", {"state": "dead_letter"}).json()["results"]
    assert [(d["state"], d["last_status_code"]) for d in listed] == [("rejected", 401)]
    detail = client.get(f"/api/v1/deliveries/{listed[0]['id']}").json()
    assert detail["attempt_log"][0]["response_excerpt"] == "who are you?"
    assert detail["payload"]["type"] == "partition.ready"

    response = client.post(f"/api/v1/deliveries/{listed[0]['id']}/replay")
    assert response.status_code == 200
    assert response.json()["state"] == "pending"
    run_pass()
    assert Delivery.objects.get().state == "succeeded"
    first, second = (request for request, _ in httpserver.log)
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == listed[0]["webhook_id"]
    Webhook(secret).verify(second.get_data(), dict(second.headers))
    assert client.post(f"/api/v1/deliveries/{listed[0]['id']}/replay").status_code == 409


def test_replayed_delivery_gets_a_fresh_attempt_budget(world, httpserver, settings):
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "max_attempts": 2,
        "backoff_base_seconds": 60,
    }
    client, publish, _ = world
    httpserver.expect_request("/hook").respond_with_data("", status=500)
    publish("2026-11-28")
    for _ in range(2):
        run_pass()
        Delivery.objects.filter(state="retrying").update(next_attempt_at=timezone.now())
    row = Delivery.objects.get()
    assert (row.state, row.attempts) == ("dead", 2)
    client.post(f"/api/v1/deliveries/{row.id}/replay")
    run_pass()
    row.refresh_from_db()
    assert (row.state, row.attempts) == ("retrying", 3)
    assert list(row.attempt_log.order_by("number").values_list("number", flat=True)) == [1, 2, 3]


def test_endpoint_replay_all_dead_letters(world, httpserver):
    client, publish, _ = world
    httpserver.expect_request("/hook").respond_with_data("", status=404)
    for day in ("2026-11-26", "2026-11-27", "2026-11-28"):
        publish(day)
    run_pass()
    endpoint = client.get("/api/v1/endpoints").json()["results"][0]
    assert endpoint["deliveries"] == {
        "succeeded": 0,
        "waiting": 0,
        "dead_letters": 3,
        "success_rate": 0.0,
    }
    assert client.post(f"/api/v1/endpoints/{endpoint['id']}/replay").json() == {"replayed": 3}
    assert Delivery.objects.filter(state="pending").count() == 3


def test_disabled_endpoint_is_re_enabled_explicitly(world, httpserver):
    client, publish, _ = world
    httpserver.expect_request("/hook").respond_with_data("", status=410)
    publish("2026-11-28")
    run_pass()
    [endpoint] = [
        e for e in client.get("/api/v1/endpoints").json()["results"] if e["kind"] == "webhook"
    ]
    assert (endpoint["is_active"], "410" in endpoint["disabled_reason"]) == (False, True)
    enabled = client.post(f"/api/v1/endpoints/{endpoint['id']}/enable").json()
    assert (enabled["is_active"], enabled["disabled_reason"]) == (True, "")


def test_rotate_secret_returns_new_secret_and_overlap(world, httpserver):
    client, publish, old_secret = world
    endpoint_id = Endpoint.objects.get(kind="webhook").id
    body = client.post(f"/api/v1/endpoints/{endpoint_id}/rotate-secret").json()
    assert body["endpoint_secret"].startswith("whsec_") and body["endpoint_secret"] != old_secret
    assert body["previous_secret_expires_at"]
    httpserver.expect_request("/hook").respond_with_data("")
    publish("2026-11-28")
    run_pass()
    request, _ = httpserver.log[0]
    Webhook(body["endpoint_secret"]).verify(request.get_data(), dict(request.headers))
    Webhook(old_secret).verify(request.get_data(), dict(request.headers))


def test_other_teams_cannot_see_or_touch_deliveries_and_endpoints(world, httpserver, client_for):
    _, publish, _ = world
    httpserver.expect_request("/hook").respond_with_data("", status=400)
    publish("2026-11-28")
    run_pass()
    row = Delivery.objects.get()
    intruder = client_for(TeamFactory(slug="intruders"))
    assert intruder.get("/api/v1/deliveries").json()["results"] == []
    assert intruder.get(f"/api/v1/deliveries/{row.id}").status_code == 404
    assert intruder.post(f"/api/v1/deliveries/{row.id}/replay").status_code == 404
    assert intruder.post(f"/api/v1/endpoints/{row.endpoint_id}/rotate-secret").status_code == 404
    assert intruder.post(f"/api/v1/endpoints/{row.endpoint_id}/replay").status_code == 404
    row.refresh_from_db()
    assert row.state == "rejected"


def test_read_key_cannot_replay(world, httpserver, client_for, consumer):
    _, publish, _ = world
    httpserver.expect_request("/hook").respond_with_data("", status=400)
    publish("2026-11-28")
    run_pass()
    reader = client_for(consumer, scopes=["read"])
    assert reader.post(f"/api/v1/deliveries/{Delivery.objects.get().id}/replay").status_code == 403


def test_delivery_list_query_count_is_bounded(world, httpserver, django_assert_num_queries):
    client, publish, _ = world
    httpserver.expect_request("/hook").respond_with_data("", status=204)
    for day in range(1, 8):
        publish(f"2026-11-{day:02d}")
    run_pass()
    client.get("/api/v1/me")  # the key row is cached from here
    with django_assert_num_queries(1):
        assert len(client.get("/api/v1/deliveries").json()["results"]) == 7
    with django_assert_num_queries(1):
        client.get("/api/v1/endpoints")


@pytest.mark.parametrize(
    ("kind", "url"),
    [("email", "mailto:analytics@example.com"), ("watchdog", "http://127.0.0.1:8001")],
)
def test_rotate_secret_is_refused_for_endpoints_that_sign_nothing(world, consumer, kind, url):
    client, _, _ = world
    endpoint = EndpointFactory(team=consumer, kind=kind, url=url, secret_encrypted="")
    response = client.post(f"/api/v1/endpoints/{endpoint.id}/rotate-secret")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "endpoint_has_no_secret"
    assert (body["endpoint_kind"], f"{kind} endpoint" in body["detail"]) == (kind, True)
    assert "only webhook endpoints" in body["detail"]
    endpoint.refresh_from_db()
    assert (endpoint.secret_encrypted, endpoint.previous_secrets) == ("", [])


def test_enable_on_an_active_failing_endpoint_changes_nothing(world, consumer):
    client, _, _ = world
    endpoint = Endpoint.objects.get(kind="webhook")
    failing_since = timezone.now() - timezone.timedelta(hours=3)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        failing_since=failing_since, consecutive_failures=292
    )
    [before] = [
        e for e in client.get("/api/v1/endpoints").json()["results"] if e["id"] == endpoint.id
    ]
    response = client.post(f"/api/v1/endpoints/{endpoint.id}/enable")
    assert (response.status_code, response.json()) == (200, before)
    endpoint.refresh_from_db()
    assert (endpoint.failing_since, endpoint.consecutive_failures) == (failing_since, 292)


def test_enable_on_a_disabled_endpoint_starts_its_failure_streak_afresh(world):
    client, _, _ = world
    endpoint = Endpoint.objects.get(kind="webhook")
    Endpoint.objects.filter(pk=endpoint.pk).update(
        is_active=False,
        disabled_reason="every attempt failed",
        failing_since=timezone.now() - timezone.timedelta(days=2),
        consecutive_failures=40,
    )
    enabled = client.post(f"/api/v1/endpoints/{endpoint.id}/enable").json()
    assert (enabled["is_active"], enabled["disabled_reason"], enabled["failing_since"]) == (
        True,
        "",
        None,
    )
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0
