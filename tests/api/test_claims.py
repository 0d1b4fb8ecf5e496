"""Claims: a team claims job namespaces; its lineage events for them are then verified."""

from __future__ import annotations

import json

import pytest

from catalog.models import Claim
from lineage.models import LineageEvent
from tests.catalog.factories import TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

URL = "/api/v1/claims"


def claim(client, pattern, **extra):
    return client.post(URL, {"kind": "job_namespace", "pattern": pattern, **extra}, format="json")


def test_claim_a_job_namespace_then_list_and_release_it(
    client_for, team, django_assert_max_num_queries
):
    manager = client_for(team, scopes=["manage", "read"])
    response = claim(manager, "airflow://orders")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert {k: body[k] for k in ("team", "kind", "pattern")} == {
        "team": "orders",
        "kind": "job_namespace",
        "pattern": "airflow://orders",
    }
    assert claim(manager, "airflow://orders").status_code == 200  # already ours: no-op
    claim(manager, "dbt-orders")
    with django_assert_max_num_queries(3):  # at most: the key, the page, last_used_at
        listed = manager.get(URL)
    assert [c["pattern"] for c in listed.json()["results"]] == ["dbt-orders", "airflow://orders"]

    assert manager.delete(f"{URL}/{body['id']}").status_code == 204
    assert list(Claim.objects.values_list("pattern", flat=True)) == ["dbt-orders"]


def test_a_namespace_claimed_by_another_team_is_409_and_others_claims_are_hidden(client_for, team):
    ours = client_for(team, scopes=["manage", "read"])
    theirs = client_for(TeamFactory(slug="sales"), scopes=["manage", "read"])
    first = claim(ours, "airflow://shared")
    response = claim(theirs, "airflow://shared")
    assert response.status_code == 409
    assert response.json()["code"] == "claim_taken"
    assert response.json()["errors"][0]["field"] == "pattern"
    assert theirs.get(URL).json()["results"] == []
    response = theirs.delete(f"{URL}/{first.json()['id']}")
    assert (response.status_code, response.json()["code"]) == (404, "claim_not_found")
    assert Claim.objects.get().team == team


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "job_namespace", "pattern": "airflow://my team"}, "pattern"),
        ({"kind": "job_namespace", "pattern": ""}, "pattern"),
        ({"kind": "job_namespace", "pattern": "x" * 256}, "pattern"),
        ({"kind": "database_role", "pattern": "analytics"}, "kind"),
        ({"pattern": "a", "extra": 1}, "extra"),
        ({"kind": "db_role", "pattern": "reporting"}, "pattern"),
        ({"kind": "db_role", "pattern": "postgres://db.example:5432/"}, "pattern"),
        ({"kind": "db_role", "pattern": "Postgres://db.example:5432/reporting"}, "pattern"),
    ],
)
def test_a_malformed_claim_is_400_naming_the_field(client_for, team, body, field):
    response = client_for(team, scopes=["manage"]).post(URL, body, format="json")
    assert response.status_code == 400, response.json()
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert not Claim.objects.exists()


def test_a_team_claims_a_database_role_of_a_server(client_for, team):
    manager = client_for(team, scopes=["manage"])
    response = manager.post(
        URL, {"kind": "db_role", "pattern": "postgres://db.example:5432/reporting"}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["kind"] == "db_role"
    # The same text as a job namespace is another claim.
    assert claim(manager, "postgres://db.example:5432/reporting").status_code == 201


def test_claims_need_manage_to_change_and_read_to_list(client_for, team):
    reader = client_for(team, scopes=["read"])
    assert claim(reader, "airflow://orders").status_code == 403
    assert reader.get(URL).status_code == 200
    assert client_for(team, scopes=["lineage"]).get(URL).status_code == 403


def test_lineage_events_are_verified_once_the_namespace_is_claimed(client_for, team):
    sender = client_for(team, scopes=["lineage"])

    def send(event_type):
        data = json.dumps(ev.run_event(event_type, job=("airflow://orders", "rollup")))
        return sender.post("/api/v1/lineage", data=data, content_type="application/json")

    assert send("START").json()["verified"] is False
    claim(client_for(team, scopes=["manage"]), "airflow://orders")
    assert send("COMPLETE").json()["verified"] is True
    assert list(LineageEvent.objects.order_by("id").values_list("verified", flat=True)) == [
        False,
        True,
    ]
