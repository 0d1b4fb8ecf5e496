"""OpenLineage as a completion signal, end to end: the real openlineage-python client
sends a run's START and COMPLETE (or FAIL) to a live Tidemark server, with the partition
in the custom ``tidemark_partition`` output facet or the run's ``nominalTime`` facet; a
lineage worker processes them and the partition is published through the catalog's
publish, read back through the readiness API."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import attr
import httpx
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import nominal_time_run
from openlineage.client.generated.base import OutputDatasetFacet

from catalog.models import Claim, Dataset, ReadinessEvent
from catalog.services.teams import api_key_create
from lineage.services import processing
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the live server commits for real

PRODUCER = "https://github.com/example/pipelines/tree/main/orders"
JOB = Job(namespace="airflow://team-a", name="orders.daily_rollup")
LAKE = ("s3://lake", "marts/daily_orders")


@attr.define
class TidemarkPartitionFacet(OutputDatasetFacet):
    """The partition a run wrote of an output dataset, as Tidemark reads it."""

    key: str

    @staticmethod
    def _get_schema() -> str:
        return "https://tidemark.example/docs/guides/producer/#tidemark_partition"


@pytest.fixture
def world(live_server) -> Iterator[dict]:
    saved = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
    for name in saved:
        del os.environ[name]
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=JOB.namespace)
    dataset = DatasetFactory(
        owner=team,
        namespace=LAKE[0],
        name=LAKE[1],
        completion_signal=Dataset.CompletionSignal.OPENLINEAGE,
    )
    _, token = api_key_create(team=team, name="airflow", scopes=["lineage", "read"])
    os.environ.update(OPENLINEAGE_URL=live_server.url, OPENLINEAGE_API_KEY=token)
    try:
        yield {
            "client": OpenLineageClient(),
            "dataset": dataset,
            "token": token,
            "url": live_server.url,
        }
    finally:
        for name in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
            del os.environ[name]
        os.environ.update(saved)


def _send(client, state, run, outputs, time="2026-11-28T06:00:00Z"):
    client.emit(
        RunEvent(
            eventType=state, eventTime=time, run=run, job=JOB, outputs=outputs, producer=PRODUCER
        )
    )


def _partition(world, key) -> dict:
    """The partition as the catalog's API serves it."""
    response = httpx.get(
        f"{world['url']}/api/v1/datasets/{world['dataset'].pk}/partitions/{key}",
        headers={"Authorization": f"Bearer {world['token']}"},
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_complete_with_the_partition_facet_publishes_it_ready_once(world):
    client, run = world["client"], Run(runId=str(uuid.uuid4()))
    facet = {"tidemark_partition": TidemarkPartitionFacet(key="2026-11-27")}
    output = OutputDataset(namespace="s3a://lake", name="/marts/daily_orders/", outputFacets=facet)
    _send(client, RunState.START, run, [output])
    _send(client, RunState.COMPLETE, run, [output], time="2026-11-28T06:10:00Z")
    _send(client, RunState.COMPLETE, run, [output], time="2026-11-28T06:10:00Z")  # a retry
    assert processing.lineage_events_process_due().by_state == {"processed": 2}

    [event] = ReadinessEvent.objects.filter(dataset=world["dataset"])
    assert (event.partition.key, event.state, event.revision.version) == (
        "2026-11-27",
        "ready",
        run.runId,
    )
    served = _partition(world, "2026-11-27")
    assert served["state"] == "ready", served


def test_a_fail_with_nominal_time_publishes_the_partition_failed(world):
    client, run = (
        world["client"],
        Run(
            runId=str(uuid.uuid4()),
            facets={
                "nominalTime": nominal_time_run.NominalTimeRunFacet(
                    nominalStartTime="2026-11-27T00:00:00Z", nominalEndTime="2026-11-28T00:00:00Z"
                )
            },
        ),
    )
    _send(client, RunState.FAIL, run, [OutputDataset(namespace=LAKE[0], name=LAKE[1])])
    assert processing.lineage_events_process_due().by_state == {"processed": 1}

    [event] = ReadinessEvent.objects.filter(dataset=world["dataset"])
    assert (event.partition.key, event.state) == ("2026-11-27", "failed")
