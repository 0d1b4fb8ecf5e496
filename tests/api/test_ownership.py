"""Dataset prefix claims and ownership transfers over the API."""

from __future__ import annotations

import pytest

from catalog.models import AuditEntry, Claim, Dataset
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

CLAIMS = "/api/v1/claims"


def claim_prefix(client, pattern):
    return client.post(CLAIMS, {"kind": "dataset_prefix", "pattern": pattern}, format="json")


@pytest.fixture
def sales(client_for):
    return client_for(TeamFactory(slug="sales"), scopes=["manage", "read", "publish"])


@pytest.fixture
def ops(client_for):
    return client_for(TeamFactory(slug="ops"), scopes=["manage", "read", "publish"])


def test_a_claimed_prefix_refuses_other_teams_registrations_naming_the_owner(sales, ops):
    response = claim_prefix(sales, "S3://Lake/sales/")
    assert response.status_code == 201, response.json()
    assert (response.json()["kind"], response.json()["pattern"]) == (
        "dataset_prefix",
        "s3://lake/sales/",
    )
    assert AuditEntry.objects.filter(action="claim.created").count() == 1

    refused = ops.post(
        "/api/v1/datasets", {"namespace": "s3://lake", "name": "sales/orders"}, format="json"
    )
    assert refused.status_code == 409, refused.json()
    body = refused.json()
    assert (body["code"], body["owner"], body["prefix"]) == (
        "prefix_claimed",
        "sales",
        "s3://lake/sales/",
    )
    assert "sales" in body["detail"]
    assert not Dataset.objects.exists()
    ours = sales.post(
        "/api/v1/datasets", {"namespace": "s3://lake", "name": "sales/orders"}, format="json"
    )
    assert ours.status_code == 201, ours.json()


def test_overlapping_prefix_claims_of_two_teams_are_409_naming_the_other(sales, ops):
    assert claim_prefix(sales, "s3://lake/sales/").status_code == 201
    for pattern in ("s3://lake/", "s3://lake/sales/eu/", "s3://lake/sales/"):
        response = claim_prefix(ops, pattern)
        assert response.status_code == 409, pattern
        assert (response.json()["code"], response.json()["owner"]) == ("claim_taken", "sales")
    assert claim_prefix(ops, "s3://lake/sales_archive/").status_code == 201


def test_a_prefix_over_other_teams_datasets_is_409_until_they_are_transferred(
    client_for, sales, ops
):
    dataset = DatasetFactory(
        namespace="s3://lake", name="sales/orders", owner=TeamFactory(slug="ops")
    )
    refused = claim_prefix(sales, "s3://lake/sales/")
    assert refused.status_code == 409
    body = refused.json()
    assert body["code"] == "claim_over_datasets"
    assert body["datasets"] == [
        {"id": dataset.pk, "namespace": "s3://lake", "name": "sales/orders", "owner": "ops"}
    ]
    assert body["more"] is False
    assert "ops" in body["detail"]

    proposed = ops.post(
        f"/api/v1/datasets/{dataset.pk}/transfers", {"to_team": "sales"}, format="json"
    )
    assert proposed.status_code == 201, proposed.json()
    transfer = proposed.json()
    assert {k: transfer[k] for k in ("dataset", "from_team", "to_team", "state")} == {
        "dataset": dataset.pk,
        "from_team": "ops",
        "to_team": "sales",
        "state": "proposed",
    }
    assert claim_prefix(sales, "s3://lake/sales/").status_code == 409  # not yet accepted
    url = f"/api/v1/datasets/{dataset.pk}/transfers/{transfer['id']}"
    assert ops.post(f"{url}/accept").json()["code"] == "not_dataset_owner"
    accepted = sales.post(f"{url}/accept")
    assert accepted.status_code == 200, accepted.json()
    assert accepted.json()["state"] == "accepted"
    assert sales.get(f"/api/v1/datasets/{dataset.pk}").json()["owner"] == "sales"
    assert claim_prefix(sales, "s3://lake/sales/").status_code == 201

    audit = sales.get(f"/api/v1/datasets/{dataset.pk}/audit").json()["results"]
    assert [a["action"] for a in audit][:2] == [
        "dataset.transfer_accepted",
        "dataset.transfer_proposed",
    ]
    assert sales.post(f"{url}/cancel").json()["code"] == "transfer_closed"


def test_either_side_cancels_and_strangers_get_404(client_for, sales, ops):
    dataset = DatasetFactory(owner=TeamFactory(slug="ops"))
    stranger = client_for(TeamFactory(slug="finance"), scopes=["manage"])
    transfer = ops.post(
        f"/api/v1/datasets/{dataset.pk}/transfers", {"to_team": "sales"}, format="json"
    ).json()
    url = f"/api/v1/datasets/{dataset.pk}/transfers/{transfer['id']}"
    assert stranger.post(f"{url}/accept").json()["code"] == "transfer_not_found"
    assert stranger.post(f"{url}/cancel").status_code == 404
    pending = ops.post(
        f"/api/v1/datasets/{dataset.pk}/transfers", {"to_team": "sales"}, format="json"
    )
    assert (pending.status_code, pending.json()["code"]) == (409, "transfer_pending")
    cancelled = sales.post(f"{url}/cancel")
    assert (cancelled.status_code, cancelled.json()["state"]) == (200, "cancelled")
    assert sales.post(f"{url}/accept").json()["code"] == "transfer_closed"
    assert Dataset.objects.get().owner.slug == "ops"
    assert AuditEntry.objects.filter(action="dataset.transfer_cancelled").count() == 1


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"to_team": "nobody"}, 404, "team_not_found"),
        ({"to_team": "ops"}, 400, "validation_error"),
        ({}, 400, "validation_error"),
    ],
)
def test_transfer_proposal_refusals(ops, body, status, code):
    dataset = DatasetFactory(owner=TeamFactory(slug="ops"))
    response = ops.post(f"/api/v1/datasets/{dataset.pk}/transfers", body, format="json")
    assert (response.status_code, response.json()["code"]) == (status, code)


def test_only_the_owner_proposes_a_transfer(sales):
    dataset = DatasetFactory(owner=TeamFactory(slug="ops"))
    response = sales.post(
        f"/api/v1/datasets/{dataset.pk}/transfers", {"to_team": "sales"}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (403, "not_dataset_owner")


def test_releasing_a_prefix_claim_is_audited(sales):
    claim_id = claim_prefix(sales, "s3://lake/sales/").json()["id"]
    assert sales.delete(f"{CLAIMS}/{claim_id}").status_code == 204
    assert not Claim.objects.exists()
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "claim.created",
        "claim.released",
    ]


TRANSFERS = "/api/v1/ownership-transfers"


def test_each_team_lists_the_transfers_it_is_party_to_filtered_by_state(
    client_for, sales, ops, django_assert_max_num_queries
):
    ops_team = TeamFactory(slug="ops")
    mine = DatasetFactory(owner=ops_team, namespace="s3://lake", name="ops/a")
    other = DatasetFactory(owner=ops_team, namespace="s3://lake", name="ops/b")
    first = ops.post(f"/api/v1/datasets/{mine.pk}/transfers", {"to_team": "sales"}, format="json")
    second = ops.post(f"/api/v1/datasets/{other.pk}/transfers", {"to_team": "sales"}, format="json")
    ops.post(f"/api/v1/datasets/{other.pk}/transfers/{second.json()['id']}/cancel")

    with django_assert_max_num_queries(3):  # the key, the page, last_used_at
        listed = sales.get(TRANSFERS)
    assert listed.status_code == 200, listed.json()
    rows = listed.json()["results"]
    assert [row["id"] for row in rows] == [second.json()["id"], first.json()["id"]]
    assert rows[1] | {"created_at": None} == {
        "id": first.json()["id"],
        "dataset": mine.pk,
        "namespace": "s3://lake",
        "name": "ops/a",
        "from_team": "ops",
        "to_team": "sales",
        "state": "proposed",
        "proposed_by": rows[1]["proposed_by"],
        "decided_by": "",
        "created_at": None,
        "decided_at": None,
    }
    proposed = ops.get(TRANSFERS, {"state": "proposed"}).json()["results"]
    assert [row["id"] for row in proposed] == [first.json()["id"]]
    stranger = client_for(TeamFactory(slug="stranger"), scopes=["read"])
    assert stranger.get(TRANSFERS).json()["results"] == []


@pytest.mark.parametrize(("params", "field"), [({"state": "done"}, "state"), ({"x": "1"}, "x")])
def test_the_transfer_list_names_a_bad_filter(sales, params, field):
    response = sales.get(TRANSFERS, params)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == [field]
