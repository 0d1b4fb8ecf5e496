from __future__ import annotations

import pytest

from catalog.models import ApiKey, Notification, Restatement
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

KEYS = [f"2026-11-{day:02d}" for day in range(20, 27)]


@pytest.fixture
def dataset(team):
    return DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")


@pytest.fixture
def owner(client_for, team, dataset):
    client = client_for(team)
    for key in KEYS:
        response = publish(client, dataset, key, version="v1", code_version="abc1")
        assert response.status_code == 201
    return client


def publish(client, dataset, key, **fields):
    body = {"namespace": dataset.namespace, "name": dataset.name, "partition": key, **fields}
    return client.post("/api/v1/readiness", body, format="json")


def restatements_url(dataset, *rest):
    return "/".join([f"/api/v1/datasets/{dataset.id}/restatements", *map(str, rest)])


def open_restatement(client, dataset, **fields):
    body = {
        "version": "v2",
        "first_partition": KEYS[0],
        "last_partition": KEYS[-1],
        "code_version": "def2",
        **fields,
    }
    return client.post(restatements_url(dataset), body, format="json")


def versions(client, dataset):
    response = client.get(f"/api/v1/datasets/{dataset.id}/partitions?page_size=50")
    return {p["key"]: p["current_revision"]["version"] for p in response.json()["results"]}


def test_open_stage_promote_walkthrough(owner, dataset):
    SubscriptionFactory(dataset=dataset, team=TeamFactory(slug="analytics"))
    response = open_restatement(owner, dataset, reason="currency rounding fix")
    assert response.status_code == 201
    opened = response.json()
    assert opened["state"] == "staged" and opened["partitions_total"] == 7
    assert opened["partitions_ready"] == 0
    assert [p["state"] for p in opened["partitions"]] == ["missing"] * 7
    rid = opened["id"]

    for key in KEYS[:6]:
        staged = publish(owner, dataset, key, restatement=rid, code_version="def2")
        assert staged.status_code == 201
        assert staged.json()["current_version"] == "v1" and staged.json()["restatement"] == rid
    assert set(versions(owner, dataset).values()) == {"v1"}
    latest = owner.get(f"/api/v1/datasets/{dataset.id}/partitions/latest").json()
    assert latest["current_revision"]["version"] == "v1"

    refused = owner.post(restatements_url(dataset, rid, "promote"))
    assert refused.status_code == 409
    assert refused["Content-Type"] == "application/problem+json"
    problem = refused.json()
    assert problem["code"] == "restatement_incomplete"
    assert problem["missing_partitions"] == [KEYS[6]] and KEYS[6] in problem["detail"]

    publish(owner, dataset, KEYS[6], restatement=rid, code_version="def2")
    detail = owner.get(restatements_url(dataset, rid)).json()
    assert detail["partitions_ready"] == 7

    promoted = owner.post(restatements_url(dataset, rid, "promote"))
    assert promoted.status_code == 200
    body = promoted.json()
    assert body["state"] == "promoted" and body["closed_by"].startswith("key:")
    assert all(p["current"] for p in body["partitions"])
    assert set(versions(owner, dataset).values()) == {"v2"}
    partition = owner.get(f"/api/v1/datasets/{dataset.id}/partitions?page_size=1").json()
    assert partition["results"][0]["current_revision"]["code_version"] == "def2"
    assert Notification.objects.filter(type="dataset.version_promoted").count() == 1


def test_publish_into_a_closed_restatement_names_the_rule(owner, dataset):
    rid = open_restatement(owner, dataset).json()["id"]
    assert owner.post(restatements_url(dataset, rid, "abandon")).status_code == 200
    response = publish(owner, dataset, KEYS[0], restatement=rid)
    assert response.status_code == 409
    problem = response.json()
    assert problem["code"] == "restatement_closed"
    assert problem["rule"] == "restatement_staged" and problem["state"] == "abandoned"
    assert set(versions(owner, dataset).values()) == {"v1"}
    again = owner.post(restatements_url(dataset, rid, "promote"))
    assert again.status_code == 409 and again.json()["code"] == "restatement_closed"


def test_publish_outside_the_range_names_the_rule(owner, dataset):
    rid = open_restatement(owner, dataset, last_partition=KEYS[2]).json()["id"]
    response = publish(owner, dataset, KEYS[5], restatement=rid)
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "partition_outside_restatement"
    assert problem["rule"] == "partition_in_range"
    assert problem["errors"][0]["field"] == "partition"


def test_opening_needs_the_owner_and_manage(owner, client_for, dataset, team):
    other = client_for(TeamFactory(slug="other"))
    assert open_restatement(other, dataset).status_code == 403
    publisher = client_for(team, scopes=[ApiKey.Scope.PUBLISH])
    assert open_restatement(publisher, dataset).status_code == 403
    assert not Restatement.objects.exists()


def test_unknown_partitions_in_the_range_are_named(owner, dataset):
    response = open_restatement(owner, dataset, last_partition="2026-11-28")
    assert response.status_code == 422
    assert response.json()["unknown_partitions"] == ["2026-11-27", "2026-11-28"]


def test_list_is_read_scope_and_query_count_is_flat(
    owner, client_for, dataset, team, django_assert_num_queries
):
    for version in ("v2", "v3", "v4"):
        open_restatement(owner, dataset, version=version)
    reader = client_for(TeamFactory(slug="analytics"), scopes=[ApiKey.Scope.READ])
    reader.get(restatements_url(dataset))  # warm the key cache
    with django_assert_num_queries(3):
        response = reader.get(restatements_url(dataset))
    assert response.status_code == 200
    assert [r["version"] for r in response.json()["results"]] == ["v4", "v3", "v2"]


def test_unknown_restatement_is_404(owner, dataset):
    response = owner.get(restatements_url(dataset, 999))
    assert response.status_code == 404 and response.json()["code"] == "restatement_not_found"
