"""A dataset named by lineage under another spelling the OpenLineage naming spec makes
equal (``s3a://``, slashes around an object key, an upper-case bucket) is the catalog
dataset: a declared read of it is not an undeclared read, its usage is one row, and the
Marquez-compatible API shows it under its one name."""

from __future__ import annotations

import pytest

from catalog import selectors
from catalog.models import Claim, DatasetAlias, DatasetUsage
from lineage.marquez import reads
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

LAKE = ("s3://lake", "sales/orders")
READER_JOB = ("airflow://team-b", "reports.daily")
SPELLINGS = [
    ("s3a://lake", "sales/orders"),
    ("s3n://lake", "/sales/orders/"),
    ("S3://LAKE/", "sales/orders/"),
]


@pytest.fixture
def team_b(db):
    team = TeamFactory(slug="team-b")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=READER_JOB[0])
    return team


@pytest.fixture
def orders(team_a):
    return DatasetFactory(owner=team_a, namespace=LAKE[0], name=LAKE[1])


def _read(receive, team, identity, run: int) -> None:
    receive(
        ev.run_event(
            "COMPLETE",
            run_id=f"0195f6d2-9c4a-7b1e-8a55-{run:012x}",
            job=READER_JOB,
            inputs=[ev.dataset(*identity)],
        ),
        team=team,
    )


def test_a_declared_read_under_another_spelling_is_declared(receive, process, orders, team_b):
    SubscriptionFactory(team=team_b, dataset=orders, endpoint=None)
    for run, spelling in enumerate(SPELLINGS, start=1):
        _read(receive, team_b, spelling, run)
    process()

    assert not selectors.undeclared_reads_list(team=team_b).exists()
    [row] = DatasetUsage.objects.filter(team=team_b)
    assert ((row.dataset_namespace, row.dataset_name), row.dataset, row.run_count) == (
        LAKE,
        orders,
        3,
    )
    kept = set(DatasetAlias.objects.values_list("alias_namespace", "alias_name"))
    assert kept == set(SPELLINGS)  # what the jobs sent, for tracing


def test_an_undeclared_read_under_another_spelling_is_reported_as_the_dataset(
    receive, process, orders, team_b
):
    _read(receive, team_b, ("s3a://lake", "/sales/orders"), 1)
    process()
    [row] = selectors.undeclared_reads_list(team=team_b)
    assert row.dataset == orders


def test_marquez_reads_show_one_dataset_under_its_normal_name(receive, process, orders, team_b):
    for run, spelling in enumerate(SPELLINGS, start=1):
        _read(receive, team_b, spelling, run)
    process()
    names = [
        (d["namespace"], d["name"])
        for d in reads.dataset_list(namespace="s3://lake", limit=100, offset=0)[1]
    ]
    assert names == [LAKE]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/s3a%3A%2F%2Flake/datasets",
        "/api/v1/namespaces/S3%3A%2F%2FLake/datasets",
    ],
)
def test_marquez_api_lists_a_namespace_named_in_another_spelling(
    receive, process, orders, team_b, client_for, path
):
    _read(receive, team_b, ("s3a://lake", "/sales/orders"), 1)
    process()
    response = client_for(team_b).get(path)
    assert response.status_code == 200, response.content
    assert [(d["namespace"], d["name"]) for d in response.json()["datasets"]] == [LAKE]


def test_marquez_api_reads_a_dataset_named_in_another_spelling(
    receive, process, orders, team_b, client_for
):
    _read(receive, team_b, LAKE, 1)
    process()
    response = client_for(team_b).get(
        "/api/v1/namespaces/s3a%3A%2F%2Flake/datasets/%2Fsales%2Forders%2F"
    )
    assert response.status_code == 200, response.content
    assert (response.json()["namespace"], response.json()["name"]) == LAKE
