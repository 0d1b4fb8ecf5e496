"""GET /api/v1/lineage/graph: datasets and jobs around a dataset or a job, from observed
usage, over the chain a -> job1 -> b -> job2 -> c."""

from __future__ import annotations

import json
import uuid

import pytest

from catalog.models import Claim
from lineage.services import processing
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

URL = "/api/v1/lineage/graph"
NS = "s3://lake"
A, B, C = (ev.dataset(NS, n) for n in ("chain/a", "chain/b", "chain/c"))
JOB1, JOB2, JOB3 = ((ev.JOB[0], n) for n in ("job1", "job2", "job3"))


def node(kind: str, namespace: str, name: str) -> str:
    return f"{kind}:{namespace}:{name}"


NA, NB, NC = (node("dataset", NS, d["name"]) for d in (A, B, C))
NJ1, NJ2, NJ3 = (node("job", *j) for j in (JOB1, JOB2, JOB3))


def run(client, job, inputs, outputs, runs: int = 1) -> None:
    for _ in range(runs):
        event = ev.run_event(
            "COMPLETE", run_id=str(uuid.uuid4()), job=job, inputs=inputs, outputs=outputs
        )
        response = client.post(
            "/api/v1/lineage", data=json.dumps(event), content_type="application/json"
        )
        assert response.status_code == 201, response.json()
    processing.lineage_events_process_due()


@pytest.fixture
def chain(client_for):
    """team-a's job1 reads a and writes b (twice), job2 reads b and writes c; b is
    registered; team-b reports job3 reading c in team-a's namespace (unverified)."""
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    key = client_for(team, scopes=["lineage", "read"])
    run(key, JOB1, [A], [B], runs=2)
    run(key, JOB2, [B], [C])
    run(client_for(TeamFactory(slug="team-b"), scopes=["lineage"]), JOB3, [C], [])
    registered = DatasetFactory(owner=team, namespace=NS, name=B["name"])
    return key, registered


def graph(key, **params):
    response = key.get(URL, params)
    assert response.status_code == 200, response.json()
    body = response.json()
    return (
        body,
        {n["id"] for n in body["nodes"]},
        {(e["source"], e["target"]) for e in body["edges"]},
    )


def test_graph_around_a_dataset_both_ways(chain, django_assert_max_num_queries):
    key, b = chain
    with django_assert_max_num_queries(5):  # key, root, one level each way, last_used_at
        body, nodes, edges = graph(key, namespace=NS, name=B["name"], depth=1)
    assert body["root"] == NB
    assert body["truncated"] is False
    assert nodes == {NA, NJ1, NB, NJ2, NC}
    assert edges == {(NA, NJ1), (NJ1, NB), (NB, NJ2), (NJ2, NC)}
    by_id = {n["id"]: n for n in body["nodes"]}
    assert by_id[NB] == {
        "id": NB,
        "type": "dataset",
        "namespace": NS,
        "name": B["name"],
        "catalogued": True,
        "dataset_id": b.pk,
    }
    assert (by_id[NA]["catalogued"], by_id[NA]["dataset_id"]) == (False, None)
    assert by_id[NJ1] == {
        "id": NJ1,
        "type": "job",
        "namespace": JOB1[0],
        "name": JOB1[1],
        "team": "team-a",
    }
    [write] = [e for e in body["edges"] if e["source"] == NJ1]
    assert (write["direction"], write["run_count"], write["verified"]) == ("write", 2, True)
    assert write["last_seen"] == "2026-11-28T06:00:00Z"
    [read] = [e for e in body["edges"] if e["target"] == NJ2]
    assert (read["direction"], read["run_count"]) == ("read", 1)


@pytest.mark.parametrize(
    ("params", "nodes"),
    [
        ({"name": A["name"], "direction": "downstream", "depth": 1}, {NA, NJ1, NB}),
        ({"name": A["name"], "direction": "downstream"}, {NA, NJ1, NB, NJ2, NC}),
        ({"name": A["name"], "direction": "upstream"}, {NA}),
        ({"name": C["name"], "direction": "upstream", "depth": 1}, {NC, NJ2, NB}),
        ({"name": C["name"], "direction": "upstream", "depth": 5}, {NC, NJ2, NB, NJ1, NA}),
        ({"name": C["name"], "direction": "downstream"}, {NC}),
        ({"job_name": JOB1[1], "direction": "downstream", "depth": 1}, {NJ1, NB}),
        ({"job_name": JOB1[1], "direction": "downstream"}, {NJ1, NB, NJ2, NC}),
        ({"job_name": JOB1[1], "direction": "upstream"}, {NJ1, NA}),
        ({"job_name": JOB2[1], "depth": 1}, {NB, NJ2, NC}),
        ({"job_name": JOB2[1]}, {NA, NJ1, NB, NJ2, NC}),
    ],
)
def test_graph_walks_to_its_depth_in_its_direction(chain, params, nodes):
    key, _ = chain
    ns = {"job_namespace": ev.JOB[0]} if "job_name" in params else {"namespace": NS}
    _, found, _ = graph(key, **ns, **params)
    assert found == nodes


def test_graph_adds_unverified_edges_only_when_asked_and_marks_them(chain):
    key, _ = chain
    _, nodes, _ = graph(key, namespace=NS, name=C["name"], direction="downstream")
    assert nodes == {NC}
    body, nodes, _ = graph(
        key, namespace=NS, name=C["name"], direction="downstream", include_unverified="true"
    )
    assert nodes == {NC, NJ3}
    [edge] = body["edges"]
    assert (edge["source"], edge["target"], edge["verified"]) == (NC, NJ3, False)
    [job3] = [n for n in body["nodes"] if n["id"] == NJ3]
    assert job3["team"] is None


def test_graph_queries_are_one_per_level_not_per_node(client_for, django_assert_max_num_queries):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    key = client_for(team, scopes=["lineage", "read"])
    # A fan-out: 6 jobs each read the root and write 3 datasets, each read by 1 job.
    root = ev.dataset(NS, "fan/root")
    for i in range(6):
        outs = [ev.dataset(NS, f"fan/{i}_{j}") for j in range(3)]
        run(key, (ev.JOB[0], f"fan{i}"), [root], outs)
        for j, out in enumerate(outs):
            run(key, (ev.JOB[0], f"leaf{i}_{j}"), [out], [ev.dataset(NS, f"leaf/{i}_{j}")])
    # key, root, root usage (unregistered), 2 levels, last_used_at
    with django_assert_max_num_queries(6):
        _, nodes, edges = graph(key, namespace=NS, name="fan/root", direction="downstream")
    assert len(nodes) == 1 + 6 + 18 + 18 + 18
    assert len(edges) == 6 + 18 + 18 + 18


def test_graph_root_must_exist_and_parameters_are_checked(chain, client_for):
    key, _ = chain
    response = key.get(URL, {"namespace": NS, "name": "nowhere"})
    assert (response.status_code, response.json()["code"]) == (404, "lineage_node_not_found")
    response = key.get(URL, {"job_namespace": "dbt", "job_name": "nothing"})
    assert (response.status_code, response.json()["code"]) == (404, "lineage_node_not_found")
    for params, field in [
        ({"namespace": NS, "name": B["name"], "depth": 6}, "depth"),
        ({"namespace": NS, "name": B["name"], "direction": "sideways"}, "direction"),
        ({"namespace": NS}, "name"),
        ({}, "namespace"),
        ({"namespace": NS, "name": B["name"], "job_namespace": "x", "job_name": "y"}, "namespace"),
    ]:
        response = key.get(URL, params)
        assert response.status_code == 400, params
        assert [e["field"] for e in response.json()["errors"]] == [field], params
    assert client_for(TeamFactory(slug="x"), scopes=["lineage"]).get(URL).status_code == 403
