"""GET /api/v1/reports/undeclared-reads: observed reads of catalog datasets by teams that
declared no subscription to them."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from catalog.models import Claim, Dataset, Subscription
from lineage.services import processing
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
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
    processing.lineage_events_process_due()


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


# --- stale declarations, undeclared writes, uncatalogued datasets ----------------------

STALE_URL = "/api/v1/reports/stale-declarations"
WRITES_URL = "/api/v1/reports/undeclared-writes"
UNCATALOGUED_URL = "/api/v1/reports/uncatalogued-datasets"


def run_at(client, at: datetime, *, job=ev.JOB, inputs=(ORDERS,), outputs=()) -> None:
    """One COMPLETE run of ``job`` at ``at`` (aware), over the API, then processed."""
    event = ev.run_event(
        "COMPLETE",
        run_id=str(uuid.uuid4()),
        job=job,
        event_time=at.isoformat(),
        inputs=list(inputs),
        outputs=list(outputs),
    )
    response = client.post(
        "/api/v1/lineage", data=json.dumps(event), content_type="application/json"
    )
    assert response.status_code == 201, response.json()
    processing.lineage_events_process_due()


def subscribe(team, dataset, *, age_days: int, job=("", "")) -> Subscription:
    """A subscription of ``team`` to ``dataset`` declared ``age_days`` days ago."""
    subscription = SubscriptionFactory(
        team=team, dataset=dataset, endpoint=None, job_namespace=job[0], job_name=job[1]
    )
    created = timezone.now() - timedelta(days=age_days)
    Subscription.objects.filter(pk=subscription.pk).update(created_at=created)
    return subscription


def test_stale_declarations_lists_subscriptions_not_seen_read_within_the_window(
    client_for, shop, team_a, django_assert_max_num_queries
):
    orders = Dataset.objects.get(name=ORDERS["name"])
    other_job = (ev.JOB[0], "other.job")
    margins = DatasetFactory(owner=shop, namespace="s3://lake", name="marts/margins")
    fresh = DatasetFactory(owner=shop, namespace="s3://lake", name="marts/fresh")
    # Read 40 days ago only (by another of its jobs than the one named): stale.
    old = subscribe(team_a, orders, age_days=90, job=ev.JOB)
    key = client_for(team_a, scopes=["lineage", "read"])
    run_at(key, timezone.now() - timedelta(days=40), job=other_job)
    # Never seen, declared 31 days ago: stale. Declared 5 days ago: not yet.
    never = subscribe(team_a, margins, age_days=31)
    subscribe(team_a, fresh, age_days=5)

    with django_assert_max_num_queries(3):  # the key, the page, last_used_at
        response = key.get(STALE_URL)
    assert response.status_code == 200, response.json()
    rows = response.json()["results"]
    assert [r["subscription"] for r in rows] == [old.pk, never.pk]
    assert rows[0]["job"] == {"namespace": ev.JOB[0], "name": ev.JOB[1]}
    assert rows[0]["dataset"] == {
        "id": orders.pk,
        "namespace": ORDERS["namespace"],
        "name": ORDERS["name"],
        "owner": "shop",
    }
    assert rows[0]["team"] == "team-a"
    assert rows[0]["last_read_at"] is not None
    assert (rows[1]["job"], rows[1]["last_read_at"]) == (None, None)

    # 45 days take in the read 40 days ago, and the 31-day-old declaration is young then;
    # 2 days make even the 5-day-old one stale.
    assert key.get(STALE_URL, {"days": 45}).json()["results"] == []
    assert len(key.get(STALE_URL, {"days": 2}).json()["results"]) == 3

    # A recent verified read (any job of the team) makes it current again.
    run_at(key, timezone.now() - timedelta(days=1), job=other_job)
    assert [r["subscription"] for r in key.get(STALE_URL).json()["results"]] == [never.pk]


def test_stale_declarations_ignore_unverified_reads_and_other_teams_reads(client_for, shop, team_a):
    orders = Dataset.objects.get(name=ORDERS["name"])
    subscription = subscribe(team_a, orders, age_days=60)
    # team-b reads in team-a's namespace: unverified, and team-b's, not team-a's.
    intruder = client_for(TeamFactory(slug="team-b"), scopes=["lineage", "read"])
    run_at(intruder, timezone.now() - timedelta(hours=1))
    key = client_for(team_a, scopes=["read"])
    assert [r["subscription"] for r in key.get(STALE_URL).json()["results"]] == [subscription.pk]


def test_stale_declarations_default_window_is_the_setting(client_for, shop, team_a, settings):
    orders = Dataset.objects.get(name=ORDERS["name"])
    subscribe(team_a, orders, age_days=10)
    key = client_for(team_a, scopes=["read"])
    assert key.get(STALE_URL).json()["results"] == []
    settings.TIDEMARK_STALE_DECLARATION_DAYS = 7
    assert len(key.get(STALE_URL).json()["results"]) == 1


def test_undeclared_writes_lists_verified_outputs_to_another_teams_dataset(
    client_for, shop, team_a, django_assert_max_num_queries
):
    key = client_for(team_a, scopes=["lineage", "read"])
    unknown = ev.dataset("s3://lake", "raw/unregistered")
    run_at(key, timezone.now(), inputs=[], outputs=[ORDERS, unknown])
    # The owner writing its own dataset, and an unverified write, are not listed.
    Claim.objects.create(team=shop, kind=Claim.Kind.JOB_NAMESPACE, pattern="dbt-shop")
    own = client_for(shop, scopes=["lineage", "read"])
    run_at(own, timezone.now(), job=("dbt-shop", "load"), inputs=[], outputs=[ORDERS])
    intruder = client_for(TeamFactory(slug="team-b"), scopes=["lineage", "read"])
    run_at(intruder, timezone.now(), inputs=[], outputs=[ORDERS])

    with django_assert_max_num_queries(3):
        response = key.get(WRITES_URL)
    assert response.status_code == 200, response.json()
    [row] = response.json()["results"]
    assert row["team"] == "team-a"
    assert row["job"] == {"namespace": ev.JOB[0], "name": ev.JOB[1]}
    assert (row["dataset"]["name"], row["dataset"]["owner"], row["runs"]) == (
        ORDERS["name"],
        "shop",
        1,
    )
    assert own.get(WRITES_URL).json()["results"] == []
    assert intruder.get(WRITES_URL).json()["results"] == []
    auditor = client_for(TeamFactory(slug="audit"), scopes=["governance"])
    assert [r["team"] for r in auditor.get(WRITES_URL).json()["results"]] == ["team-a"]
    response = key.get(WRITES_URL, {"team": "shop"})
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")


def test_uncatalogued_datasets_lists_unknown_identities_with_readers_and_writers(
    client_for, shop, team_a, django_assert_max_num_queries
):
    raw = ev.dataset("s3://lake", "raw/events")
    staged = ev.dataset("s3://lake", "staged/events")
    key_a = client_for(team_a, scopes=["lineage", "read"])
    run_at(key_a, timezone.now() - timedelta(hours=2), inputs=[raw, ORDERS], outputs=[staged])
    team_c = TeamFactory(slug="team-c")
    Claim.objects.create(team=team_c, kind=Claim.Kind.JOB_NAMESPACE, pattern="dbt-c")
    key_c = client_for(team_c, scopes=["lineage", "read"])
    run_at(key_c, timezone.now() - timedelta(hours=1), job=("dbt-c", "sessions"), inputs=[staged])
    # Unverified usage alone never lists an identity.
    intruder = client_for(TeamFactory(slug="team-b"), scopes=["lineage", "read"])
    run_at(intruder, timezone.now(), inputs=[ev.dataset("s3://lake", "raw/secret")])

    auditor = client_for(TeamFactory(slug="audit"), scopes=["governance"])
    with django_assert_max_num_queries(4):  # the key, the page, its usage, last_used_at
        response = auditor.get(UNCATALOGUED_URL)
    assert response.status_code == 200, response.json()
    rows = response.json()["results"]
    assert [(r["namespace"], r["name"]) for r in rows] == [
        ("s3://lake", "staged/events"),
        ("s3://lake", "raw/events"),
    ]
    staged_row = rows[0]
    assert [(p["team"], p["job"]["name"], p["runs"]) for p in staged_row["writers"]] == [
        ("team-a", ev.JOB[1], 1)
    ]
    assert [(p["team"], p["job"]["name"]) for p in staged_row["readers"]] == [
        ("team-c", "sessions")
    ]
    assert staged_row["runs"] == 2
    assert [(p["team"], p["job"]["namespace"]) for p in rows[1]["readers"]] == [
        ("team-a", ev.JOB[0])
    ]
    assert rows[1]["writers"] == []

    # A team sees the identities its jobs used, with its own usage only.
    [row] = key_c.get(UNCATALOGUED_URL).json()["results"]
    assert (row["name"], row["writers"], len(row["readers"])) == ("staged/events", [], 1)
    assert [
        r["name"] for r in auditor.get(UNCATALOGUED_URL, {"team": "team-c"}).json()["results"]
    ] == ["staged/events"]

    # Registering it takes it off the report.
    registered = client_for(team_a, scopes=["manage"]).post(
        "/api/v1/datasets", {"namespace": "s3://lake", "name": "staged/events"}, format="json"
    )
    assert registered.status_code == 201, registered.json()
    assert [r["name"] for r in auditor.get(UNCATALOGUED_URL).json()["results"]] == ["raw/events"]


def test_uncatalogued_datasets_pages_with_a_cursor(client_for, team_a):
    key = client_for(team_a, scopes=["lineage", "read"])
    now = timezone.now()
    for i in range(3):
        run_at(key, now - timedelta(minutes=i), inputs=[ev.dataset("s3://lake", f"raw/t{i}")])
    first = key.get(UNCATALOGUED_URL, {"page_size": 2}).json()
    assert [r["name"] for r in first["results"]] == ["raw/t0", "raw/t1"]
    second = key.get(first["next"]).json()
    assert [r["name"] for r in second["results"]] == ["raw/t2"]


@pytest.mark.parametrize("url", [STALE_URL, WRITES_URL, UNCATALOGUED_URL])
def test_the_new_reports_need_read_or_governance_and_check_parameters(client_for, team_a, url):
    assert client_for(team_a, scopes=["lineage"]).get(url).status_code == 403
    response = client_for(team_a, scopes=["read"]).get(url, {"page_size": 0})
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["page_size"]
    response = client_for(team_a, scopes=["governance"]).get(url, {"team": "nobody"})
    assert (response.status_code, response.json()["code"]) == (404, "team_not_found")


def test_stale_declarations_days_must_be_positive(client_for, team_a):
    response = client_for(team_a, scopes=["read"]).get(STALE_URL, {"days": 0})
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["days"]
