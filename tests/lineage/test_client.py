"""The real openlineage-python client, configured only through its environment, sends a
run's START and COMPLETE to a live Tidemark server; processed, they become a run, a job
and usage edges."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import parent_run, sql_job

from catalog.models import Claim, DatasetUsage, RunConflict
from catalog.models import Job as CatalogJob
from catalog.services.teams import api_key_create
from lineage.models import LineageEvent, LineageRun
from lineage.services import processing
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the live server commits for real

PRODUCER = "https://github.com/example/pipelines/tree/main/orders"
JOB_NAMESPACE, JOB_NAME = "airflow://team-a", "orders.daily_rollup"


@pytest.fixture
def openlineage_environment() -> Iterator[dict[str, str]]:
    """The process environment the client reads, restored afterwards: the client also
    writes aliases of ``OPENLINEAGE_URL`` into ``os.environ`` itself."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
    for name in saved:
        del os.environ[name]
    try:
        yield os.environ
    finally:
        for name in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
            del os.environ[name]
        os.environ.update(saved)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_the_openlineage_client_reports_a_run_that_becomes_runs_jobs_and_usage(
    live_server, openlineage_environment, compression
):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=JOB_NAMESPACE)
    orders = DatasetFactory(
        owner=TeamFactory(slug="shop"),
        namespace="postgres://warehouse:5432",
        name="shop.public.orders",
    )
    _, token = api_key_create(team=team, name="airflow", scopes=["lineage"])
    if compression is None:
        # The client's plain configuration: a URL and an API key.
        openlineage_environment.update(OPENLINEAGE_URL=live_server.url, OPENLINEAGE_API_KEY=token)
    else:
        # Compression is a transport option, so the transport is configured whole; with
        # OPENLINEAGE_URL the client (1.54) builds its HTTP transport without it.
        openlineage_environment.update(
            OPENLINEAGE__TRANSPORT__TYPE="http",
            OPENLINEAGE__TRANSPORT__URL=live_server.url,
            OPENLINEAGE__TRANSPORT__AUTH=json.dumps({"type": "api_key", "apiKey": token}),
            OPENLINEAGE__TRANSPORT__COMPRESSION=compression,
        )
    client = OpenLineageClient()

    run_id, parent_id = str(uuid.uuid4()), str(uuid.uuid4())
    run = Run(
        runId=run_id,
        facets={
            "parent": parent_run.ParentRunFacet(
                run=parent_run.Run(runId=parent_id),
                job=parent_run.Job(namespace=JOB_NAMESPACE, name="orders"),
            )
        },
    )
    job = Job(
        namespace=JOB_NAMESPACE,
        name=JOB_NAME,
        facets={"sql": sql_job.SQLJobFacet(query="INSERT INTO marts.daily_orders SELECT 1")},
    )
    inputs = [InputDataset(namespace="POSTGRESQL://Warehouse:5432", name="Shop.Public.Orders")]
    outputs = [OutputDataset(namespace="s3://lake", name="marts/daily_orders")]
    client.emit(
        RunEvent(
            eventType=RunState.START,
            eventTime="2026-11-28T06:00:00+00:00",
            run=run,
            job=job,
            producer=PRODUCER,
            inputs=inputs,
        )
    )
    client.emit(
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime="2026-11-28T07:05:00.250+01:00",
            run=run,
            job=job,
            producer=PRODUCER,
            inputs=inputs,
            outputs=outputs,
        )
    )
    client.close()

    events = list(LineageEvent.objects.order_by("id"))
    assert [(e.event_type, e.verified, e.state) for e in events] == [
        ("START", True, "pending"),
        ("COMPLETE", True, "pending"),
    ]
    assert {e.content_encoding for e in events} == {compression or ""}
    assert events[1].payload["job"]["facets"]["sql"]["query"].startswith("INSERT INTO")

    assert processing.lineage_events_process_due().by_state == {"processed": 2}

    stored = LineageRun.objects.select_related("job").get()
    assert str(stored.run_id) == run_id
    assert (stored.state, stored.parent_run_id) == ("complete", uuid.UUID(parent_id))
    assert stored.started_at == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    assert stored.ended_at == datetime(2026, 11, 28, 6, 5, 0, 250000, tzinfo=UTC)
    catalog_job = CatalogJob.objects.get()
    assert (catalog_job.namespace, catalog_job.name, catalog_job.team) == (
        JOB_NAMESPACE,
        JOB_NAME,
        team,
    )
    edges = {
        (u.direction, u.dataset_namespace, u.dataset_name): (u.dataset_id, u.run_count, u.verified)
        for u in DatasetUsage.objects.filter(job=catalog_job)
    }
    assert edges == {
        ("read", "postgres://warehouse:5432", "shop.public.orders"): (orders.pk, 1, True),
        ("write", "s3://lake", "marts/daily_orders"): (None, 1, True),
    }


def _client(url: str, token: str, environment) -> OpenLineageClient:
    """A client configured only through its environment, as a job's would be."""
    for name in [k for k in environment if k.startswith("OPENLINEAGE")]:
        del environment[name]
    environment.update(OPENLINEAGE_URL=url, OPENLINEAGE_API_KEY=token)
    return OpenLineageClient()


def test_an_intruders_client_cannot_take_over_a_run_and_governance_sees_its_event(
    live_server, openlineage_environment
):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=JOB_NAMESPACE)
    _, owner_token = api_key_create(team=team, name="airflow", scopes=["lineage"])
    _, intruder_token = api_key_create(
        team=TeamFactory(slug="intruder"), name="scraper", scopes=["lineage"]
    )
    _, auditor_token = api_key_create(
        team=TeamFactory(slug="audit"), name="audit", scopes=["governance"]
    )
    # The orchestrator's run id is predictable; the intruder sends first, with the
    # owner's job name and a terminal state.
    run = Run(runId=str(uuid.uuid4()))
    job = Job(namespace=JOB_NAMESPACE, name=JOB_NAME)
    intruder = _client(live_server.url, intruder_token, openlineage_environment)
    intruder.emit(
        RunEvent(
            eventType=RunState.FAIL,
            eventTime="2026-11-28T06:01:00+00:00",
            run=run,
            job=job,
            producer=PRODUCER,
            inputs=[InputDataset(namespace="s3://lake", name="hr/salaries")],
        )
    )
    intruder.close()
    assert processing.lineage_events_process_due().by_state == {"processed": 1}

    owner = _client(live_server.url, owner_token, openlineage_environment)
    for state, at in ((RunState.START, "06:00"), (RunState.COMPLETE, "06:05")):
        owner.emit(
            RunEvent(
                eventType=state,
                eventTime=f"2026-11-28T{at}:00+00:00",
                run=run,
                job=job,
                producer=PRODUCER,
                outputs=[OutputDataset(namespace="s3://lake", name="marts/daily_orders")],
            )
        )
    owner.close()
    assert processing.lineage_events_process_due().by_state == {"processed": 2}

    stored = LineageRun.objects.select_related("job", "team").get()
    assert (stored.job.name, stored.team.slug, stored.verified) == (JOB_NAME, "team-a", True)
    assert (stored.state, stored.ended_at) == (
        "complete",
        datetime(2026, 11, 28, 6, 5, tzinfo=UTC),
    )
    assert [(u.dataset_name, u.verified) for u in DatasetUsage.objects.all()] == [
        ("marts/daily_orders", True)
    ]
    forged = LineageEvent.objects.get(team__slug="intruder")
    assert RunConflict.objects.get().event_id == forged.pk

    report = httpx.get(
        f"{live_server.url}/api/v1/reports/run-conflicts",
        headers={"Authorization": f"Bearer {auditor_token}"},
    )
    assert report.status_code == 200, report.text
    [row] = report.json()["results"]
    assert (row["run_id"], row["reason"]) == (run.runId, "unverified")
    assert (row["event"]["id"], row["event"]["team"]) == (forged.pk, "intruder")
    assert (row["run"]["team"], row["run"]["verified"]) == ("team-a", True)
