"""Property: whatever the interleaving of a run's events from its owner (verified) and
from intruders (unverified: one forging the owner's job name, one naming its own job),
and however processing batches them, the run is what the owner's verified events alone
make of it, and every other event is a conflict governance sees.

The oracle states the rules in the simplest code: the run's state is its earliest
terminal event's (ties: fail over abort over complete), else running once a START or
RUNNING was seen; it starts at the earliest START; its reads and writes are the union of
its events'. Without any verified event, the run is made of the events of the job and
team processed first (a processing pass takes events by job, then arrival).

Bounded by default; ``TIDEMARK_PROPERTY_EXAMPLES`` runs more examples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.models import DatasetUsage, RunConflict
from lineage.models import LineageEvent, LineageRun
from tests.catalog.factories import TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("TIDEMARK_PROPERTY_EXAMPLES", "40"))
OWNER, FORGER, STRANGER = "owner", "forger", "stranger"
JOBS = {OWNER: ev.JOB, FORGER: ev.JOB, STRANGER: ("airflow://intruder", "harvest")}
TYPES = ["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER"]
SEVERITY = {"COMPLETE": 1, "ABORT": 2, "FAIL": 3}
READS = [("postgres://wh:5432", "shop.public.orders"), ("postgres://wh:5432", "hr.public.pay")]
WRITES = [("s3://lake", "marts/daily")]


@dataclass(frozen=True)
class Sent:
    """One event as generated: who sends it, its type, minute past 06:00, datasets."""

    actor: str
    event_type: str
    minute: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]

    def payload(self) -> dict:
        return ev.run_event(
            self.event_type,
            job=JOBS[self.actor],
            event_time=f"2026-11-28T06:{self.minute:02d}:00Z",
            inputs=[ev.dataset(*READS[i]) for i in self.reads],
            outputs=[ev.dataset(*WRITES[i]) for i in self.writes],
        )

    @property
    def at(self) -> datetime:
        return datetime(2026, 11, 28, 6, self.minute, tzinfo=UTC)


sent = st.builds(
    Sent,
    actor=st.sampled_from([OWNER, FORGER, STRANGER]),
    event_type=st.sampled_from(TYPES),
    minute=st.integers(0, 4),
    reads=st.sets(st.integers(0, len(READS) - 1), max_size=2).map(lambda s: tuple(sorted(s))),
    writes=st.sets(st.integers(0, len(WRITES) - 1), max_size=1).map(lambda s: tuple(sorted(s))),
)
# Each event, and whether a processing pass runs right after it (else later, batched).
schedules = st.lists(st.tuples(sent, st.booleans()), min_size=1, max_size=8)


def expected_run(events: list[Sent]) -> dict:
    """What ``events`` (one job's, one team's) make of a run, stated plainly."""
    terminal = [e for e in events if e.event_type in SEVERITY]
    if terminal:
        end = min(terminal, key=lambda e: (e.at, -SEVERITY[e.event_type]))
        state, ended = end.event_type.lower(), end.at
    else:
        began = any(e.event_type in ("START", "RUNNING") for e in events)
        state, ended = ("running" if began else "new"), None
    starts = [e.at for e in events if e.event_type == "START"]
    return {
        "state": state,
        "started_at": min(starts, default=None),
        "ended_at": ended,
        "last_event_at": max(e.at for e in events),
        "edges": {("read", *READS[i]) for e in events for i in e.reads}
        | {("write", *WRITES[i]) for e in events for i in e.writes},
    }


def first_processed(passes: list[list[tuple[Sent, int]]]) -> Sent:
    """The event processing applies first: a pass takes what is pending by job identity
    (namespace, name), then arrival (the lock order of ``lineage.services.processing``)."""
    first_pass = next(p for p in passes if p)
    return min(first_pass, key=lambda item: (*JOBS[item[0].actor], item[1]))[0]


@pytest.fixture
def parties(team_a):
    teams = {OWNER: team_a, FORGER: TeamFactory(slug="forger"), STRANGER: TeamFactory(slug="x")}
    staff = get_user_model().objects.create_user(username="gov", is_staff=True)
    page = Client()
    page.force_login(staff)
    return teams, page


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(schedule=schedules)
def test_a_run_is_what_its_owners_verified_events_make_of_it(
    schedule, receive, process, parties, client_for
):
    teams, page = parties
    with transaction.atomic():  # each example starts from the same world
        stored: dict[int, Sent] = {}
        passes: list[list[tuple[Sent, int]]] = []
        pending: list[tuple[Sent, int]] = []
        for event, process_now in schedule:
            result = receive(event.payload(), team=teams[event.actor])
            if result.created:
                stored[result.event.pk] = event
                pending.append((event, result.event.pk))
            if process_now:
                passes.append(pending)
                pending = []
                process()
        passes.append(pending)
        process()
        _check(stored, passes, teams, page, client_for)
        transaction.set_rollback(True)


def _check(stored, passes, teams, page, client_for) -> None:
    assert set(LineageEvent.objects.values_list("state", flat=True)) == {"processed"}
    verified = [e for e in stored.values() if e.actor == OWNER]
    if verified:
        owner, made_of = OWNER, verified
    else:
        first = first_processed(passes)
        owner = first.actor
        made_of = [e for e in stored.values() if e.actor == owner]
    expected = expected_run(made_of)

    run = LineageRun.objects.select_related("job").get()
    assert (run.job.namespace, run.job.name) == JOBS[owner]
    assert (run.team, run.verified) == (teams[owner], bool(verified))
    facts = {k: getattr(run, k) for k in ("state", "started_at", "ended_at", "last_event_at")}
    assert facts == {k: v for k, v in expected.items() if k != "edges"}

    usage = {
        (u.direction, u.dataset_namespace, u.dataset_name): u
        for u in DatasetUsage.objects.select_related("job")
    }
    assert set(usage) == expected["edges"]  # the intruders' reads were never the run's
    for row in usage.values():
        assert (row.job_id, row.team, row.verified) == (run.job_id, teams[owner], bool(verified))
        assert row.run_count == 1

    conflicting = {pk for pk, e in stored.items() if e.actor != owner}
    recorded = RunConflict.objects.all()
    assert {c.event_id for c in recorded} == conflicting
    for conflict in recorded:
        assert (conflict.run_job_id, conflict.run_verified) == (run.job_id, bool(verified))
    # Visible to governance: the API report and the governance page.
    auditor = client_for(teams[OWNER], scopes=["governance"])
    listed = auditor.get("/api/v1/reports/run-conflicts", {"page_size": 100}).json()["results"]
    assert {row["event"]["id"] for row in listed} == conflicting
    shown = page.get("/governance/").context["run_conflicts"]
    assert {c.event_id for c in shown} == conflicting
