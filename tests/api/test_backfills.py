"""Backfills told as backfills, and subscriptions that want the newest partitions only:
published and subscribed through the API, delivered to real receivers on loopback."""

import json

import pytest
from django.utils import timezone

from catalog import delivery
from catalog.models import Notification
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

SUBSCRIPTIONS = "/api/v1/subscriptions"


@pytest.fixture
def world(client_for, httpserver):
    """orders publishes raw/orders (daily); analytics subscribes at /all, and dashboards,
    which reads the latest data only, at /newest with newest_only."""
    owner = TeamFactory(slug="orders")
    DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    httpserver.expect_request("/all").respond_with_data("", status=204)
    httpserver.expect_request("/newest").respond_with_data("", status=204)
    subscriptions = {}
    for slug, path, newest_only in (("analytics", "/all", False), ("dashboards", "/newest", True)):
        response = client_for(TeamFactory(slug=slug)).post(
            SUBSCRIPTIONS,
            {
                "namespace": "s3://lake",
                "name": "raw/orders",
                "endpoint_url": httpserver.url_for(path),
                "newest_only": newest_only,
            },
            format="json",
        )
        assert response.status_code == 201, response.json()
        assert response.json()["newest_only"] is newest_only
        subscriptions[path] = response.json()
    publisher = client_for(owner, scopes=["publish"])

    def publish(partition, **extra):
        body = {"namespace": "s3://lake", "name": "raw/orders", "partition": partition, **extra}
        response = publisher.post("/api/v1/readiness", body, format="json")
        assert response.status_code == 201, response.json()

    return publish, subscriptions


def deliver() -> None:
    sender = delivery.sender_from_settings()
    try:
        delivery.deliver_due(sender=sender)
    finally:
        sender.close()


def told(httpserver) -> dict[str, list[tuple[str, str, bool | None]]]:
    """Deliver what is due, then what each receiver got since the last call, in order:
    ``(type, partition, backfill)`` (backfill None: the type has none)."""
    deliver()
    got: dict[str, list] = {"/all": [], "/newest": []}
    for request, _ in httpserver.log:
        payload = json.loads(request.get_data())
        data = payload["data"]
        got[request.path].append((payload["type"], data["partition"], data.get("backfill")))
    httpserver.clear_log()
    for events in got.values():
        events.sort(key=lambda event: (event[1], event[0]))
    return got


def test_a_partition_older_than_the_newest_ready_one_is_told_as_a_backfill(world, httpserver):
    publish, _ = world

    publish("2026-11-28")
    assert told(httpserver) == {
        "/all": [("partition.ready", "2026-11-28", False)],
        "/newest": [("partition.ready", "2026-11-28", False)],
    }

    publish("2026-11-26")  # filled in after the 28th was ready
    assert told(httpserver) == {"/all": [("partition.ready", "2026-11-26", True)], "/newest": []}

    publish("2026-11-29")
    assert told(httpserver) == {
        "/all": [("partition.ready", "2026-11-29", False)],
        "/newest": [("partition.ready", "2026-11-29", False)],
    }


def test_restatements_of_old_periods_are_not_told_to_newest_only(world, httpserver):
    publish, _ = world
    publish("2026-11-27", version="v1")
    publish("2026-11-28", version="v1")
    told(httpserver)

    publish("2026-11-27", version="v2")  # an old period restated
    publish("2026-11-28", version="v2")  # the newest one restated
    assert told(httpserver) == {
        "/all": [
            ("partition.restated", "2026-11-27", None),
            ("partition.restated", "2026-11-28", None),
        ],
        "/newest": [("partition.restated", "2026-11-28", None)],
    }


def test_a_failed_partition_made_ready_later_is_a_backfill_too(world, httpserver):
    """A revision that changes state (failed, then ready) is told by the statement-by-
    statement path, which judges a backfill as the one-statement publish does."""
    publish, _ = world
    publish("2026-11-28")
    publish("2026-11-25", version="v1", state="failed")
    told(httpserver)

    publish("2026-11-25", version="v1")
    assert told(httpserver) == {"/all": [("partition.ready", "2026-11-25", True)], "/newest": []}


def test_only_a_started_newer_partition_makes_a_backfill(world, httpserver, settings):
    """A future partition (of a dataset that accepts them) is not the latest before its
    period starts, so today's data is not a backfill because tomorrow's forecast landed."""
    from catalog.models import Dataset

    Dataset.objects.update(accepts_future_partitions=True)
    publish, _ = world
    today = timezone.now().date()
    tomorrow = today.fromordinal(today.toordinal() + 1)
    publish(tomorrow.isoformat())
    told(httpserver)

    publish(today.isoformat())
    assert told(httpserver)["/newest"] == [("partition.ready", today.isoformat(), False)]


def test_newest_only_is_shown_and_changed_with_patch(world, client_for, httpserver):
    publish, subscriptions = world
    subscription = subscriptions["/all"]
    client = client_for(TeamFactory._meta.model.objects.get(slug="analytics"))
    url = f"{SUBSCRIPTIONS}/{subscription['id']}"

    response = client.patch(url, {"newest_only": True}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["newest_only"] is True
    assert response.json()["endpoint_url"] == subscription["endpoint_url"]  # left as it was
    [listed] = client.get(SUBSCRIPTIONS).json()["results"]
    assert listed["newest_only"] is True

    publish("2026-11-28")
    publish("2026-11-27")
    assert told(httpserver)["/all"] == [("partition.ready", "2026-11-28", False)]


def test_patch_refuses_an_unknown_field_and_another_teams_subscription(world, client_for):
    _, subscriptions = world
    url = f"{SUBSCRIPTIONS}/{subscriptions['/all']['id']}"
    analytics = client_for(TeamFactory._meta.model.objects.get(slug="analytics"))

    moved = analytics.patch(url, {"endpoint_url": "https://elsewhere.example.com/"}, format="json")
    assert moved.status_code == 400
    assert moved.json()["errors"] == [
        {
            "field": "endpoint_url",
            "rule": "unknown",
            "detail": "unknown field (got 'https://elsewhere.example.com/')",
            "value": "https://elsewhere.example.com/",
        }
    ]
    not_a_boolean = analytics.patch(url, {"newest_only": "perhaps"}, format="json")
    assert not_a_boolean.status_code == 400
    assert not_a_boolean.json()["errors"][0]["field"] == "newest_only"

    other = client_for(TeamFactory(slug="intruders")).patch(
        url, {"newest_only": True}, format="json"
    )
    assert other.status_code == 404
    assert other.json()["code"] == "subscription_not_found"


def test_catching_up_with_newest_only_skips_backfills_and_old_restatements(
    world, client_for, httpserver
):
    publish, _ = world
    since = timezone.now()
    publish("2026-11-28", version="v1")
    publish("2026-11-26", version="v1")  # a backfill
    publish("2026-11-26", version="v2")  # an old period restated
    publish("2026-11-28", version="v2")  # the newest restated
    assert Notification.objects.filter(type="partition.ready", payload__data__backfill=True).count()
    told(httpserver)
    httpserver.expect_request("/late-comer").respond_with_data("", status=204)

    response = client_for(TeamFactory(slug="late-comers")).post(
        SUBSCRIPTIONS,
        {
            "namespace": "s3://lake",
            "name": "raw/orders",
            "endpoint_url": httpserver.url_for("/late-comer"),
            "newest_only": True,
            "since": since.isoformat(),
        },
        format="json",
    )
    assert response.status_code == 201, response.json()

    deliver()
    got = sorted(
        (json.loads(r.get_data())["type"], json.loads(r.get_data())["data"]["partition"])
        for r, _ in httpserver.log
    )
    assert got == [("partition.ready", "2026-11-28"), ("partition.restated", "2026-11-28")]
