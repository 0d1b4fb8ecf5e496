"""A lineage run belongs to its job: an event never attaches to a run owned by another
team's job, a verified event is never overridden by an unverified one, and a conflicting
event is kept, flagged and shown to governance."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from catalog.models import DatasetUsage
from lineage.models import LineageRun
from tests.catalog.factories import TeamFactory
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
