"""A lineage run belongs to its job: an event never attaches to a run owned by another
team's job, a verified event is never overridden by an unverified one, and a conflicting
event is kept, flagged and shown to governance."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from catalog.models import DatasetAlias, DatasetUsage, RunConflict
from lineage.models import LineageEvent, LineageRun
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

ORDERS = ev.dataset("postgres://warehouse:5432", "shop.public.orders")
ROLLUP = ev.dataset("postgres://warehouse:5432", "shop.marts.daily_orders")
SECRETS = ev.dataset("postgres://warehouse:5432", "hr.public.salaries")
INTRUDER_JOB = ("airflow://intruder", "harvest")


def at(minute: int) -> str:
    return f"2026-11-28T06:{minute:02d}:00Z"


def owner_run(receive) -> None:
    receive(ev.run_event("START", event_time=at(0), inputs=[ORDERS]))
    receive(ev.run_event("COMPLETE", event_time=at(5), inputs=[ORDERS], outputs=[ROLLUP]))


@pytest.fixture
def intruder(db):
    """A team without any claim: all its events are unverified."""
    return TeamFactory(slug="intruder")


def test_an_unverified_event_first_does_not_make_the_run_the_intruders(
    receive, process, team_a, intruder
):
    receive(
        ev.run_event("START", job=INTRUDER_JOB, event_time=at(1), inputs=[SECRETS]), team=intruder
    )
    process()
    owner_run(receive)
    process()

    run = LineageRun.objects.select_related("job", "team").get()
    assert (run.job.namespace, run.job.name, run.team) == (*ev.JOB, team_a)
    assert (run.state, run.started_at, run.ended_at) == (
        "complete",
        datetime(2026, 11, 28, 6, 0, tzinfo=UTC),
        datetime(2026, 11, 28, 6, 5, tzinfo=UTC),
    )
    usage = {
        (u.job.name, u.direction, u.dataset_name, u.verified, u.run_count)
        for u in DatasetUsage.objects.select_related("job")
    }
    assert usage == {
        (ev.JOB[1], "read", ORDERS["name"], True, 1),
        (ev.JOB[1], "write", ROLLUP["name"], True, 1),
    }


def test_a_terminal_state_sent_first_by_an_intruder_does_not_stick(
    receive, process, team_a, intruder
):
    # Forged: the owner's own job name, but from a key whose team claims nothing.
    receive(ev.run_event("FAIL", event_time=at(2)), team=intruder)
    process()
    owner_run(receive)
    process()
    run = LineageRun.objects.get()
    assert (run.state, run.ended_at) == ("complete", datetime(2026, 11, 28, 6, 5, tzinfo=UTC))


def conflicts() -> list[tuple]:
    """Every recorded conflict as (event id, reason, run's job name, run verified)."""
    return sorted(
        RunConflict.objects.select_related("run_job").values_list(
            "event_id", "reason", "run_job__name", "run_verified"
        )
    )


def test_unverified_events_after_the_owners_change_nothing_and_are_conflicts(
    receive, process, team_a, intruder
):
    receive(ev.run_event("START", event_time=at(0), inputs=[ORDERS]))
    process()
    forged = receive(ev.run_event("COMPLETE", event_time=at(3), inputs=[SECRETS]), team=intruder)
    other = receive(
        ev.run_event("ABORT", job=INTRUDER_JOB, event_time=at(4), outputs=[ROLLUP]), team=intruder
    )
    process()

    run = LineageRun.objects.get()
    assert (run.state, run.ended_at, run.verified) == ("running", None, True)
    assert [(u.dataset_name, u.verified) for u in DatasetUsage.objects.all()] == [
        (ORDERS["name"], True)
    ]
    assert conflicts() == [
        (forged.event.pk, "unverified", ev.JOB[1], True),
        (other.event.pk, "other_job", ev.JOB[1], True),
    ]
    # Processed again (a lost claim, a replay): still one conflict per event.
    LineageEvent.objects.update(state="pending")
    process()
    assert len(conflicts()) == 2 and LineageRun.objects.get().state == "running"


def test_a_verified_event_takes_over_a_run_unverified_events_made_and_withdraws_their_usage(
    receive, process, team_a, intruder
):
    # The intruder's job also has a run of its own reading SECRETS: that usage stays.
    receive(
        ev.run_event("COMPLETE", run_id=str(uuid.uuid4()), job=INTRUDER_JOB, inputs=[SECRETS]),
        team=intruder,
    )
    first = receive(
        ev.run_event("START", job=INTRUDER_JOB, event_time=at(1), inputs=[SECRETS, ROLLUP]),
        team=intruder,
    )
    process()
    assert LineageRun.objects.get(run_id=ev.RUN_ID).verified is False
    assert {(u.dataset_name, u.run_count) for u in DatasetUsage.objects.all()} == {
        (SECRETS["name"], 2),
        (ROLLUP["name"], 1),
    }
    # Another team's unverified report of the same run, while it is still unverified.
    third = TeamFactory(slug="third")
    second = receive(ev.run_event("RUNNING", job=INTRUDER_JOB, event_time=at(2)), team=third)
    process()
    assert conflicts() == [(second.event.pk, "other_team", INTRUDER_JOB[1], False)]

    owner_run(receive)
    process()
    run = LineageRun.objects.select_related("job").get(run_id=ev.RUN_ID)
    assert (run.job.name, run.team, run.verified, run.state) == (
        ev.JOB[1],
        team_a,
        True,
        "complete",
    )
    assert run.started_at == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    usage = {
        (u.job.name, u.dataset_name, u.verified, u.run_count)
        for u in DatasetUsage.objects.select_related("job")
    }
    assert usage == {
        (INTRUDER_JOB[1], SECRETS["name"], False, 1),  # its own other run only
        (ev.JOB[1], ORDERS["name"], True, 1),
        (ev.JOB[1], ROLLUP["name"], True, 1),
    }
    # Both earlier events are conflicts with the run as it is now.
    assert conflicts() == [
        (first.event.pk, "other_job", ev.JOB[1], True),
        (second.event.pk, "other_job", ev.JOB[1], True),
    ]


def test_in_a_run_no_verified_event_reached_another_teams_report_is_a_conflict(
    receive, process, intruder
):
    third = TeamFactory(slug="third")
    receive(ev.run_event("START", job=INTRUDER_JOB, event_time=at(0)), team=intruder)
    process()
    late = receive(ev.run_event("FAIL", job=INTRUDER_JOB, event_time=at(1)), team=third)
    own = receive(ev.run_event("COMPLETE", job=INTRUDER_JOB, event_time=at(2)), team=intruder)
    process()
    run = LineageRun.objects.get()
    assert (run.state, run.team, run.verified) == ("complete", intruder, False)
    assert [c[:2] for c in conflicts()] == [(late.event.pk, "other_team")]
    assert own.event.pk not in {c[0] for c in conflicts()}


def test_a_conflicting_event_records_no_alias_and_no_schema(receive, process, team_a):
    orders = DatasetFactory(owner=team_a, namespace=ORDERS["namespace"], name=ORDERS["name"])
    receive(ev.run_event("START", event_time=at(0)))
    process()
    schema = {"_producer": ev.PRODUCER, "fields": [{"name": "id", "type": "BIGINT"}]}
    symlinks = {
        "_producer": ev.PRODUCER,
        "identifiers": [{"namespace": "hive://m:9083", "name": "shop.orders", "type": "TABLE"}],
    }
    receive(
        ev.run_event(
            "COMPLETE",
            job=(ev.JOB[0], "another_task"),  # verified, but not the run's job
            event_time=at(5),
            outputs=[ev.dataset(*ORDERS.values(), facets={"schema": schema, "symlinks": symlinks})],
        )
    )
    process()
    assert RunConflict.objects.get().reason == "other_job"
    assert not DatasetAlias.objects.exists()
    assert not orders.schema_observations.exists()
    assert not DatasetUsage.objects.exists()


# --- shown to governance ------------------------------------------------------------------

REPORT = "/api/v1/reports/run-conflicts"


def test_the_run_conflicts_report_shows_each_party_its_rows_and_governance_every_row(
    receive, process, team_a, intruder, client_for, django_assert_max_num_queries
):
    owner_run(receive)
    process()
    forged = receive(ev.run_event("FAIL", event_time=at(2)), team=intruder).event
    process()

    auditor = client_for(TeamFactory(slug="audit"), scopes=["governance"])
    with django_assert_max_num_queries(3):  # at most: the key, the page, last_used_at
        response = auditor.get(REPORT)
    assert response.status_code == 200, response.json()
    [row] = response.json()["results"]
    assert row == {
        "run_id": ev.RUN_ID,
        "run": {
            "job": {"namespace": ev.JOB[0], "name": ev.JOB[1]},
            "team": "team-a",
            "verified": True,
        },
        "event": {
            "id": forged.pk,
            "team": "intruder",
            "job": {"namespace": ev.JOB[0], "name": ev.JOB[1]},
            "verified": False,
            "event_type": "FAIL",
            "event_time": "2026-11-28T06:02:00Z",
        },
        "reason": "unverified",
        "detected_at": row["detected_at"],
    }
    for team in (team_a, intruder):  # both parties see it
        assert len(client_for(team, scopes=["read"]).get(REPORT).json()["results"]) == 1
    bystander = client_for(TeamFactory(slug="bystander"), scopes=["read"])
    assert bystander.get(REPORT).json()["results"] == []
    assert bystander.get(REPORT, {"team": "team-a"}).status_code == 403
    assert auditor.get(REPORT, {"team": "bystander"}).json()["results"] == []
    assert client_for(team_a, scopes=["lineage"]).get(REPORT).status_code == 403

    # The run's events say which one was kept out, and why.
    events = client_for(team_a, scopes=["read"]).get(f"/api/v1/lineage/runs/{ev.RUN_ID}/events")
    assert [(e["event_type"], e["conflict"]) for e in events.json()["results"]] == [
        ("START", None),
        ("FAIL", "unverified"),
        ("COMPLETE", None),
    ]


def test_the_governance_page_lists_run_conflicts(receive, process, team_a, intruder):
    owner_run(receive)
    process()
    receive(ev.run_event("ABORT", job=INTRUDER_JOB, event_time=at(3)), team=intruder)
    process()
    staff = get_user_model().objects.create_user(username="gov", is_staff=True)
    client = Client()
    client.force_login(staff)
    response = client.get("/governance/")
    assert response.status_code == 200
    [conflict] = response.context["run_conflicts"]
    assert (conflict.reason, conflict.event_team, conflict.run_team) == (
        "other_job",
        intruder,
        team_a,
    )
    page = response.content.decode()
    section = page[page.index('id="run-conflicts"') :]
    assert ev.RUN_ID in section and "names another job than the run" in section
    assert "ABORT of airflow://intruder/harvest" in section
