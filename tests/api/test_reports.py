"""GET /api/v1/reports/undeclared-reads: observed reads of catalog datasets by teams that
declared no subscription to them."""

from __future__ import annotations

import json
import uuid

import pytest

from catalog.models import Claim
from lineage import services
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

URL = "/api/v1/reports/undeclared-reads"
ORDERS = ev.dataset("postgres://warehouse:5432", "shop.public.orders")


@pytest.fixture
def shop(db):
    """Team ``shop`` owns the catalog dataset ``shop.public.orders``."""
    team = TeamFactory(slug="shop")
    DatasetFactory(owner=team, namespace=ORDERS["namespace"], name=ORDERS["name"])
    return team


@pytest.fixture
def team_a(db):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    return team


def run_job(client, *, job=ev.JOB, inputs=(ORDERS,), outputs=(), day=28) -> None:
    """One run of ``job``: START and COMPLETE over the API, then processed."""
    run_id = str(uuid.uuid4())
    for event_type, minute in (("START", "00"), ("COMPLETE", "05")):
        event = ev.run_event(
            event_type,
            run_id=run_id,
            job=job,
            event_time=f"2026-11-{day}T06:{minute}:00Z",
            inputs=list(inputs),
            outputs=list(outputs),
        )
        response = client.post(
            "/api/v1/lineage", data=json.dumps(event), content_type="application/json"
        )
        assert response.status_code == 201, response.json()
    services.lineage_events_process_due()


def test_a_job_reading_without_subscription_is_reported_until_its_team_subscribes(
    client_for, shop, team_a, django_assert_max_num_queries
):
    key = client_for(team_a, scopes=["lineage", "read", "manage"])
    run_job(key, day=27)
    run_job(key, day=28)

    with django_assert_max_num_queries(3):  # at most: the key, the page, last_used_at
        response = key.get(URL)
    assert response.status_code == 200, response.json()
    [row] = response.json()["results"]
    assert row == {
        "team": "team-a",
        "job": {"namespace": ev.JOB[0], "name": ev.JOB[1]},
        "dataset": {
            "id": row["dataset"]["id"],
            "namespace": ORDERS["namespace"],
            "name": ORDERS["name"],
            "owner": "shop",
        },
        "first_seen_at": "2026-11-27T06:00:00Z",
        "last_seen_at": "2026-11-28T06:05:00Z",
        "runs": 2,
        "verified": True,
    }

    subscribed = key.post(
        "/api/v1/subscriptions",
        {"namespace": ORDERS["namespace"], "name": ORDERS["name"]},
        format="json",
    )
    assert subscribed.status_code == 201, subscribed.json()
    assert key.get(URL).json()["results"] == []


def test_unverified_reads_are_left_out_unless_asked_for_and_shown_apart(client_for, shop, team_a):
    intruder = client_for(TeamFactory(slug="team-b"), scopes=["lineage", "read"])
    run_job(intruder)  # team-b reports a job in team-a's claimed namespace: unverified
    assert intruder.get(URL).json()["results"] == []
    [row] = intruder.get(URL, {"verified": "false"}).json()["results"]
    assert (row["team"], row["verified"], row["runs"]) == ("team-b", False, 1)
    assert [r["verified"] for r in intruder.get(URL, {"verified": "all"}).json()["results"]] == [
        False
    ]
    # Nor does it show in the job owner's report.
    assert client_for(team_a, scopes=["read"]).get(URL, {"verified": "all"}).json()["results"] == []


def test_reads_of_own_datasets_writes_and_unknown_datasets_are_not_reported(
    client_for, shop, team_a
):
    Claim.objects.create(team=shop, kind=Claim.Kind.JOB_NAMESPACE, pattern="dbt-shop")
    own = client_for(shop, scopes=["lineage", "read"])
    run_job(own, job=("dbt-shop", "orders_cleanup"))  # the owner reads its own dataset
    key = client_for(team_a, scopes=["lineage", "read"])
    unknown = ev.dataset("s3://lake", "raw/unregistered")
    run_job(key, inputs=[unknown], outputs=[ORDERS])
    assert own.get(URL).json()["results"] == []
    assert key.get(URL).json()["results"] == []

    # The unknown dataset was recorded by identity: once registered, its reads show up.
    registered = client_for(shop, scopes=["manage"]).post(
        "/api/v1/datasets", {"namespace": "s3://lake", "name": "raw/unregistered"}, format="json"
    )
    assert registered.status_code == 201, registered.json()
    [row] = key.get(URL).json()["results"]
    assert row["dataset"] == {
        "id": registered.json()["id"],
        "namespace": "s3://lake",
        "name": "raw/unregistered",
        "owner": "shop",
    }


def test_a_team_sees_its_own_rows_and_governance_every_teams(client_for, shop, team_a):
    team_c = TeamFactory(slug="team-c")
    Claim.objects.create(team=team_c, kind=Claim.Kind.JOB_NAMESPACE, pattern="dbt-c")
    key_a = client_for(team_a, scopes=["lineage", "read"])
    key_c = client_for(team_c, scopes=["lineage", "read"])
    run_job(key_a)
    run_job(key_c, job=("dbt-c", "margins"), day=27)

    assert [r["team"] for r in key_a.get(URL).json()["results"]] == ["team-a"]
    assert [r["team"] for r in key_c.get(URL).json()["results"]] == ["team-c"]
    response = key_a.get(URL, {"team": "team-c"})
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
    assert [r["team"] for r in key_a.get(URL, {"team": "team-a"}).json()["results"]] == ["team-a"]

    auditor = client_for(TeamFactory(slug="audit"), scopes=["governance"])
    assert [r["team"] for r in auditor.get(URL).json()["results"]] == ["team-a", "team-c"]
    assert [r["team"] for r in auditor.get(URL, {"team": "team-c"}).json()["results"]] == ["team-c"]
    response = auditor.get(URL, {"team": "nobody"})
    assert (response.status_code, response.json()["code"]) == (404, "team_not_found")


def test_the_report_needs_read_or_governance_and_checks_its_parameters(client_for, team_a):
    assert client_for(team_a, scopes=["lineage"]).get(URL).status_code == 403
    response = client_for(team_a, scopes=["read"]).get(URL, {"verified": "maybe"})
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["verified"]
