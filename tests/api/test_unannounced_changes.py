"""GET /api/v1/reports/unannounced-changes, and schemas sent with POST /api/v1/readiness."""

from __future__ import annotations

import pytest

from catalog.models import SchemaObservation
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/reports/unannounced-changes"
V1 = [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "numeric"}]
DROPPED = [{"name": "id", "type": "bigint"}]


def publish(client, dataset, fields, partition: str):
    return client.post(
        "/api/v1/readiness",
        {
            "namespace": dataset.namespace,
            "name": dataset.name,
            "partition": partition,
            "metadata": {"schema": {"fields": fields}},
        },
        format="json",
    )


@pytest.fixture
def shop(db):
    return TeamFactory(slug="shop")


@pytest.fixture
def orders(shop):
    return DatasetFactory(owner=shop, namespace="s3://lake", name="sales/orders")


def test_the_owner_and_governance_see_a_dropped_column_and_others_do_not(
    client_for, shop, orders, django_assert_max_num_queries
):
    producer = client_for(shop, scopes=["publish", "read"])
    assert publish(producer, orders, V1, "2026-11-27").status_code == 201
    assert publish(producer, orders, DROPPED, "2026-11-28").status_code == 201

    with django_assert_max_num_queries(3):  # the key, the page, last_used_at
        response = producer.get(URL)
    assert response.status_code == 200, response.json()
    [row] = response.json()["results"]
    assert row["dataset"] == {
        "id": orders.pk,
        "namespace": "s3://lake",
        "name": "sales/orders",
        "owner": "shop",
    }
    assert row["removed"] == ["amount"] and row["retyped"] == [] and row["added"] == []
    assert row["source"] == "readiness" and row["job"] is None and row["run_id"] is None
    assert (
        row["readiness_event_id"]
        == SchemaObservation.objects.get(fields=DROPPED).readiness_event_id
    )
    assert row["previous_observed_at"] < row["observed_at"]

    other = TeamFactory(slug="other")
    assert client_for(other, scopes=["read"]).get(URL).json()["results"] == []
    governance = client_for(other, scopes=["governance"])
    assert len(governance.get(URL).json()["results"]) == 1
    assert len(governance.get(URL, {"team": "shop"}).json()["results"]) == 1
    assert governance.get(URL, {"team": "other"}).json()["results"] == []


def test_another_teams_rows_need_the_governance_scope(client_for, shop):
    response = client_for(TeamFactory(slug="other"), scopes=["read"]).get(URL, {"team": "shop"})
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"


@pytest.mark.parametrize(
    ("params", "field"), [({"page_size": "0"}, "page_size"), ({"bogus": "1"}, "bogus")]
)
def test_bad_filters_are_problems_naming_the_field(client_for, shop, params, field):
    response = client_for(shop, scopes=["read"]).get(URL, params)
    assert response.status_code == 400
    assert field in [e["field"] for e in response.json()["errors"]]


def test_a_malformed_published_schema_is_a_problem_naming_the_field(client_for, shop, orders):
    response = publish(
        client_for(shop, scopes=["publish"]), orders, [{"name": "id", "type": 1}], "2026-11-28"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "schema_invalid"
    assert body["errors"][0]["field"] == "metadata.schema.fields.0.type"


@pytest.mark.parametrize(
    ("fields", "field", "rule", "detail"),
    [
        (
            [{"name": "a"}, {"name": "a"}],
            "metadata.schema.fields.1.name",
            "unique",
            "duplicate column name 'a'",
        ),
        (
            [{"name": "id", "type": "x" * 100_000}],
            "metadata.schema.fields.0.type",
            "max_length",
            "at most 1024 characters",
        ),
    ],
)
def test_a_published_schema_with_duplicate_or_oversized_members_is_refused(
    client_for, shop, orders, fields, field, rule, detail
):
    response = publish(client_for(shop, scopes=["publish"]), orders, fields, "2026-11-28")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "schema_invalid"
    assert [(e["field"], e["rule"]) for e in body["errors"]] == [(field, rule)]
    assert detail in body["errors"][0]["detail"]
    assert not SchemaObservation.objects.exists()


def test_a_datasets_schema_timeline_is_listed_newest_first(
    client_for, shop, orders, django_assert_max_num_queries
):
    producer = client_for(shop, scopes=["publish", "read"])
    publish(producer, orders, V1, "2026-11-27")
    publish(producer, orders, DROPPED, "2026-11-28")
    reader = client_for(TeamFactory(slug="reader"), scopes=["read"])
    url = f"/api/v1/datasets/{orders.pk}/schema-observations"
    with django_assert_max_num_queries(4):  # the key, the dataset, the page, last_used_at
        response = reader.get(url)
    assert response.status_code == 200, response.json()
    rows = response.json()["results"]
    assert [row["fields"] for row in rows] == [
        [{"name": "id", "type": "bigint"}],
        [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "numeric"}],
    ]
    assert rows[0]["source"] == "readiness" and rows[0]["team"] == "shop"
    assert rows[0]["job"] is None and rows[0]["readiness_event_id"] is not None
    assert reader.get("/api/v1/datasets/999999/schema-observations").status_code == 404
    bad = reader.get(url, {"page_size": "x"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "page_size"
