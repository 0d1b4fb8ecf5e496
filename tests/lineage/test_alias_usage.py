"""Usage through a declared alias (a ``symlinks`` facet) counts as usage of the canonical
dataset everywhere: the undeclared-reads report, the lineage graph, consumer lists and
stale-declaration checks, whether the alias was declared before or after the reads."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from catalog import selectors
from catalog.models import Claim, DatasetUsage, Job, Subscription
from lineage import collectors, tasks
from lineage.models import LineageRun, LineageRunEdge
from lineage.services import collecting
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.lineage import events as ev

from .conftest import NOW

pytestmark = pytest.mark.django_db

LAKE = ("s3://lake", "sales/orders")  # the catalog dataset
TABLE = ("hive://metastore:9083", "sales.orders")  # its alias
READER_JOB = ("airflow://team-b", "reports.daily")
RUNS = iter(f"0195f6d2-9c4a-7b1e-8a55-{n:012x}" for n in range(1, 10_000))


def declare_alias(receive) -> None:
    """The owner's verified event declares TABLE an alias of LAKE."""
    facet = {
        "_producer": ev.PRODUCER,
        "identifiers": [{"namespace": TABLE[0], "name": TABLE[1], "type": "TABLE"}],
    }
    receive(
        ev.run_event(
            "COMPLETE", run_id=next(RUNS), outputs=[ev.dataset(*LAKE, facets={"symlinks": facet})]
        )
    )


def read(receive, team, identity, *, day: int = 28) -> None:
    receive(
        ev.run_event(
            "COMPLETE",
            run_id=next(RUNS),
            job=READER_JOB,
            event_time=f"2026-11-{day}T06:00:00Z",
            inputs=[ev.dataset(*identity)],
        ),
        team=team,
    )


@pytest.fixture
def orders(team_a):
    return DatasetFactory(owner=team_a, namespace=LAKE[0], name=LAKE[1])


@pytest.fixture
def team_b(db):
    team = TeamFactory(slug="team-b")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=READER_JOB[0])
    return team


@pytest.mark.parametrize("declared", ["before", "after"])
def test_reads_through_an_alias_are_one_report_row_and_one_graph_edge_of_the_dataset(
    receive, process, orders, team_b, declared
):
    if declared == "before":
        declare_alias(receive)
        process()
    read(receive, team_b, LAKE, day=26)
    read(receive, team_b, TABLE, day=27)
    read(receive, team_b, TABLE, day=28)
    process()
    if declared == "after":
        declare_alias(receive)
        process()

    [row] = selectors.undeclared_reads_list(team=team_b)
    assert (row.dataset, row.job.name, row.run_count) == (orders, READER_JOB[1], 3)
    assert (row.first_seen_at.day, row.last_seen_at.day) == (26, 28)

    graph = selectors.lineage_graph(dataset=LAKE, direction="downstream", depth=1)
    assert {node["id"] for node in graph["nodes"]} == {
        f"dataset:{LAKE[0]}:{LAKE[1]}",
        f"job:{READER_JOB[0]}:{READER_JOB[1]}",
    }
    [edge] = graph["edges"]
    assert (edge["source"], edge["run_count"]) == (f"dataset:{LAKE[0]}:{LAKE[1]}", 3)


@pytest.mark.parametrize("declared", ["before", "after"])
def test_a_team_reading_only_through_the_alias_is_a_consumer_and_its_subscription_not_stale(
    receive, process, orders, team_b, declared
):
    subscription = SubscriptionFactory(team=team_b, dataset=orders, endpoint=None)
    Subscription.objects.filter(pk=subscription.pk).update(created_at=NOW - timedelta(days=90))
    if declared == "before":
        declare_alias(receive)
        process()
    read(receive, team_b, TABLE, day=27)
    process()
    if declared == "after":
        declare_alias(receive)
        process()

    assert list(selectors.dataset_consumer_teams(dataset=orders)) == [team_b]
    assert not selectors.stale_declarations_list(team=team_b, days=30, now=NOW).exists()
    [row] = DatasetUsage.objects.filter(team=team_b)
    assert ((row.dataset_namespace, row.dataset_name), row.dataset) == (LAKE, orders)


def test_a_run_that_read_the_dataset_and_its_alias_before_the_declaration_counts_once(
    receive, process, orders, team_b
):
    both = next(RUNS)
    for identity in (LAKE, TABLE):  # two events of one run, one naming each identity
        receive(
            ev.run_event("RUNNING", run_id=both, job=READER_JOB, inputs=[ev.dataset(*identity)]),
            team=team_b,
        )
    read(receive, team_b, TABLE, day=27)  # another run, through the alias only
    process()
    assert DatasetUsage.objects.filter(team=team_b).count() == 2
    declare_alias(receive)
    process()

    [row] = DatasetUsage.objects.filter(team=team_b)
    assert ((row.dataset_namespace, row.dataset_name), row.run_count) == (LAKE, 2)
    runs = set(LineageRunEdge.objects.filter(usage=row).values_list("run__run_id", flat=True))
    assert len(runs) == 2 and uuid.UUID(both) in runs  # one edge per run
    # A later event of the run naming the alias adds no run: the run's edge is the row's.
    receive(
        ev.run_event("COMPLETE", run_id=both, job=READER_JOB, inputs=[ev.dataset(*TABLE)]),
        team=team_b,
    )
    process()
    row.refresh_from_db()
    assert row.run_count == 2


def test_an_event_naming_the_dataset_and_its_alias_records_one_row_and_one_run(
    receive, process, orders, team_b
):
    declare_alias(receive)
    process()
    receive(
        ev.run_event(
            "COMPLETE",
            run_id=next(RUNS),
            job=READER_JOB,
            inputs=[ev.dataset(*LAKE), ev.dataset(*TABLE)],
        ),
        team=team_b,
    )
    process()
    [row] = DatasetUsage.objects.filter(team=team_b)
    assert (row.dataset, row.run_count) == (orders, 1)


def test_verified_and_unverified_reads_through_the_alias_fold_apart(
    receive, process, orders, team_b
):
    stranger = TeamFactory(slug="stranger")  # claims nothing: its reports are unverified
    read(receive, team_b, TABLE, day=27)
    read(receive, stranger, TABLE, day=28)
    process()
    declare_alias(receive)
    process()
    rows = {
        (u.team.slug, u.verified, u.dataset_name, u.run_count)
        for u in DatasetUsage.objects.exclude(team__slug="team-a")
    }
    assert rows == {("team-b", True, LAKE[1], 1), ("stranger", False, LAKE[1], 1)}


def test_the_sweep_folds_what_a_transaction_that_missed_the_declaration_recorded(
    receive, process, orders, team_b
):
    declare_alias(receive)
    read(receive, team_b, LAKE, day=26)
    process()
    # As a concurrent transaction that had not yet seen the alias would have recorded it.
    job = Job.objects.get(name=READER_JOB[1])
    run = LineageRun.objects.create(run_id=uuid.uuid4(), job=job, team=team_b, verified=True)
    missed = DatasetUsage.objects.create(
        job=job,
        dataset_namespace=TABLE[0],
        dataset_name=TABLE[1],
        direction="read",
        team=team_b,
        verified=True,
        first_seen_at=NOW - timedelta(days=1),
        last_seen_at=NOW - timedelta(days=1),
        run_count=1,
    )
    LineageRunEdge.objects.create(run=run, usage=missed)

    assert tasks.fold_alias_usage() == "1 folded"
    [row] = DatasetUsage.objects.filter(team=team_b)
    assert ((row.dataset_namespace, row.dataset_name), row.run_count) == (LAKE, 2)
    assert row.last_seen_at == NOW - timedelta(days=1)
    assert LineageRunEdge.objects.filter(usage=row).count() == 2
    assert tasks.fold_alias_usage() == "0 folded"  # nothing left: a no-op


def test_a_dataset_registered_later_under_the_alias_is_itself(receive, process, orders, team_b):
    declare_alias(receive)
    read(receive, team_b, TABLE, day=26)
    process()
    table = DatasetFactory(namespace=TABLE[0], name=TABLE[1])
    read(receive, team_b, TABLE, day=27)
    process()
    assert tasks.fold_alias_usage() == "0 folded"
    rows = {(u.dataset_id, u.run_count) for u in DatasetUsage.objects.filter(team=team_b)}
    assert rows == {(orders.pk, 1), (table.pk, 1)}


class _FixedSource:
    """A collector whose source saw ``reporting`` read the dataset and its alias."""

    name, job_namespace = "fixed", "postgres://warehouse:5432"

    def collect(self, *, cursor, now) -> collectors.Collection:
        accesses = [
            collectors.ObservedAccess("reporting", *identity, "read", now, 3)
            for identity in (LAKE, TABLE)
        ]
        return collectors.Collection(accesses=accesses, cursor={})


def test_a_collectors_accesses_of_a_dataset_and_its_alias_add_up(
    receive, process, orders, team_b, monkeypatch, settings
):
    declare_alias(receive)
    process()
    settings.TIDEMARK_LINEAGE_COLLECTORS = {"fixed": {"kind": "fixed"}}
    monkeypatch.setattr(collectors, "build", lambda name, config: _FixedSource())
    Claim.objects.create(
        team=team_b, kind=Claim.Kind.DB_ROLE, pattern="postgres://warehouse:5432/reporting"
    )
    summary = collecting.collector_run(name="fixed", now=NOW)
    assert summary.recorded == 1
    [row] = DatasetUsage.objects.filter(team=team_b)
    assert (row.dataset, row.run_count) == (orders, 6)
