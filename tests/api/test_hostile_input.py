"""Input that once reached the database or the renderer: each is a 4xx problem now."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import ApiKey, Endpoint, Partition, Subscription
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(team):
    return DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")


def raw_publish(client, text):
    return client.post("/api/v1/readiness", data=text, content_type="application/json")


BASE = '{"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28", '


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (BASE + '"metadata": {"note": "\\ud800"}}', "metadata.note"),
        (BASE + '"metadata": {"a": "x\\u0000y"}}', "metadata.a"),
        (BASE + '"metadata": {"k\\u0000": 1}}', "metadata.k\x00"),
        (BASE + '"metadata": {"a": ' + "[" * 70 + "]" * 70 + "}}", "metadata.a" + ".0" * 63),
    ],
)
def test_strings_and_nesting_the_database_cannot_store_are_400(
    client_for, team, dataset, text, field
):
    response = raw_publish(client_for(team), text)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field
    assert not Partition.objects.exists()


@pytest.mark.parametrize(
    "text",
    [
        BASE + '"metadata": {"a": 1e400}}',
        BASE + '"metadata": {"a": NaN}}',
        BASE + '"metadata": {"a": -Infinity}}',
        BASE + '"metadata": ' + "[" * 5000 + "]" * 5000 + "}",
    ],
)
def test_non_finite_numbers_and_runaway_nesting_are_malformed(client_for, team, dataset, text):
    response = raw_publish(client_for(team), text)
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_request"
    assert not Partition.objects.exists()


@pytest.mark.parametrize(
    "key", ["9999-12-31", "\uff12\uff10\uff12\uff16-11-28", "\u0662\u0660\u0662\u0666-11-28"]
)
def test_edge_and_non_ascii_partition_keys_are_400(client_for, team, dataset, key):
    response = raw_publish(
        client_for(team),
        json.dumps({"namespace": "s3://lake", "name": "raw/orders", "partition": key}),
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_partition_key"


@pytest.mark.parametrize("url", ["/api/v1/keys", "/api/v1/datasets", "/api/v1/subscriptions"])
@pytest.mark.parametrize("cursor", ["garbage", "cD1hYmM="])
def test_crafted_cursor_is_400_naming_cursor(client_for, team, url, cursor):
    response = client_for(team).get(url, {"cursor": cursor})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "cursor"


def test_head_needs_the_get_scope(client_for, team, dataset):
    client = client_for(team, scopes=["publish"])
    assert client.head("/api/v1/datasets").status_code == 403
    assert client.head(f"/api/v1/datasets/{dataset.id}").status_code == 403


def test_key_minted_by_expiring_key_expires_with_it(client_for, team):
    soon = timezone.now() + timedelta(minutes=5)
    client = client_for(team, scopes=["manage", "read"], expires_at=soon)
    response = client.post("/api/v1/keys", {"name": "child", "scopes": ["read"]}, format="json")
    assert response.status_code == 201
    assert ApiKey.objects.get(name="child").expires_at == soon


def test_partitioning_cannot_change_once_partitions_exist(client_for, team, dataset):
    client = client_for(team)
    client.post(
        "/api/v1/readiness",
        {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"},
        format="json",
    )
    response = client.patch(
        f"/api/v1/datasets/{dataset.id}", {"partitioning": "hourly"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["errors"][0]["field"] == "partitioning"
    dataset.refresh_from_db()
    assert dataset.partitioning == "daily"


def test_chunked_body_without_length_is_411(client_for, team, dataset):
    response = client_for(team).generic(
        "POST",
        "/api/v1/readiness",
        b"",
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    assert response.status_code == 411
    assert response["Content-Type"] == "application/problem+json"


@pytest.mark.parametrize("name", ["zw\u200bsp", "rtl\u202eoverride", "\ufeffbom", "c1\x90"])
def test_invisible_characters_in_names_are_refused(client_for, team, name):
    response = client_for(team).post(
        "/api/v1/datasets", {"namespace": "s3://lake", "name": name}, format="json"
    )
    assert response.status_code == 400
    # The detail names the value with its invisible character escaped (repr), never raw.
    assert response.json()["errors"][0] == {
        "field": "name",
        "rule": "whitespace",
        "detail": "name must not contain whitespace, control or invisible characters "
        f"(got {name!r})",
        "value": name,
    }
    assert name not in response.json()["detail"]


def test_dataset_filter_normalises_identity_like_publish(client_for, team):
    DatasetFactory(owner=team, namespace="postgres://wh:5432", name="fin.public.revenue")
    results = (
        client_for(team)
        .get(
            "/api/v1/datasets", {"namespace": "postgresql://WH:5432", "name": "FIN.public.revenue"}
        )
        .json()["results"]
    )
    assert [d["name"] for d in results] == ["fin.public.revenue"]


@pytest.mark.parametrize(
    "url", ["http://hooks.example.com/x", "https://user:pw@hooks.example.com/x", "ftp://x.example/"]
)
def test_subscription_endpoint_must_be_https_without_credentials(
    client_for, team, dataset, url, settings
):
    settings.TIDEMARK_OUTBOUND_ALLOW_HTTP = False  # as in production
    response = client_for(team).post(
        "/api/v1/subscriptions", {"dataset_id": dataset.id, "endpoint_url": url}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "endpoint_url"
    assert not Endpoint.objects.exists()


def test_subscription_by_id_and_identity_at_once_is_400(client_for, team, dataset):
    other = DatasetFactory(owner=team, namespace="s3://lake", name="raw/other")
    response = client_for(team).post(
        "/api/v1/subscriptions",
        {"dataset_id": dataset.id, "namespace": other.namespace, "name": other.name},
        format="json",
    )
    assert response.status_code == 400
    assert not Subscription.objects.exists()


def test_redeclaring_without_endpoint_keeps_the_webhook(client_for, team, dataset):
    sub = SubscriptionFactory(team=team, dataset=dataset)
    response = client_for(team).post(
        "/api/v1/subscriptions", {"dataset_id": dataset.id}, format="json"
    )
    assert response.status_code == 200
    sub.refresh_from_db()
    assert sub.endpoint is not None
    assert TeamFactory._meta.model.objects.count() == 1


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/v1/datasets/99999999999999999999", 404),
        ("/api/v1/deliveries/9223372036854775808", 404),
        ("/api/v1/deliveries?endpoint_id=99999999999999999999", 400),
        ("/api/v1/deliveries?endpoint_id=-5", 400),
    ],
)
def test_ids_beyond_bigint_are_not_a_500(client_for, team, path, status):
    assert client_for(team).get(path).status_code == status
