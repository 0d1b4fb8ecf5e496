import pytest

from catalog.models import Endpoint, Subscription
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/subscriptions"


@pytest.fixture
def dataset():
    return DatasetFactory(
        owner=TeamFactory(slug="producers"), namespace="s3://lake", name="raw/orders"
    )


def test_subscribe_by_identity_with_job_and_endpoint(client_for, team, dataset):
    response = client_for(team).post(
        URL,
        {
            "namespace": "S3://lake",
            "name": "raw/orders",
            "job_namespace": "airflow",
            "job_name": "rollup",
            "endpoint_url": "https://hooks.example.com/t",
            "event_types": ["partition.ready", "partition.restated"],
            "partition_pattern": "2026-*",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["dataset"] == {"id": dataset.id, "namespace": "s3://lake", "name": "raw/orders"}
    assert body["endpoint_url"] == "https://hooks.example.com/t"
    assert body["event_types"] == ["partition.ready", "partition.restated"]
    assert Endpoint.objects.filter(team=team, url="https://hooks.example.com/t").count() == 1


def test_subscribing_again_gives_an_endpoint_to_one_without_rather_than_duplicating(
    client_for, team, dataset
):
    client = client_for(team)
    client.post(URL, {"dataset_id": dataset.id}, format="json")  # declared, no endpoint
    response = client.post(
        URL, {"dataset_id": dataset.id, "endpoint_url": "https://h.example.com/x"}, format="json"
    )
    assert response.status_code == 200
    assert Subscription.objects.get().endpoint.url == "https://h.example.com/x"


def test_declaring_again_with_the_same_url_is_idempotent_and_may_change_filters(
    client_for, team, dataset
):
    client = client_for(team)
    body = {"dataset_id": dataset.id, "endpoint_url": "https://h.example.com/x"}
    first = client.post(URL, body, format="json")
    assert first.status_code == 201 and "endpoint_secret" in first.json()
    again = client.post(URL, {**body, "event_types": ["dataset.late"]}, format="json")
    assert again.status_code == 200, again.json()
    assert again.json()["id"] == first.json()["id"]
    assert "endpoint_secret" not in again.json()  # the endpoint is not new
    assert again.json()["event_types"] == ["dataset.late"]
    omitted = client.post(URL, {"dataset_id": dataset.id}, format="json")  # keeps the endpoint
    assert omitted.status_code == 200 and omitted.json()["endpoint_url"] == body["endpoint_url"]


def test_declaring_again_with_another_url_is_a_409_naming_the_existing_subscription(
    client_for, team, dataset
):
    client = client_for(team)
    first = client.post(
        URL,
        {"dataset_id": dataset.id, "endpoint_url": "https://old.example.com/hook"},
        format="json",
    ).json()
    response = client.post(
        URL,
        {
            "namespace": "s3://lake",
            "name": "raw/orders",
            "endpoint_url": "https://new.example.com/hook",
            "event_types": ["dataset.late"],
        },
        format="json",
    )
    assert response.status_code == 409, response.json()
    problem = response.json()
    assert problem["code"] == "subscription_exists"
    assert problem["existing"] == {
        "id": first["id"],
        "endpoint_url": "https://old.example.com/hook",
        "endpoints_path": f"/api/v1/subscriptions/{first['id']}/endpoints",
    }
    assert f"POST /api/v1/subscriptions/{first['id']}/endpoints" in problem["detail"]
    assert [(e["field"], e["rule"]) for e in problem["errors"]] == [("endpoint_url", "exists")]
    # Nothing moved, nothing was created: not the subscription, its filters nor an endpoint.
    subscription = Subscription.objects.get()
    assert subscription.endpoint.url == "https://old.example.com/hook"
    assert subscription.event_types == []
    assert not Endpoint.objects.filter(url="https://new.example.com/hook").exists()
    # The way to change it: delete, then declare again.
    assert client.delete(f"{URL}/{first['id']}").status_code == 204
    moved = client.post(
        URL,
        {"dataset_id": dataset.id, "endpoint_url": "https://new.example.com/hook"},
        format="json",
    )
    assert moved.status_code == 201 and moved.json()["endpoint_url"].startswith("https://new.")


def test_another_job_of_the_team_is_another_subscription_with_its_own_url(
    client_for, team, dataset
):
    client = client_for(team)
    client.post(
        URL, {"dataset_id": dataset.id, "endpoint_url": "https://a.example.com/h"}, format="json"
    )
    response = client.post(
        URL,
        {
            "dataset_id": dataset.id,
            "job_namespace": "airflow",
            "job_name": "rollup",
            "endpoint_url": "https://b.example.com/h",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert sorted(Subscription.objects.values_list("endpoint__url", flat=True)) == [
        "https://a.example.com/h",
        "https://b.example.com/h",
    ]


def test_list_shows_only_own_subscriptions(client_for, team, dataset, django_assert_num_queries):
    SubscriptionFactory(team=team, dataset=dataset)
    SubscriptionFactory(team=TeamFactory(slug="others"), dataset=dataset)
    client = client_for(team, scopes=["read"])
    client.get("/api/v1/me")  # the key row is cached from here
    # The subscriptions, and all their other endpoints in one more query.
    with django_assert_num_queries(2):
        results = client.get(URL).json()["results"]
    assert [r["team"] for r in results] == ["orders"]


def test_delete_own_subscription_but_not_anothers(client_for, team, dataset):
    mine = SubscriptionFactory(team=team, dataset=dataset)
    theirs = SubscriptionFactory(team=TeamFactory(slug="others"), dataset=dataset)
    client = client_for(team)
    response = client.delete(f"{URL}/{theirs.id}")
    assert response.status_code == 404
    assert response.json()["code"] == "subscription_not_found"
    assert client.delete(f"{URL}/{mine.id}").status_code == 204
    assert list(Subscription.objects.values_list("id", flat=True)) == [theirs.id]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "dataset_id"),
        ({"dataset_id": 1, "endpoint_url": "not a url"}, "endpoint_url"),
        ({"dataset_id": 1, "event_types": ["partition.exploded"]}, "event_types.0"),
        ({"dataset_id": 1, "job_name": "only-name"}, "job_namespace"),
    ],
)
def test_subscribe_rejects_bad_input(client_for, team, dataset, payload, field):
    response = client_for(team).post(URL, payload, format="json")
    assert response.status_code == 400, response.json()
    assert field in [e["field"] for e in response.json()["errors"]]
    assert not Subscription.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "https://169.254.169.254/latest/meta-data",
        "http://127.0.0.1:8001/hook",
        "https://[::1]/hook",
        "https://10.0.0.7/hook",
        "https://[fd00::1]/hook",
        "https://100.64.0.1/hook",
        "https://[::ffff:192.168.0.1]/hook",
    ],
)
def test_subscribe_refuses_a_webhook_at_a_blocked_ip_address(
    client_for, team, dataset, url, settings
):
    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = []
    response = client_for(team).post(
        URL, {"dataset_id": dataset.id, "endpoint_url": url}, format="json"
    )
    assert response.status_code == 400, response.json()
    body = response.json()
    assert [(e["field"], e["rule"]) for e in body["errors"]] == [("endpoint_url", "public_address")]
    assert "not a public address" in body["detail"]
    assert not Subscription.objects.exists() and not Endpoint.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "https://8.8.8.8/hook",  # public
        "https://localhost.example.com/hook",  # a name: judged at connect time, not here
        "http://127.0.0.1:8001/hook",  # in the allow-list (embedded mode's demo receiver)
    ],
)
def test_subscribe_accepts_public_names_and_allowed_networks(
    client_for, team, dataset, url, settings
):
    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8"]
    response = client_for(team).post(
        URL, {"dataset_id": dataset.id, "endpoint_url": url}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert Endpoint.objects.get().url == url


def test_subscribe_to_unknown_dataset_is_404(client_for, team):
    response = client_for(team).post(URL, {"namespace": "s3://lake", "name": "none"}, format="json")
    assert response.status_code == 404


def test_new_webhook_endpoint_secret_is_shown_once(client_for, team, dataset):
    client = client_for(team)
    first = client.post(
        URL, {"dataset_id": dataset.id, "endpoint_url": "https://h.example.com/a"}, format="json"
    )
    assert first.json()["endpoint_secret"].startswith("whsec_")
    again = client.post(
        URL, {"dataset_id": dataset.id, "endpoint_url": "https://h.example.com/a"}, format="json"
    )
    assert "endpoint_secret" not in again.json()
    assert all("endpoint_secret" not in s for s in client.get(URL).json()["results"])


def test_since_delivers_recent_history_once(client_for, team, dataset):
    from datetime import timedelta

    from django.utils import timezone

    from catalog.actors import Actor
    from catalog.models import Delivery
    from catalog.services.publishing import readiness_publish

    for day in ("2026-11-26", "2026-11-27"):
        readiness_publish(
            actor=Actor(team=dataset.owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=day,
            now=timezone.now(),
        )
    client = client_for(team)
    body = {
        "dataset_id": dataset.id,
        "endpoint_url": "https://h.example.com/catch-up",
        "since": (timezone.now() - timedelta(hours=1)).isoformat(),
        "partition_pattern": "*-27",
    }
    assert client.post(URL, body, format="json").status_code == 201
    assert client.post(URL, body, format="json").status_code == 200  # again: nothing twice
    sent = Delivery.objects.filter(endpoint__url="https://h.example.com/catch-up")
    assert [d.notification.payload["data"]["partition"] for d in sent] == ["2026-11-27"]
    too_old = {**body, "since": (timezone.now() - timedelta(days=31)).isoformat()}
    assert client.post(URL, too_old, format="json").json()["errors"][0]["field"] == "since"


def test_since_never_delivers_the_watchdogs_notifications(client_for, team, dataset):
    from django.utils import timezone

    from catalog import notices
    from catalog.models import Delivery, Notification

    now = timezone.now()
    for kind in (Notification.Type.WATCHDOG_MONITOR, Notification.Type.WATCHDOG_PING):
        notices.notification_write(
            type=kind,
            dataset=dataset,
            dedup_key=f"{kind}:1",
            data={"external_id": "x", "monitor": {"ping_key": "secret"}},
            now=now,
        )
    body = {
        "dataset_id": dataset.id,
        "endpoint_url": "https://h.example.com/catch-up",
        "since": now.isoformat(),
    }
    assert client_for(team).post(URL, body, format="json").status_code == 201
    assert not Delivery.objects.exists()


def test_without_since_a_subscription_gets_no_history(client_for, team, dataset):
    from django.utils import timezone

    from catalog.actors import Actor
    from catalog.models import Delivery
    from catalog.services.publishing import readiness_publish

    readiness_publish(
        actor=Actor(team=dataset.owner),
        namespace="s3://lake",
        name="raw/orders",
        partition="2026-11-26",
        now=timezone.now(),
    )
    client_for(team).post(
        URL, {"dataset_id": dataset.id, "endpoint_url": "https://h.example.com/x"}, format="json"
    )
    assert not Delivery.objects.exists()


def test_a_subscription_cannot_name_a_job_of_another_teams_claimed_namespace(
    client_for, team, dataset
):
    from catalog.models import Claim

    other = TeamFactory(slug="orders-platform")
    Claim.objects.create(team=other, kind=Claim.Kind.JOB_NAMESPACE, pattern="airflow://orders")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern="airflow://ours")
    body = {"namespace": "s3://lake", "name": "raw/orders", "job_name": "daily.build"}
    refused = client_for(team).post(
        URL, {**body, "job_namespace": "airflow://orders"}, format="json"
    )
    assert refused.status_code == 403, refused.json()
    problem = refused.json()
    assert problem["code"] == "job_namespace_of_another_team"
    assert [e["field"] for e in problem["errors"]] == ["job_namespace"]
    assert not Subscription.objects.filter(team=team).exists()
    for namespace in ("airflow://ours", "airflow://unclaimed"):
        ok = client_for(team).post(URL, {**body, "job_namespace": namespace}, format="json")
        assert ok.status_code == 201, ok.json()


@pytest.mark.parametrize(
    "kind", ["watchdog.ping", "endpoint.disabled", "schema.unannounced_change"]
)
def test_a_type_never_sent_to_subscribers_is_refused_naming_it_and_the_ones_that_are(
    client_for, team, dataset, kind
):
    from catalog.event_types import EVENT_TYPES, subscriber_event_type_names

    client = client_for(team)
    created = client.post(
        URL,
        {"dataset_id": dataset.id, "event_types": ["partition.ready", kind]},
        format="json",
    )
    assert created.status_code == 400, created.json()
    [error] = created.json()["errors"]
    assert (error["field"], error["rule"]) == ("event_types.1", "invalid_choice")
    assert kind in error["detail"] and "partition.ready" in error["detail"]
    assert not Subscription.objects.exists()

    subscription = SubscriptionFactory(team=team, dataset=dataset)
    changed = client.patch(f"{URL}/{subscription.pk}", {"event_types": [kind]}, format="json")
    assert changed.status_code == 400 and changed.json()["errors"][0]["field"] == "event_types.0"
    subscription.refresh_from_db()
    assert subscription.event_types == []
    # The rule is the event catalog's: exactly the types whose audience is subscribers.
    sent = {e.name for e in EVENT_TYPES if "subscribers" in e.audience}
    assert set(subscriber_event_type_names()) == sent and kind not in sent


def test_the_service_refuses_a_type_never_sent_to_subscribers(team, dataset):
    from catalog.actors import Actor
    from catalog.services.subscriptions import subscription_create
    from problems import ValidationProblem

    with pytest.raises(ValidationProblem) as refused:
        subscription_create(actor=Actor(team=team), dataset=dataset, event_types=["watchdog.ping"])
    assert refused.value.errors[0].field == "event_types.0"


@pytest.mark.parametrize(
    ("since", "rule", "named"),
    [
        ("3000-01-01T00:00:00Z", "not_in_future", "3000-01-01T00:00:00Z"),
        ("2020-01-01T00:00:00Z", "max_age", "2020-01-01T00:00:00Z"),
        ("yesterday", "invalid", "'yesterday'"),
    ],
)
def test_a_since_out_of_range_or_not_a_date_is_refused_naming_the_value(
    client_for, team, dataset, since, rule, named
):
    client = client_for(team)
    response = client.post(
        URL,
        {"dataset_id": dataset.id, "endpoint_url": "https://h.example.com/x", "since": since},
        format="json",
    )
    assert response.status_code == 400, response.json()
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == ("since", rule)
    assert named in error["detail"]
    assert not Subscription.objects.exists()  # nothing half-written
