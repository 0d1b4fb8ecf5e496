"""The embedded demo's lineage, and the whole demo put together (``load_demo``).

The demo's jobs report their runs as OpenLineage clients do (a START and a COMPLETE, or
a FAIL, per run), received with their team's key at the instants the history says the
runs happened and processed by the lineage services, so jobs, runs, observed usage and
the governance reports come from the same code as a real pipeline's. Analytics' shipping
delays job reads ``raw/shipments`` without declaring it (an undeclared read) and writes
a table nobody registered (an uncatalogued dataset).

This module lives in ``lineage`` because it is the app that may import both the catalog
and lineage (the import contracts: the catalog never imports lineage).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from catalog import doorbell
from catalog.actors import Actor
from catalog.demo import clock, world
from catalog.demo.history import History, ProducerRun, seed_history

from .services import processing, receiving

PRODUCER = "https://github.com/tidemark/demo"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SCRATCH = (world.DEMO_NAMESPACE, "scratch/shipping_delays")
# Runs older than this went unreported (the jobs' OpenLineage integration is a week old).
REPORTED_FOR = timedelta(days=7)


@dataclass(frozen=True)
class JobSpec:
    """A job of the demo: it runs when ``runs_of``'s producer runs (``after`` later),
    reading ``inputs`` and writing ``outputs`` (dataset specs or raw identities)."""

    team: str
    namespace: str
    name: str
    runs_of: world.DatasetSpec
    inputs: tuple
    outputs: tuple
    after: timedelta = timedelta(0)


JOBS = [
    JobSpec(
        "orders", "airflow://orders", "ingest_orders", world.RAW_ORDERS, (), (world.RAW_ORDERS,)
    ),
    JobSpec(
        "analytics",
        "airflow://analytics",
        "daily_orders_rollup",
        world.ORDERS_ROLLUP,
        (world.RAW_ORDERS, world.RAW_PAYMENTS),
        (world.ORDERS_ROLLUP,),
    ),
    JobSpec(
        "finance",
        "dbt://finance",
        "revenue_model",
        world.DAILY_REVENUE,
        (world.ORDERS_ROLLUP, world.CURRENCIES),
        (world.DAILY_REVENUE,),
    ),
    # Reads raw/shipments undeclared; writes what nobody registered.
    JobSpec(
        "analytics",
        "airflow://analytics",
        "shipping_delays",
        world.RAW_SHIPMENTS,
        (world.RAW_SHIPMENTS, world.RAW_ORDERS),
        (SCRATCH,),
        after=timedelta(minutes=45),
    ),
]


def _identity(item) -> dict:
    namespace, name = item.identity if isinstance(item, world.DatasetSpec) else item
    return {"namespace": namespace, "name": name}


def run_events(job: JobSpec, run: ProducerRun, run_id: uuid.UUID) -> list[tuple[datetime, dict]]:
    """The OpenLineage events one run of ``job`` sends: ``(eventTime, event)`` pairs."""
    common = {
        "run": {"runId": str(run_id)},
        "job": {"namespace": job.namespace, "name": job.name},
        "inputs": [_identity(i) for i in job.inputs],
        "outputs": [_identity(o) for o in job.outputs],
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
    }
    started, ended = run.started_at + job.after, run.ended_at + job.after
    end_type = "COMPLETE" if run.outcome == "success" else "FAIL"
    return [
        (at, {"eventType": kind, "eventTime": at.isoformat().replace("+00:00", "Z"), **common})
        for at, kind in ((started, "START"), (ended, end_type))
    ]


def seed_lineage(history: History, *, rng: random.Random) -> int:
    """Receive every demo job's run events at their instants and process them.

    Returns:
        How many events were received.
    """
    received = 0
    for job in JOBS:
        actor = Actor(team=history.teams[job.team], api_key=history.keys[job.team])
        for run in history.runs:
            if run.dataset is not job.runs_of or run.started_at < history.now - REPORTED_FOR:
                continue
            run_id = uuid.UUID(int=rng.getrandbits(128), version=4)
            for at, event in run_events(job, run, run_id):
                if at > history.now:
                    continue
                with clock.at(at):
                    receiving.lineage_event_receive(actor=actor, payload=event, now=at)
                received += 1
    with clock.at(history.now):
        processing.lineage_events_process_due(now=history.now, max_batches=1000)
    return received


def load(*, now: datetime, seed: int, demo_hook_url: str) -> History:
    """The whole demo's month up to ``now``: the catalog's history, then the lineage its
    jobs reported, in one transaction that rings no doorbell.

    Args:
        now: aware UTC instant the history ends at.
        seed: the story's random seed.
        demo_hook_url: the demo webhook receiver's URL with ``{team}`` for the team slug.
    """
    with doorbell.silenced(), transaction.atomic():
        history = seed_history(now=now, seed=seed, demo_hook_url=demo_hook_url)
        seed_lineage(history, rng=random.Random(f"{seed}:lineage"))
    return history
