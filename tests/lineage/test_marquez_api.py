"""The Marquez-compatible read API, read by the real ``marquez-python`` client (unchanged)
from a live Tidemark server, after the real ``openlineage-python`` client sent a run's
events to the same server and a lineage worker processed them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import requests
from marquez_client import MarquezClient
from marquez_client import client as marquez_client_module
from marquez_client.errors import APIError
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    documentation_job,
    nominal_time_run,
    schema_dataset,
    source_code_location_job,
)

from catalog.models import ApiKey, Claim
from lineage.models import LineageEvent
from lineage.services import processing
from tests.catalog.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the live server commits for real

PRODUCER = "https://github.com/example/pipelines/tree/main/orders"
JOB_NS, JOB_NAME = "airflow://team-a", "orders.daily_rollup"
IN_NS, IN_NAME = "postgres://warehouse:5432", "shop.public.orders"
OUT_NS, OUT_NAME = "s3://lake", "marts/daily_orders"
RUN_ID = str(uuid.uuid4())


@pytest.fixture
def headers() -> Iterator[None]:
    """The client keeps its headers in a module global that an ``api_key`` writes into:
    restored after each test so one test's key does not leak into the next."""
    saved = dict(marquez_client_module._HEADERS)
    yield
    marquez_client_module._HEADERS.clear()
    marquez_client_module._HEADERS.update(saved)


@pytest.fixture
def world(live_server, make_key, headers) -> dict:
    """Team ``team-a`` claims the job namespace and reports one run (START, COMPLETE)
    that reads a warehouse table and writes a lake path, with schema, column lineage,
    nominal time, documentation and source location facets; processed."""
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=JOB_NS)
    lineage_key = make_key(team, [ApiKey.Scope.LINEAGE])
    saved = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
    os.environ.update(OPENLINEAGE_URL=live_server.url, OPENLINEAGE_API_KEY=lineage_key)
    try:
        _emit_run(OpenLineageClient())
    finally:
        for name in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
            del os.environ[name]
        os.environ.update(saved)
    processing.lineage_events_process_due()
    assert set(LineageEvent.objects.values_list("state", flat=True)) == {"processed"}
    return {"team": team, "read_key": make_key(team, [ApiKey.Scope.READ]), "url": live_server.url}


def _emit_run(client: OpenLineageClient) -> None:
    schema_in = schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name="order_id", type="bigint"),
            schema_dataset.SchemaDatasetFacetFields(name="amount", type="numeric"),
        ]
    )
    schema_out = schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name="total", type="numeric")]
    )
    columns = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "total": column_lineage_dataset.Fields(
                inputFields=[
                    column_lineage_dataset.InputField(
                        namespace=IN_NS,
                        name=IN_NAME,
                        field="amount",
                        transformations=[
                            column_lineage_dataset.Transformation(
                                type="INDIRECT", subtype="AGGREGATION", description="sum"
                            )
                        ],
                    )
                ]
            )
        }
    )
    run = Run(
        runId=RUN_ID,
        facets={
            "nominalTime": nominal_time_run.NominalTimeRunFacet(
                nominalStartTime="2026-11-27T00:00:00Z", nominalEndTime="2026-11-28T00:00:00Z"
            )
        },
    )
    job = Job(
        namespace=JOB_NS,
        name=JOB_NAME,
        facets={
            "documentation": documentation_job.DocumentationJobFacet(description="Daily rollup"),
            "sourceCodeLocation": source_code_location_job.SourceCodeLocationJobFacet(
                type="git", url="https://github.com/example/pipelines"
            ),
        },
    )
    inputs = [InputDataset(namespace=IN_NS, name=IN_NAME, facets={"schema": schema_in})]
    outputs = [
        OutputDataset(
            namespace=OUT_NS,
            name=OUT_NAME,
            facets={"schema": schema_out, "columnLineage": columns},
        )
    ]
    for event_type, at in ((RunState.START, "06:00:00"), (RunState.COMPLETE, "06:05:00.250")):
        client.emit(
            RunEvent(
                eventType=event_type,
                eventTime=f"2026-11-28T{at}+00:00",
                run=run,
                job=job,
                producer=PRODUCER,
                inputs=inputs,
                outputs=outputs if event_type == RunState.COMPLETE else [],
            )
        )
    client.close()


def test_marquez_python_reads_namespaces_datasets_and_versions(world):
    client = MarquezClient(url=world["url"], api_key=world["read_key"])

    names = [n["name"] for n in client.list_namespaces()["namespaces"]]
    assert names == sorted([JOB_NS, IN_NS, OUT_NS])
    namespace = client.get_namespace(JOB_NS)
    assert (namespace["name"], namespace["ownerName"]) == (JOB_NS, "team-a")
    assert namespace["createdAt"] == "2026-11-28T06:00:00Z"

    listed = client.list_datasets(OUT_NS)
    assert listed["totalCount"] == 1
    assert listed["datasets"][0]["id"] == {"namespace": OUT_NS, "name": OUT_NAME}

    dataset = client.get_dataset(OUT_NS, OUT_NAME)  # a name with a slash, %2F-encoded
    assert dataset["type"] == "DB_TABLE"
    assert dataset["fields"] == [
        {"name": "total", "type": "numeric", "tags": [], "description": None}
    ]
    assert dataset["currentVersion"] == RUN_ID
    assert dataset["lastModifiedAt"] == "2026-11-28T06:05:00.250000Z"
    assert set(dataset["facets"]) == {"schema", "columnLineage"}

    read = client.get_dataset(IN_NS, IN_NAME)
    assert [f["name"] for f in read["fields"]] == ["order_id", "amount"]
    assert read["currentVersion"] is None  # read, never written

    versions = client.list_dataset_versions(OUT_NS, OUT_NAME)
    assert versions["totalCount"] == 1
    version = versions["versions"][0]
    assert version["id"] == {"namespace": OUT_NS, "name": OUT_NAME, "version": RUN_ID}
    assert version["createdByRun"]["id"] == RUN_ID
    assert client.get_dataset_version(OUT_NS, OUT_NAME, RUN_ID)["version"] == RUN_ID
    with pytest.raises(APIError):
        client.get_dataset_version(OUT_NS, OUT_NAME, str(uuid.uuid4()))
    with pytest.raises(APIError):
        client.get_dataset(OUT_NS, "marts/nothing")


def test_marquez_python_reads_jobs_and_runs(world):
    client = MarquezClient(url=world["url"], api_key=world["read_key"])

    jobs = client.list_jobs(JOB_NS)
    assert jobs["totalCount"] == 1
    job = client.get_job(JOB_NS, JOB_NAME)
    assert job["id"] == {"namespace": JOB_NS, "name": JOB_NAME}
    assert job["inputs"] == [{"namespace": IN_NS, "name": IN_NAME}]
    assert job["outputs"] == [{"namespace": OUT_NS, "name": OUT_NAME}]
    assert job["description"] == "Daily rollup"
    assert job["location"] == "https://github.com/example/pipelines"
    assert (job["latestRun"]["id"], job["latestRun"]["state"]) == (RUN_ID, "COMPLETED")

    runs = client.list_job_runs(JOB_NS, JOB_NAME)
    assert runs["totalCount"] == 1
    run = client.get_job_run(RUN_ID)
    assert run == runs["runs"][0]
    assert run["startedAt"] == "2026-11-28T06:00:00Z"
    assert run["endedAt"] == "2026-11-28T06:05:00.250000Z"
    assert run["durationMs"] == 300_250
    assert run["nominalStartTime"] == "2026-11-27T00:00:00Z"
    assert run["facets"]["nominalTime"]["nominalEndTime"] == "2026-11-28T00:00:00Z"
    assert "documentation" not in run["facets"]  # a job facet, not a run facet
    assert run["outputDatasetVersions"] == [
        {
            "datasetVersionId": {"namespace": OUT_NS, "name": OUT_NAME, "version": RUN_ID},
            "facets": {},
        }
    ]
    assert run["inputDatasetVersions"][0]["datasetVersionId"]["version"] is None
    with pytest.raises(APIError):
        client.get_job_run(str(uuid.uuid4()))


def test_marquez_python_reads_column_lineage(world):
    client = MarquezClient(url=world["url"], api_key=world["read_key"])

    graph = client.get_column_lineage_by_dataset(OUT_NS, OUT_NAME)["graph"]
    by_id = {node["id"]: node for node in graph}
    total = f"datasetField:{OUT_NS}:{OUT_NAME}:total"
    amount = f"datasetField:{IN_NS}:{IN_NAME}:amount"
    assert set(by_id) == {total, amount}
    assert by_id[total]["type"] == "DATASET_FIELD"
    assert by_id[total]["data"]["fieldType"] == "numeric"
    assert by_id[total]["inEdges"] == [{"origin": amount, "destination": total}]
    assert by_id[amount]["outEdges"] == [{"origin": amount, "destination": total}]
    inputs = by_id[total]["data"]["inputFields"]
    assert [(i["dataset"], i["field"], i["transformationType"]) for i in inputs] == [
        (IN_NAME, "amount", "INDIRECT")
    ]
    # Downstream from the input field reaches the output's field.
    down = client.get_column_lineage_by_dataset_field(
        IN_NS, IN_NAME, "amount", with_downstream=True
    )
    assert {node["id"] for node in down["graph"]} == {total, amount}


def test_lineage_graph_and_search_as_marquez_serves_them(world):
    auth = {"Authorization": f"Bearer {world['read_key']}"}
    response = requests.get(
        f"{world['url']}/api/v1/lineage",
        params={"nodeId": f"dataset:{OUT_NS}:{OUT_NAME}", "depth": 2},
        headers=auth,
        timeout=10,
    )
    assert response.status_code == 200, response.text
    nodes = {node["id"]: node for node in response.json()["graph"]}
    job_id = f"job:{JOB_NS}:{JOB_NAME}"
    out_id, in_id = f"dataset:{OUT_NS}:{OUT_NAME}", f"dataset:{IN_NS}:{IN_NAME}"
    assert set(nodes) == {job_id, out_id, in_id}
    assert nodes[job_id]["type"] == "JOB"
    assert nodes[job_id]["inEdges"] == [{"origin": in_id, "destination": job_id}]
    assert nodes[job_id]["outEdges"] == [{"origin": job_id, "destination": out_id}]
    assert nodes[job_id]["data"]["latestRun"]["id"] == RUN_ID
    assert nodes[out_id]["data"]["fields"][0]["name"] == "total"

    found = requests.get(
        f"{world['url']}/api/v1/search", params={"q": "daily"}, headers=auth, timeout=10
    ).json()
    assert found["totalCount"] == 2
    assert {(r["type"], r["nodeId"]) for r in found["results"]} == {
        ("JOB", job_id),
        ("DATASET", out_id),
    }
    jobs_only = requests.get(
        f"{world['url']}/api/v1/search",
        params={"q": "DAILY", "filter": "JOB"},
        headers=auth,
        timeout=10,
    ).json()
    assert [r["name"] for r in jobs_only["results"]] == [JOB_NAME]

    missing = requests.get(
        f"{world['url']}/api/v1/lineage",
        params={"nodeId": "dataset:s3://lake:nothing"},
        headers=auth,
        timeout=10,
    )
    assert missing.status_code == 404
    assert missing.json()["code"] == "marquez_not_found"
    bad = requests.get(
        f"{world['url']}/api/v1/lineage", params={"nodeId": "table:x:y"}, headers=auth, timeout=10
    )
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "nodeId"


def test_keys_scopes_and_the_public_setting(world, make_key, settings):
    anonymous = MarquezClient(url=world["url"])
    with pytest.raises(APIError) as refused:
        anonymous.get_job(JOB_NS, JOB_NAME)
    assert refused.value.__cause__.response.status_code == 401

    lineage_only = make_key(world["team"], [ApiKey.Scope.LINEAGE], name="writer")
    response = requests.get(
        f"{world['url']}/api/v1/namespaces",
        headers={"Authorization": f"Bearer {lineage_only}"},
        timeout=10,
    )
    assert response.status_code == 403

    # Another team's read key sees the job and the graph, not team-a's runs.
    other = make_key(TeamFactory(slug="sales"), [ApiKey.Scope.READ], name="reader")
    outsider = MarquezClient(url=world["url"], api_key=other)
    assert outsider.get_job(JOB_NS, JOB_NAME)["latestRun"] is None
    with pytest.raises(APIError):
        outsider.get_job_run(RUN_ID)

    settings.TIDEMARK_MARQUEZ_API_PUBLIC = True
    marquez_client_module._HEADERS.pop("Authorization")
    assert anonymous.get_job(JOB_NS, JOB_NAME)["latestRun"]["id"] == RUN_ID
    # A key that is sent is still checked, public or not.
    bad = requests.get(
        f"{world['url']}/api/v1/namespaces",
        headers={"Authorization": "Bearer tm_nothing_here"},
        timeout=10,
    )
    assert bad.status_code == 401


def test_job_and_dataset_events_as_marquez_classifies_them(live_server, make_key, headers):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=JOB_NS)
    token = make_key(team, [ApiKey.Scope.LINEAGE, ApiKey.Scope.READ])
    job_event = JobEvent(
        eventTime="2026-11-28T05:00:00Z",
        job=Job(namespace=JOB_NS, name="orders.static"),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=IN_NS, name=IN_NAME)],
        outputs=[OutputDataset(namespace=OUT_NS, name="marts/static")],
    )
    body = _as_json(job_event)
    body["eventType"] = "COMPLETE"  # what some producers send on a JobEvent too
    sent = requests.post(
        f"{live_server.url}/api/v1/lineage",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert sent.status_code == 201, sent.text
    assert (sent.json()["kind"], sent.json()["event_type"]) == ("job", None)

    dataset_event = DatasetEvent(
        eventTime="2026-11-28T05:00:00Z",
        dataset=StaticDataset(namespace=OUT_NS, name="marts/only_declared"),
        producer=PRODUCER,
    )
    sent = requests.post(
        f"{live_server.url}/api/v1/lineage",
        json=_as_json(dataset_event),
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert sent.status_code == 201, sent.text
    assert sent.json()["kind"] == "dataset"
    processing.lineage_events_process_due()

    client = MarquezClient(url=live_server.url, api_key=token)
    job = client.get_job(JOB_NS, "orders.static")
    assert job["latestRun"] is None
    assert job["inputs"] == [{"namespace": IN_NS, "name": IN_NAME}]
    assert job["outputs"] == [{"namespace": OUT_NS, "name": "marts/static"}]
    job_id = f"job:{JOB_NS}:orders.static"
    graph = _graph(live_server.url, token, job_id)
    assert graph[job_id]["inEdges"] == [
        {"origin": f"dataset:{IN_NS}:{IN_NAME}", "destination": job_id}
    ]
    assert graph[job_id]["outEdges"] == [
        {"origin": job_id, "destination": f"dataset:{OUT_NS}:marts/static"}
    ]
    # Seen only in a DatasetEvent: a dataset of its namespace and a node of the graph.
    only = f"dataset:{OUT_NS}:marts/only_declared"
    assert list(_graph(live_server.url, token, only)) == [only]
    assert client.get_dataset(OUT_NS, "marts/only_declared")["id"]["name"] == (
        "marts/only_declared"
    )
    assert client.list_datasets(OUT_NS)["totalCount"] == 2

    # A later JobEvent states the job's lineage anew: its earlier output is gone.
    later = _as_json(job_event) | {"eventTime": "2026-11-28T07:00:00Z", "outputs": []}
    requests.post(
        f"{live_server.url}/api/v1/lineage",
        json=later,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ).raise_for_status()
    processing.lineage_events_process_due()
    assert client.get_job(JOB_NS, "orders.static")["outputs"] == []


def _graph(url: str, token: str, node: str) -> dict:
    response = requests.get(
        f"{url}/api/v1/lineage",
        params={"nodeId": node},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return {item["id"]: item for item in response.json()["graph"]}


def _as_json(event) -> dict:
    from openlineage.client.serde import Serde

    return Serde.to_dict(event)
