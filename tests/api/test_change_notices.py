from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import AuditEntry, ChangeNotice, Dataset, Notification
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(team):
    return DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")


@pytest.fixture
def consumers(dataset):
    return [
        SubscriptionFactory(dataset=dataset, team=TeamFactory(slug=slug)).team
        for slug in ("analytics", "finance")
    ]


def notices_url(dataset, *rest):
    return "/".join([f"/api/v1/datasets/{dataset.id}/change-notices", *map(str, rest)])


def in_days(days: float) -> str:
    return (timezone.now() + timedelta(days=days)).isoformat()


def announce(client, dataset, **fields):
    body = {
        "kind": "breaking_schema_change",
        "description": "customer_id becomes a string",
        "schema_diff": {"changed": {"customer_id": ["bigint", "varchar"]}},
        "effective_at": in_days(15),
        **fields,
    }
    return client.post(notices_url(dataset), body, format="json")


def test_a_notice_sooner_than_the_notice_period_is_a_problem_naming_the_earliest_date(
    client_for, team, dataset
):
    before = timezone.now()
    response = announce(client_for(team), dataset, effective_at=in_days(3))
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "notice_period_too_short"
    assert problem["rule"] == "change_notice_days" and problem["change_notice_days"] == 14
    earliest = problem["earliest_effective_at"]
    assert before + timedelta(days=14) <= _parse(earliest) <= timezone.now() + timedelta(days=14)
    assert problem["errors"][0]["field"] == "effective_at"
    assert earliest in problem["detail"]
    assert not ChangeNotice.objects.exists()


def _parse(value: str):
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_an_emergency_override_is_accepted_and_flagged_everywhere(
    client_for, team, dataset, consumers
):
    client = client_for(team)
    response = announce(
        client,
        dataset,
        kind="location_move",
        effective_at=in_days(1),
        emergency=True,
        override_reason="the bucket is being decommissioned by the provider",
        link="https://wiki.example.com/moves/42",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["emergency"], body["override_reason"]) == (
        True,
        "the bucket is being decommissioned by the provider",
    )
    assert body["pending_acknowledgements"] == ["analytics", "finance"]
    listed = client.get(notices_url(dataset)).json()["results"][0]
    assert listed["emergency"] is True
    detail = client.get(notices_url(dataset, body["id"])).json()
    assert detail["override_reason"] == body["override_reason"]
    audit = client.get(f"/api/v1/datasets/{dataset.id}/audit").json()["results"]
    assert audit[0]["action"] == "change_notice.emergency_override"
    assert all(
        n.payload["data"]["emergency"]
        for n in Notification.objects.filter(type="change_notice.announced")
    )


def test_only_the_owner_teams_manage_key_announces(client_for, team, dataset, consumers):
    response = announce(client_for(consumers[0]), dataset)
    assert (response.status_code, response.json()["code"]) == (403, "not_dataset_owner")
    response = announce(client_for(team, scopes=["read", "publish"]), dataset)
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
    assert not ChangeNotice.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "vibes_change"}, "kind"),
        ({"description": ""}, "description"),
        ({"link": "not a url"}, "link"),
        ({"effective_at": "next tuesday"}, "effective_at"),
        ({"emergency": True}, "override_reason"),
        ({"notice_days": 3}, "notice_days"),
    ],
)
def test_bad_notices_are_problems_naming_the_field(client_for, team, dataset, fields, field):
    response = announce(client_for(team), dataset, **fields)
    assert response.status_code == 400, response.json()
    assert field in [e["field"] for e in response.json()["errors"]]


def test_list_and_detail_show_who_has_and_has_not_acknowledged(
    client_for, team, dataset, consumers, django_assert_num_queries
):
    owner = client_for(team)
    ids = [announce(owner, dataset, description=f"change {i}").json()["id"] for i in range(3)]
    analytics = client_for(consumers[0])
    response = analytics.post(notices_url(dataset, ids[0], "acknowledgements"))
    assert response.status_code == 201
    ack = response.json()
    assert ack["team"] == "analytics" and ack["acknowledged_by"].startswith("key:")
    again = analytics.post(notices_url(dataset, ids[0], "acknowledgements"))
    assert again.status_code == 200 and again.json() == ack

    reader = client_for(TeamFactory(slug="auditors"), scopes=["read"])
    reader.get("/api/v1/me")  # the key row is cached from here
    with django_assert_num_queries(5):  # dataset, consumers, notices, acks, their teams
        results = reader.get(notices_url(dataset)).json()["results"]
    assert [r["id"] for r in results] == ids[::-1]
    first = results[-1]
    assert [a["team"] for a in first["acknowledgements"]] == ["analytics"]
    assert first["pending_acknowledgements"] == ["finance"]
    assert results[0]["pending_acknowledgements"] == ["analytics", "finance"]
    acks = reader.get(notices_url(dataset, ids[0], "acknowledgements")).json()["results"]
    assert [(a["team"], a["acknowledged_at"]) for a in acks] == [
        ("analytics", ack["acknowledged_at"])
    ]


def test_only_consumer_teams_acknowledge(client_for, team, dataset, consumers):
    notice_id = announce(client_for(team), dataset).json()["id"]
    for outsider in (team, TeamFactory(slug="strangers")):
        response = client_for(outsider).post(notices_url(dataset, notice_id, "acknowledgements"))
        assert (response.status_code, response.json()["code"]) == (403, "not_a_consumer")
    read_only = client_for(consumers[0], scopes=["read"])
    assert read_only.post(notices_url(dataset, notice_id, "acknowledgements")).status_code == 403


def test_a_notice_of_another_dataset_is_not_found(client_for, team, dataset):
    other = DatasetFactory(owner=team)
    notice_id = announce(client_for(team), other).json()["id"]
    response = client_for(team).get(notices_url(dataset, notice_id))
    assert (response.status_code, response.json()["code"]) == (404, "change_notice_not_found")


def test_apply_early_once_every_consumer_acknowledged(client_for, team, dataset, consumers):
    owner = client_for(team)
    notice = announce(owner, dataset, require_acknowledgements=True).json()
    apply_early = notices_url(dataset, notice["id"], "apply-early")

    client_for(consumers[0]).post(notices_url(dataset, notice["id"], "acknowledgements"))
    refused = owner.post(apply_early)
    assert refused.status_code == 409
    assert refused.json()["code"] == "acknowledgements_pending"
    assert refused.json()["pending_teams"] == ["finance"]
    assert client_for(consumers[1]).post(apply_early).json()["code"] == "not_dataset_owner"

    client_for(consumers[1]).post(notices_url(dataset, notice["id"], "acknowledgements"))
    response = owner.post(apply_early)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["state"], body["applied_early"], body["pending_acknowledgements"]) == (
        "effective",
        True,
        [],
    )
    assert Notification.objects.filter(type="change_notice.effective").count() == 1
    assert owner.post(apply_early).json()["code"] == "change_notice_in_effect"


def test_apply_early_of_a_notice_without_require_acknowledgements_is_refused(
    client_for, team, dataset
):
    owner = client_for(team)
    notice = announce(owner, dataset).json()
    response = owner.post(notices_url(dataset, notice["id"], "apply-early"))
    assert (response.status_code, response.json()["code"]) == (
        409,
        "acknowledgements_not_required",
    )


def test_deprecating_with_a_sunset_too_soon_is_a_problem(client_for, team, dataset):
    client = client_for(team)
    response = client.patch(
        f"/api/v1/datasets/{dataset.id}",
        {"lifecycle": "deprecated", "sunset_at": in_days(7), "override_reason": "urgent"},
        format="json",
    )
    assert response.status_code == 422
    assert response.json()["code"] == "sunset_too_soon"
    assert "earliest_sunset_at" in response.json()
    response = client.patch(
        f"/api/v1/datasets/{dataset.id}",
        {"lifecycle": "deprecated", "sunset_at": in_days(30)},
        format="json",
    )
    assert (response.status_code, response.json()["code"]) == (409, "lifecycle_notice_required")
    detail = response.json()["detail"]
    assert f"POST /api/v1/datasets/{dataset.id}/change-notices" in detail
    assert "or give an override_reason" in detail
    response = client.patch(
        f"/api/v1/datasets/{dataset.id}",
        {"lifecycle": "deprecated", "sunset_at": in_days(30), "override_reason": "urgent"},
        format="json",
    )
    assert response.status_code == 200 and response.json()["lifecycle"] == "deprecated"
    assert AuditEntry.objects.filter(action="dataset.lifecycle_override").exists()


def test_subscribing_to_a_deprecated_dataset_warns(client_for, dataset):
    Dataset.objects.filter(pk=dataset.pk).update(
        lifecycle="deprecated", sunset_at=timezone.now() + timedelta(days=30)
    )
    response = client_for(TeamFactory(slug="analytics")).post(
        "/api/v1/subscriptions", {"dataset_id": dataset.id}, format="json"
    )
    assert response.status_code == 201
    [warning] = response.json()["warnings"]
    assert warning["code"] == "dataset_deprecated" and warning["sunset_at"]


def test_subscribing_to_an_active_dataset_has_an_empty_warnings_list(client_for, dataset):
    response = client_for(TeamFactory(slug="analytics")).post(
        "/api/v1/subscriptions", {"dataset_id": dataset.id}, format="json"
    )
    assert response.json()["warnings"] == []
