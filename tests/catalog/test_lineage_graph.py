"""catalog.lineage_graph: pure assembly of the lineage graph from usage rows (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from catalog import lineage_graph as graph

T1 = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
T2 = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
A, B, C = ("s3://lake", "a"), ("s3://lake", "b"), ("s3://lake", "c")


def edge(usage_id, job_id, dataset, direction, *, runs=1, at=T1, verified=True, team="t"):
    return graph.Edge(
        usage_id=usage_id,
        job_id=job_id,
        job_namespace="airflow://t",
        job_name=f"job{job_id}",
        job_team=team,
        dataset_namespace=dataset[0],
        dataset_name=dataset[1],
        dataset_id=None,
        direction=direction,
        verified=verified,
        run_count=runs,
        last_seen_at=at,
    )


# job1 reads a, writes b; job2 reads b, writes c.
CHAIN = [
    edge(1, 1, A, graph.READ),
    edge(2, 1, B, graph.WRITE),
    edge(3, 2, B, graph.READ),
    edge(4, 2, C, graph.WRITE),
]


@pytest.mark.parametrize(
    ("walk", "datasets", "jobs", "reached", "edges"),
    [
        (graph.DOWNSTREAM, {A}, set(), {B}, (1, 2)),
        (graph.DOWNSTREAM, {B}, set(), {C}, (3, 4)),
        (graph.UPSTREAM, {B}, set(), {A}, (1, 2)),
        (graph.UPSTREAM, {A}, set(), set(), ()),
        (graph.DOWNSTREAM, set(), {1}, {B}, (2,)),
        (graph.UPSTREAM, set(), {2}, {B}, (3,)),
    ],
)
def test_level_follows_one_job_hop_in_its_direction(walk, datasets, jobs, reached, edges):
    g = graph.Graph(root="r")
    found, _ = graph.level(g, CHAIN, walk=walk, datasets=datasets, jobs=jobs)
    assert found == reached
    assert tuple(sorted(g.usages)) == edges  # the usage rows it took as edges


def test_edges_of_one_job_dataset_and_direction_merge():
    g = graph.Graph(root="r")
    g.add(edge(1, 1, A, graph.READ, runs=2, at=T1, verified=False, team=None))
    g.add(edge(2, 1, A, graph.READ, runs=3, at=T2, verified=True, team="t"))
    g.add(edge(2, 1, A, graph.READ, runs=3, at=T2))  # the same row met again: once
    [merged] = g.as_dict()["edges"]
    assert merged == {
        "source": "dataset:s3://lake:a",
        "target": "job:airflow://t:job1",
        "direction": "read",
        "run_count": 5,
        "last_seen": T2,
        "verified": True,
    }
    job = g.nodes["job:airflow://t:job1"]
    assert job["team"] == "t"


def test_writes_point_from_job_to_dataset_and_catalogued_datasets_say_so():
    g = graph.Graph(root="r")
    g.add(edge(1, 1, B, graph.WRITE))
    g.add_dataset(*B, 42)
    body = g.as_dict()
    assert [(e["source"], e["target"]) for e in body["edges"]] == [
        ("job:airflow://t:job1", "dataset:s3://lake:b")
    ]
    [dataset] = [n for n in body["nodes"] if n["type"] == "dataset"]
    assert (dataset["catalogued"], dataset["dataset_id"]) == (True, 42)
