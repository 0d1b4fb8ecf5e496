"""An endpoint's lifecycle over the API, on a real receiver on loopback: disabled after
sustained failure, enabled, ``POST /endpoints/{id}/recover`` since a time, and the
delivery log ``GET /endpoints/{id}/attempts``; who may, and bad input."""

from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks import Webhook
from werkzeug import Response

from catalog import delivery
from catalog.actors import Actor
from catalog.models import ApiKey, Delivery, Endpoint
from catalog.services.publishing import readiness_publish
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_delivery(settings):
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "read_timeout": 0.5,
        "total_deadline": 2.0,
        "max_attempts": 1,
        "disable_after_failing_seconds": 0,
        "disable_after_failures": 2,
    }


@pytest.fixture
def world(client_for, httpserver):
    """orders publishes raw/orders; analytics subscribed with the test receiver, which
    answers 500 with a body while ``state["broken"]``, 204 after."""
    owner = TeamFactory(slug="orders")
    consumer = TeamFactory(slug="analytics", contact_email="analytics@example.com")
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
    state = {"broken": True, "received": []}

    def answer(request):
        payload = Webhook(body["endpoint_secret"]).verify(request.get_data(), dict(request.headers))
        state["received"].append((request.headers["webhook-id"], payload["data"]["partition"]))
        if state["broken"]:
            return Response("upstream database down " + "x" * 3000, status=500)
        return Response("", status=204)

    httpserver.expect_request("/hook").respond_with_handler(answer)

    def publish(partition):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )

    endpoint_id = Endpoint.objects.get(kind="webhook").pk
    return client, publish, state, endpoint_id


def run_pass():
    sender = delivery.sender_from_settings()
    try:
        return delivery.deliver_due(sender=sender)
    finally:
        sender.close()


def iso(at):
    return at.isoformat().replace("+00:00", "Z")


def test_disable_enable_recover_since_end_to_end(world, mailoutbox):
    client, publish, state, endpoint_id = world
    publish("2026-11-20")
    run_pass()  # one failure: not yet a streak
    since = timezone.now()
    publish("2026-11-21")
    publish("2026-11-22")
    run_pass()  # failures 2 and 3: disabled, and the team is told
    run_pass()
    [endpoint] = [
        e for e in client.get("/api/v1/endpoints").json()["results"] if e["id"] == endpoint_id
    ]
    assert endpoint["is_active"] is False and "failed" in endpoint["disabled_reason"]
    assert endpoint["disabled_at"] and endpoint["outage_started_at"] < endpoint["disabled_at"]
    assert any("disabled" in m.subject for m in mailoutbox)
    sent_first = dict((p, i) for i, p in state["received"])

    refused = client.post(
        f"/api/v1/endpoints/{endpoint_id}/recover", {"since": iso(since)}, format="json"
    )
    assert refused.status_code == 409
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["code"] == "endpoint_disabled"
    assert f"/api/v1/endpoints/{endpoint_id}/enable" in refused.json()["detail"]

    state["broken"] = False
    assert client.post(f"/api/v1/endpoints/{endpoint_id}/enable").json()["is_active"] is True
    recovered = client.post(
        f"/api/v1/endpoints/{endpoint_id}/recover", {"since": iso(since)}, format="json"
    )
    assert recovered.status_code == 200
    assert recovered.json()["queued"] == 2
    again = client.post(
        f"/api/v1/endpoints/{endpoint_id}/recover", {"since": iso(since)}, format="json"
    )
    assert again.json()["queued"] == 0  # pending already: nothing twice
    run_pass()
    replayed = state["received"][3:]
    assert [p for _, p in replayed] == ["2026-11-21", "2026-11-22"]
    assert all(i == sent_first[p] for i, p in replayed)
    assert Delivery.objects.get(notification__payload__data__partition="2026-11-20").state == "dead"

    log = client.get(f"/api/v1/endpoints/{endpoint_id}/attempts").json()["results"]
    assert [(a["status_code"], a["outcome"]) for a in log] == [
        (204, "succeeded"),
        (204, "succeeded"),
        (500, "retry"),
        (500, "retry"),
        (500, "retry"),
    ]
    newest = log[0]
    assert newest["webhook_id"] == sent_first["2026-11-22"]
    assert newest["type"] == "partition.ready" and newest["number"] == 2
    assert isinstance(newest["latency_ms"], int) and newest["latency_ms"] >= 0
    assert newest["attempted_at"].endswith("Z")
    oldest = log[-1]
    assert oldest["response_excerpt"].startswith("upstream database down")
    assert len(oldest["response_excerpt"]) == 1024  # bounded as stored


def test_attempt_log_filters_and_pages(world):
    client, publish, state, endpoint_id = world
    publish("2026-11-20")
    run_pass()
    state["broken"] = False
    Endpoint.objects.filter(pk=endpoint_id).update(is_active=True)
    publish("2026-11-21")
    run_pass()
    url = f"/api/v1/endpoints/{endpoint_id}/attempts"
    failed = client.get(url, {"outcome": "failed"}).json()["results"]
    assert [a["status_code"] for a in failed] == [500]
    assert [a["status_code"] for a in client.get(url, {"status_code": 204}).json()["results"]] == [
        204
    ]
    future = iso(timezone.now() + timedelta(hours=1))
    assert client.get(url, {"since": future}).json()["results"] == []
    page = client.get(url, {"page_size": 1}).json()
    assert len(page["results"]) == 1 and page["next"]
    assert client.get(page["next"]).json()["results"][0]["status_code"] == 500


def test_attempt_log_names_an_error_class_when_no_answer_came(client_for, settings):
    team = TeamFactory(slug="analytics")
    owner = TeamFactory(slug="orders")
    DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    client = client_for(team)
    client.post(
        "/api/v1/subscriptions",
        # Nothing listens on port 9 of loopback: connection refused.
        {"namespace": "s3://lake", "name": "raw/orders", "endpoint_url": "http://127.0.0.1:9/h"},
        format="json",
    )
    readiness_publish(
        actor=Actor(team=owner),
        namespace="s3://lake",
        name="raw/orders",
        partition="2026-11-20",
        now=timezone.now(),
    )
    run_pass()
    endpoint_id = Endpoint.objects.get(kind="webhook").pk
    [attempt] = client.get(f"/api/v1/endpoints/{endpoint_id}/attempts").json()["results"]
    assert (attempt["status_code"], attempt["error_kind"]) == (None, "connect")
    assert attempt["error"]


def test_attempt_log_query_count_is_flat(world, django_assert_num_queries):
    client, publish, _, endpoint_id = world
    for day in range(1, 6):
        publish(f"2026-11-0{day}")
    run_pass()
    # The endpoint, and one page of attempts joined to their notifications: as many at
    # any history length.
    with django_assert_num_queries(2):
        response = client.get(f"/api/v1/endpoints/{endpoint_id}/attempts")
    assert len(response.json()["results"]) == 5


@pytest.mark.parametrize(
    ("body", "status", "field", "rule"),
    [
        ({}, 400, "since", "required"),
        ({"since": "yesterday"}, 400, "since", "invalid"),
        ({"since": "2026-11-20T00:00:00Z", "until": "x"}, 400, "until", "unknown"),
        ("future", 422, "since", "not_in_future"),
        ("too_old", 422, "since", "max_window"),
    ],
)
def test_recover_bad_input_is_a_problem_naming_since(world, body, status, field, rule):
    client, _, _, endpoint_id = world
    now = timezone.now()
    if body == "future":
        body = {"since": iso(now + timedelta(minutes=10))}
    elif body == "too_old":
        body = {"since": iso(now - timedelta(days=15))}
    response = client.post(f"/api/v1/endpoints/{endpoint_id}/recover", body, format="json")
    assert response.status_code == status, response.json()
    problem = response.json()
    assert [(e["field"], e["rule"]) for e in problem["errors"]] == [(field, rule)]
    if status == 422:
        assert problem["code"] == "recover_since_out_of_range"
        assert problem["earliest_since"][:10] == str((now - timedelta(days=14)).date())


def test_another_teams_endpoint_is_not_found(world, client_for):
    _, _, _, endpoint_id = world
    stranger = client_for(TeamFactory(slug="finance"))
    since = iso(timezone.now() - timedelta(hours=1))
    recover = stranger.post(
        f"/api/v1/endpoints/{endpoint_id}/recover", {"since": since}, format="json"
    )
    assert (recover.status_code, recover.json()["code"]) == (404, "endpoint_not_found")
    attempts = stranger.get(f"/api/v1/endpoints/{endpoint_id}/attempts")
    assert (attempts.status_code, attempts.json()["code"]) == (404, "endpoint_not_found")


def test_scopes_read_to_look_manage_to_recover(world, client_for):
    _, _, _, endpoint_id = world
    team = Endpoint.objects.get(pk=endpoint_id).team
    reader = client_for(team, scopes=[ApiKey.Scope.READ])
    publisher = client_for(team, scopes=[ApiKey.Scope.PUBLISH])
    governance = client_for(TeamFactory(slug="gov"), scopes=[ApiKey.Scope.GOVERNANCE])
    since = iso(timezone.now() - timedelta(hours=1))
    url = f"/api/v1/endpoints/{endpoint_id}"
    assert reader.get(f"{url}/attempts").status_code == 200
    assert reader.post(f"{url}/recover", {"since": since}, format="json").status_code == 403
    assert publisher.get(f"{url}/attempts").status_code == 403
    # Governance reads reports across teams, not another team's deliveries.
    assert governance.get(f"{url}/attempts").status_code == 403
