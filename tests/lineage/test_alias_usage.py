"""Usage through a declared alias (a ``symlinks`` facet) counts as usage of the canonical
dataset everywhere: the undeclared-reads report, the lineage graph, consumer lists and
stale-declaration checks, whether the alias was declared before or after the reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from catalog import selectors
from catalog.models import Claim, DatasetUsage
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.lineage import events as ev

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
