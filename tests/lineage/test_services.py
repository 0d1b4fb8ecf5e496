"""Receiving and processing OpenLineage events (lineage.services): runs, jobs and usage."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.actors import Actor
from catalog.models import Claim, DatasetAlias, DatasetUsage, Job, RunConflict, StaticLineage
from catalog.services import datasets
from catalog.services import usage as usage_services
from lineage.models import LineageEvent, LineageRun, LineageRunEdge
from lineage.services import processing
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev

from .conftest import NOW

pytestmark = pytest.mark.django_db

ORDERS = ev.dataset("postgres://warehouse:5432", "shop.public.orders")
ROLLUP = ev.dataset("postgres://warehouse:5432", "shop.marts.daily_orders")


def _start_and_complete(run_id: str = ev.RUN_ID, day: int = 28) -> tuple[dict, dict]:
    start = ev.run_event(
        "START", run_id=run_id, event_time=f"2026-11-{day}T06:00:00Z", inputs=[ORDERS]
    )
    complete = ev.run_event(
        "COMPLETE",
        run_id=run_id,
        event_time=f"2026-11-{day}T06:05:00Z",
        inputs=[ORDERS],
        outputs=[ROLLUP],
    )
    return start, complete


def _usage(direction: str, *, verified: bool = True) -> DatasetUsage:
    name = ORDERS["name"] if direction == "read" else ROLLUP["name"]
    return DatasetUsage.objects.get(dataset_name=name, direction=direction, verified=verified)


def _world() -> tuple:
    """Everything processing writes, to compare before and after."""
    run = LineageRun.objects.values(
        "run_id", "job_id", "state", "started_at", "ended_at", "parent_run_id"
    )
    usage = DatasetUsage.objects.values(
        "job_id",
        "dataset_name",
        "direction",
        "verified",
        "first_seen_at",
        "last_seen_at",
        "run_count",
    ).order_by("id")
    jobs = Job.objects.values("namespace", "name", "team_id", "first_seen_at", "last_seen_at")
    return list(run), list(usage), list(jobs), LineageRunEdge.objects.count()


def test_receive_stores_the_raw_event_pending_and_attributed(receive, team_a):
    payload = ev.run_event("START", inputs=[ORDERS])
    result = receive(payload)
    assert result.created is True
    event = LineageEvent.objects.get()
    assert event.payload == payload
    assert (event.team, event.verified, event.kind, event.event_type) == (
        team_a,
        True,
        "run",
        "START",
    )
    assert event.run_id == uuid.UUID(ev.RUN_ID)
    assert event.state == LineageEvent.State.PENDING
    assert event.next_attempt_at == NOW
    assert not LineageRun.objects.exists()  # processed later, not in the request


@pytest.mark.parametrize("claimed", [True, False])
def test_receive_decides_verified_inside_its_one_insert(receive, team_a, claimed):
    if not claimed:
        Claim.objects.filter(team=team_a).delete()
    with CaptureQueriesContext(connection) as captured:
        result = receive(ev.run_event("START", inputs=[ORDERS]))
    statements = [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 1 and statements[0].startswith("INSERT")
    assert result.event.verified is claimed
    assert LineageEvent.objects.get().verified is claimed


def test_receive_rings_the_lineage_doorbell_after_commit(
    receive, monkeypatch, django_capture_on_commit_callbacks
):
    from catalog import doorbell

    rung = []
    monkeypatch.setattr(doorbell, "_send", rung.append)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        receive(ev.run_event("START"))
    assert len(callbacks) == 1
    assert rung == [processing.PROCESS_EVENTS]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        receive(ev.run_event("START"))  # the same event: nothing stored, nothing to ring
    assert callbacks == []


def test_start_and_complete_make_a_run_a_job_and_usage_edges(receive, process, team_a):
    for payload in _start_and_complete():
        receive(payload)
    summary = process()
    assert summary.by_state == {"processed": 2}

    run = LineageRun.objects.get()
    assert run.run_id == uuid.UUID(ev.RUN_ID)
    assert run.state == "complete"
    assert run.started_at == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    assert run.ended_at == datetime(2026, 11, 28, 6, 5, tzinfo=UTC)
    job = Job.objects.get()
    assert (job.namespace, job.name, job.team) == (*ev.JOB, team_a)
    assert run.job == job
    read, write = _usage("read"), _usage("write")
    assert (read.job, read.team, read.run_count) == (job, team_a, 1)  # two events, one run
    assert (read.first_seen_at, read.last_seen_at) == (
        datetime(2026, 11, 28, 6, 0, tzinfo=UTC),
        datetime(2026, 11, 28, 6, 5, tzinfo=UTC),
    )
    assert (write.run_count, write.first_seen_at) == (1, datetime(2026, 11, 28, 6, 5, tzinfo=UTC))
    assert LineageEvent.objects.filter(state="processed", processed_at=NOW).count() == 2


def test_each_run_counts_once_per_edge_over_many_runs(receive, process):
    for day, run_id in ((26, uuid.uuid4()), (27, uuid.uuid4()), (28, uuid.uuid4())):
        for payload in _start_and_complete(str(run_id), day):
            receive(payload)
    process()
    read = _usage("read")
    assert read.run_count == 3
    assert (read.first_seen_at, read.last_seen_at) == (
        datetime(2026, 11, 26, 6, 0, tzinfo=UTC),
        datetime(2026, 11, 28, 6, 5, tzinfo=UTC),
    )
    assert _usage("write").run_count == 3
    assert LineageRun.objects.count() == 3


def test_the_same_event_sent_twice_changes_nothing(receive, process):
    start, complete = _start_and_complete()
    receive(start)
    receive(complete)
    process()
    before = _world()
    again = receive(dict(reversed(list(complete.items()))))  # same event, other key order
    assert again.created is False
    assert LineageEvent.objects.count() == 2
    assert process().claimed == 0
    assert _world() == before


def test_processing_an_event_again_changes_nothing(receive, process):
    for payload in _start_and_complete():
        receive(payload)
    process()
    before = _world()
    LineageEvent.objects.update(state="pending", processed_at=None)  # as after a lost ack
    assert process().by_state == {"processed": 2}
    assert _world() == before


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_start_after_complete_does_not_reopen_the_run(receive, process, order):
    events = _start_and_complete()
    for index in order:
        receive(events[index])
        process()  # one at a time, in this order
    run = LineageRun.objects.get()
    assert run.state == "complete"
    assert (run.started_at, run.ended_at) == (
        datetime(2026, 11, 28, 6, 0, tzinfo=UTC),
        datetime(2026, 11, 28, 6, 5, tzinfo=UTC),
    )
    assert _usage("read").run_count == 1


def test_out_of_order_and_duplicated_sequences_reach_one_final_state(receive, process):
    start, complete = _start_and_complete()
    running = ev.run_event("RUNNING", event_time="2026-11-28T06:02:00Z", inputs=[ORDERS])
    for payload in (complete, running, start, complete, running):
        receive(payload)
        process()
    reference = _world()
    assert reference[0][0]["state"] == "complete"
    LineageRun.objects.all().delete()
    DatasetUsage.objects.all().delete()
    LineageEvent.objects.update(state="pending", processed_at=None)
    process()  # all three at once, in received order
    assert _world()[0] == reference[0]
    assert [u["run_count"] for u in _world()[1]] == [1, 1]


def test_a_complete_without_start_still_makes_a_run(receive, process):
    _, complete = _start_and_complete()
    receive(complete)
    process()
    run = LineageRun.objects.get()
    assert (run.state, run.started_at) == ("complete", None)
    assert run.ended_at == datetime(2026, 11, 28, 6, 5, tzinfo=UTC)
    assert _usage("read").run_count == 1 and _usage("write").run_count == 1


def test_a_run_keeps_the_job_and_parent_it_was_first_given(receive, process):
    parent_id = str(uuid.uuid4())
    first = ev.run_event(
        "START", run_facets={"parent": ev.parent_facet(parent_id, "airflow://team-a", "dag")}
    )
    receive(first)
    process()
    later = ev.run_event(
        "COMPLETE",
        event_time="2026-11-28T06:05:00Z",
        job=("airflow://team-a", "renamed_task"),
        run_facets={"parent": ev.parent_facet(str(uuid.uuid4()), "airflow://team-a", "other")},
        inputs=[ORDERS],
    )
    conflicting = receive(later).event
    process()
    run = LineageRun.objects.select_related("job").get()
    assert run.job.name == ev.JOB[1]
    assert run.parent_run_id == uuid.UUID(parent_id)
    assert (run.parent_job_namespace, run.parent_job_name) == ("airflow://team-a", "dag")
    # The event naming another job is not the run's: it ends nothing and records no read;
    # its job is only seen, and the event is a conflict.
    assert run.state == "running"
    assert not DatasetUsage.objects.exists()
    assert set(Job.objects.values_list("name", flat=True)) == {ev.JOB[1], "renamed_task"}
    conflict = RunConflict.objects.select_related("event_job").get()
    assert (conflict.event_id, conflict.event_job.name, conflict.reason) == (
        conflicting.pk,
        "renamed_task",
        "other_job",
    )


def test_a_parent_arriving_after_the_first_event_is_taken(receive, process):
    receive(ev.run_event("START"))
    process()
    parent_id = uuid.uuid4()
    receive(
        ev.run_event(
            "COMPLETE",
            event_time="2026-11-28T06:05:00Z",
            run_facets={"parent": ev.parent_facet(str(parent_id), "airflow://team-a", "dag")},
        )
    )
    process()
    assert LineageRun.objects.get().parent_run_id == parent_id


def test_events_for_an_unclaimed_namespace_are_kept_unverified_and_apart(receive, process, team_a):
    other = TeamFactory(slug="team-b")
    start, complete = _start_and_complete()
    receive(start, team=other)  # team-b does not claim airflow://team-a
    receive(complete, team=other)
    process()
    assert set(LineageEvent.objects.values_list("verified", flat=True)) == {False}
    job = Job.objects.get()
    assert job.team is None  # an unverified report never sets the owner
    read = _usage("read", verified=False)
    assert (read.team, read.run_count) == (other, 1)
    assert not DatasetUsage.objects.filter(verified=True).exists()

    # The claimant's own events (of another run) go to separate, verified rows.
    for payload in _start_and_complete(run_id=str(uuid.uuid4())):
        receive(payload)
    process()
    assert _usage("read").team == team_a
    assert _usage("read", verified=False).run_count == 1
    job.refresh_from_db()
    assert job.team == team_a


def test_verification_is_decided_when_the_event_arrives(receive, process, team_a):
    Claim.objects.all().delete()
    receive(ev.run_event("START", inputs=[ORDERS]))
    Claim.objects.create(team=team_a, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    process()
    assert LineageEvent.objects.get().verified is False
    assert DatasetUsage.objects.get().verified is False


def test_usage_links_the_registered_dataset_and_keeps_unknown_ones_by_identity(
    receive, process, team_a
):
    owner = TeamFactory(slug="shop")
    orders = DatasetFactory(owner=owner, namespace=ORDERS["namespace"], name=ORDERS["name"])
    for payload in _start_and_complete():
        receive(payload)
    process()
    assert _usage("read").dataset == orders
    rollup = _usage("write")
    assert rollup.dataset is None
    assert (rollup.dataset_namespace, rollup.dataset_name) == (ROLLUP["namespace"], ROLLUP["name"])

    registered = datasets.dataset_register(
        actor=Actor(team=team_a, username="t"), namespace=ROLLUP["namespace"], name=ROLLUP["name"]
    )
    assert _usage("write").dataset == registered


def test_received_spellings_are_kept_as_aliases_of_the_normalised_identity(receive, process):
    receive(
        ev.run_event(
            "START",
            inputs=[ev.dataset("POSTGRESQL://Warehouse:5432", "Shop.Public.Orders"), ORDERS],
        )
    )
    process()
    usage = DatasetUsage.objects.get()  # both spellings are one dataset
    assert (usage.dataset_namespace, usage.dataset_name) == (ORDERS["namespace"], ORDERS["name"])
    alias = DatasetAlias.objects.get()
    assert (alias.alias_namespace, alias.alias_name) == (
        "POSTGRESQL://Warehouse:5432",
        "Shop.Public.Orders",
    )
    assert (alias.namespace, alias.name) == (ORDERS["namespace"], ORDERS["name"])


def test_job_and_dataset_events_record_the_job_and_aliases_but_no_run(receive, process, team_a):
    receive(
        {
            "eventTime": "2026-11-28T06:00:00Z",
            "job": {"namespace": "airflow://team-a", "name": "declared_job"},
            "inputs": [ORDERS],
            "producer": ev.PRODUCER,
            "schemaURL": ev.SCHEMA_URL,
        }
    )
    receive(
        {
            "eventTime": "2026-11-28T06:00:00Z",
            "dataset": ev.dataset("S3://Lake", "raw/orders"),
            "producer": ev.PRODUCER,
            "schemaURL": ev.SCHEMA_URL,
        }
    )
    assert process().by_state == {"processed": 2}
    assert Job.objects.get().team == team_a
    assert not LineageRun.objects.exists()
    assert not DatasetUsage.objects.exists()  # JobEvent inputs are not observed usage
    assert DatasetAlias.objects.get().alias_namespace == "S3://Lake"


def test_flagged_facets_are_kept_and_the_core_processed(receive, process):
    result = receive(ev.SAMPLE_INVALID_DATASET_FACET)
    assert result.event.problems == [
        {
            "field": "outputs.0.facets.ownership.owners.0.name",
            "rule": "required",
            "detail": "name is required",
        }
    ]
    process()
    assert LineageRun.objects.get().state == "complete"
    usage = DatasetUsage.objects.get()
    assert (usage.direction, usage.dataset_name) == ("write", "instance.schema.output-1")
    stored = LineageEvent.objects.get().payload
    assert stored["outputs"][0]["facets"]["ownership"]["owners"] == [{"no-name": "no-name-owner"}]


# --- claims, leases and failures ---------------------------------------------------------


def test_claim_due_skips_leased_events_until_the_lease_expires(receive):
    receive(ev.run_event("START"))
    first = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    assert len(first) == 1 and first[0].attempt == 1
    assert processing.lineage_event_claim_due(limit=10, lease_seconds=60) == []
    LineageEvent.objects.update(claimed_until=datetime(2000, 1, 1, tzinfo=UTC))  # expired
    second = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    assert [c.event_id for c in second] == [first[0].event_id]
    assert second[0].attempt == 2
    # The first claim is fenced off: its worker lost the event and writes nothing.
    assert processing.lineage_event_process(claim=first[0], now=NOW) is None
    assert not LineageRun.objects.exists()
    assert processing.lineage_event_process(claim=second[0], now=NOW) == "processed"
    assert LineageRun.objects.count() == 1


def test_claim_due_leaves_events_not_yet_due_or_finished(receive):
    receive(ev.run_event("START"))
    receive(ev.run_event("COMPLETE"))
    receive(ev.run_event("OTHER"))
    later = NOW + timedelta(days=3650)
    LineageEvent.objects.filter(event_type="START").update(next_attempt_at=later)
    LineageEvent.objects.filter(event_type="COMPLETE").update(state="failed")
    claims = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    assert [LineageEvent.objects.get(pk=c.event_id).event_type for c in claims] == ["OTHER"]


def test_claim_due_locks_with_skip_locked_in_three_statements(receive):
    receive(ev.run_event("START"))
    with CaptureQueriesContext(connection) as captured:
        processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    statements = [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 3
    assert statements[0].endswith("FOR UPDATE SKIP LOCKED")


def test_a_failing_event_is_retried_with_backoff_then_failed(receive, monkeypatch, settings):
    settings.TIDEMARK_LINEAGE = {**settings.TIDEMARK_LINEAGE, "max_attempts": 2}
    receive(ev.run_event("START"))

    def broken(**kwargs):
        raise RuntimeError("catalog unavailable")

    monkeypatch.setattr(usage_services, "job_record", broken)
    [claim] = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    assert processing.lineage_event_process(claim=claim, now=NOW) == "pending"
    event = LineageEvent.objects.get()
    assert event.last_error == "RuntimeError: catalog unavailable"
    assert event.claim_token is None and event.next_attempt_at > NOW
    assert not LineageRun.objects.exists()  # the failed attempt wrote nothing

    LineageEvent.objects.update(next_attempt_at=NOW)
    [claim] = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    assert processing.lineage_event_process(claim=claim, now=NOW) == "failed"
    assert LineageEvent.objects.get().state == "failed"
    assert processing.lineage_event_claim_due(limit=10, lease_seconds=60) == []


def test_process_due_stops_after_its_batches_and_says_more_is_due(receive):
    for n in range(5):
        receive(ev.run_event("START", run_id=str(uuid.uuid4()), event_time=f"2026-11-2{n}T00:00Z"))
    summary = processing.lineage_events_process_due(now=NOW, batch_size=2, max_batches=2)
    assert (summary.claimed, summary.more_due) == (4, True)
    summary = processing.lineage_events_process_due(now=NOW, batch_size=2)
    assert (summary.claimed, summary.more_due) == (1, False)
    assert LineageRun.objects.count() == 5


def _statements_to_process(receive, payload: dict) -> list[str]:
    receive(payload)
    [claim] = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    with CaptureQueriesContext(connection) as captured:
        assert processing.lineage_event_process(claim=claim, now=NOW) == "processed"
    return [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]


@pytest.mark.parametrize("count", [1, 12])
def test_an_events_edges_take_the_same_statements_whatever_their_number(receive, count):
    DatasetFactory(namespace=ORDERS["namespace"], name=ORDERS["name"])
    first = _statements_to_process(receive, _start_and_complete()[0])
    inputs = [ORDERS, *(ev.dataset("postgres://warehouse:5432", f"raw.t{i}") for i in range(count))]
    complete = ev.run_event(
        "COMPLETE", event_time="2026-11-28T06:05:00Z", inputs=inputs, outputs=[ROLLUP]
    )
    second = _statements_to_process(receive, complete)
    # A COMPLETE also looks up which of its outputs complete by OpenLineage: one statement.
    assert len(first) + 1 == len(second)
    assert len([sql for sql in second if "completion_signal" in sql]) == 1
    # dataset lookup and usage upsert, new run edges, run counts: three statements
    edge_statements = [sql for sql in second if "datasetusage" in sql or "lineagerunedge" in sql]
    assert len(edge_statements) == 3
    assert DatasetUsage.objects.count() == count + 2
    assert LineageRunEdge.objects.count() == count + 2
    assert set(DatasetUsage.objects.values_list("run_count", flat=True)) == {1}


def test_an_events_edges_widen_seen_times_link_datasets_and_count_each_run_once(receive, process):
    late = ev.run_event("START", event_time="2026-11-28T06:10:00Z", inputs=[ORDERS])
    early = ev.run_event("OTHER", event_time="2026-11-28T05:50:00Z", inputs=[ORDERS])
    receive(late)
    process()
    dataset = DatasetFactory(namespace=ORDERS["namespace"], name=ORDERS["name"])
    receive(early)
    process()
    usage = _usage("read")
    assert usage.first_seen_at == datetime(2026, 11, 28, 5, 50, tzinfo=UTC)
    assert usage.last_seen_at == datetime(2026, 11, 28, 6, 10, tzinfo=UTC)
    assert usage.dataset_id == dataset.pk  # registered after the first event: linked now
    assert usage.run_count == 1
    receive(ev.run_event("START", run_id=str(uuid.uuid4()), inputs=[ORDERS]))
    process()
    assert _usage("read").run_count == 2


# --- batches: one transaction; a savepoint per event once one fails ----------------------


def test_a_poison_event_in_a_batch_loses_and_duplicates_none_of_the_others(
    receive, process, monkeypatch
):
    runs = [str(uuid.uuid4()) for _ in range(5)]
    poison = runs[2]
    for run_id in runs:
        for payload in _start_and_complete(run_id):
            receive(payload)
    apply_run_event = processing._apply_run_event

    def poisoned(event, parsed, **kwargs):
        apply_run_event(event, parsed, **kwargs)  # writes the run and its usage, then fails
        if str(parsed.run_id) == poison:
            raise RuntimeError("poison")

    monkeypatch.setattr(processing, "_apply_run_event", poisoned)
    summary = process()
    assert (summary.claimed, summary.by_state) == (10, {"processed": 8, "pending": 2})
    bad = LineageEvent.objects.filter(run_id=poison)
    assert {(e.state, e.last_error, e.claim_token) for e in bad} == {
        ("pending", "RuntimeError: poison", None)
    }
    # The poison run's writes were rolled back with its savepoint; the others' stayed once.
    assert set(LineageRun.objects.values_list("run_id", flat=True)) == {
        uuid.UUID(r) for r in runs if r != poison
    }
    assert LineageRunEdge.objects.count() == 4 * 2
    assert {(u.direction, u.run_count) for u in DatasetUsage.objects.all()} == {
        ("read", 4),
        ("write", 4),
    }

    monkeypatch.setattr(processing, "_apply_run_event", apply_run_event)
    bad.update(next_attempt_at=NOW)
    assert process().by_state == {"processed": 2}
    assert LineageRun.objects.filter(state="complete").count() == 5
    assert LineageRunEdge.objects.count() == 5 * 2
    assert {(u.direction, u.run_count) for u in DatasetUsage.objects.all()} == {
        ("read", 5),
        ("write", 5),
    }
    attempts = dict(LineageEvent.objects.values_list("run_id", "attempts").distinct())
    assert attempts == {**{uuid.UUID(r): 1 for r in runs}, uuid.UUID(poison): 2}


def test_a_clean_batch_is_applied_without_a_savepoint_per_event(receive):
    for n in range(4):
        receive(ev.run_event("START", run_id=str(uuid.uuid4()), event_time=f"2026-11-2{n}T00:00Z"))
    claims = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    with CaptureQueriesContext(connection) as captured:
        states = processing.lineage_events_process_claimed(claims=claims, now=NOW)
    assert set(states.values()) == {"processed"} and len(states) == 4
    savepoints = [q for q in captured.captured_queries if q["sql"].startswith("SAVEPOINT")]
    assert len(savepoints) == 1  # the batch's transaction, nested in the test's
    assert LineageRun.objects.count() == 4


def test_a_batch_with_a_lost_claim_skips_that_event_only(receive):
    for payload in _start_and_complete():
        receive(payload)
    claims = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    LineageEvent.objects.filter(pk=claims[0].event_id).update(claim_token=uuid.uuid4())
    states = processing.lineage_events_process_claimed(claims=claims, now=NOW)
    assert states == {claims[0].event_id: None, claims[1].event_id: "processed"}
    assert LineageEvent.objects.get(pk=claims[0].event_id).state == "pending"


def test_a_runs_events_in_one_batch_reach_one_final_state_in_any_order(receive, process):
    start, complete = _start_and_complete()
    running = ev.run_event(
        "RUNNING",
        event_time="2026-11-28T06:02:00Z",
        inputs=[ORDERS, ev.dataset("postgres://warehouse:5432", "shop.public.items")],
    )
    orders = list(itertools.permutations([start, running, complete]))
    for n, order in enumerate(orders):  # each order its own run and job, all in one batch
        run_id, job = str(uuid.uuid4()), {"namespace": ev.JOB[0], "name": f"rollup_{n}"}
        for payload in order:
            receive({**payload, "run": {"runId": run_id}, "job": job})
    assert process().by_state == {"processed": 3 * len(orders)}

    def final_state(job: Job) -> tuple:
        run = LineageRun.objects.values_list(
            "state", "started_at", "ended_at", "last_event_at"
        ).get(job=job)
        usage = DatasetUsage.objects.filter(job=job).values_list(
            "dataset_name", "direction", "first_seen_at", "last_seen_at", "run_count"
        )
        return run, tuple(sorted(usage)), (job.first_seen_at, job.last_seen_at)

    states = {final_state(job) for job in Job.objects.all()}
    assert len(states) == 1
    [(run, usage, _)] = states
    assert run[:3] == (
        "complete",
        datetime(2026, 11, 28, 6, 0, tzinfo=UTC),
        datetime(2026, 11, 28, 6, 5, tzinfo=UTC),
    )
    assert [u[4] for u in usage] == [1, 1, 1]


def test_a_batch_is_applied_in_transactions_of_at_most_so_many_events(receive, monkeypatch):
    monkeypatch.setattr(processing, "EVENTS_PER_TRANSACTION", 2)
    for n in range(5):
        receive(ev.run_event("START", run_id=str(uuid.uuid4()), event_time=f"2026-11-2{n}T00:00Z"))
    claims = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    with CaptureQueriesContext(connection) as captured:
        states = processing.lineage_events_process_claimed(claims=claims, now=NOW)
    assert set(states.values()) == {"processed"} and len(states) == 5
    locks = [q["sql"] for q in captured.captured_queries if "FOR UPDATE OF" in q["sql"]]
    assert len(locks) == 3


def test_job_events_state_static_lineage_and_the_latest_replaces_it(receive, process, team_a):
    def job_event(at: str, outputs: list[dict]) -> dict:
        return {
            "eventTime": at,
            "job": {"namespace": "airflow://team-a", "name": "declared_job"},
            "inputs": [ORDERS],
            "outputs": outputs,
            "producer": ev.PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        }

    receive(job_event("2026-11-28T06:00:00Z", [ev.dataset("s3://lake", "marts/a")]))
    process()
    stated = lambda: sorted(  # noqa: E731
        StaticLineage.objects.filter(job__isnull=False).values_list(
            "direction", "dataset_name", "verified"
        )
    )
    assert stated() == [("read", "shop.public.orders", True), ("write", "marts/a", True)]
    receive(job_event("2026-11-28T07:00:00Z", []))
    receive(job_event("2026-11-28T05:00:00Z", [ev.dataset("s3://lake", "marts/old")]))
    process()
    assert stated() == [("read", "shop.public.orders", True)]  # the older one changes nothing
    assert not DatasetUsage.objects.exists()


def test_a_dataset_event_states_its_dataset_with_no_job(receive, process):
    receive(
        {
            "eventTime": "2026-11-28T06:00:00Z",
            "dataset": ev.dataset("S3://Lake", "raw/orders"),
            "producer": ev.PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        }
    )
    process()
    row = StaticLineage.objects.get()
    assert (row.job, row.dataset_namespace, row.dataset_name, row.direction) == (
        None,
        "s3://lake",
        "raw/orders",
        "",
    )
