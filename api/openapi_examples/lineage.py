"""Examples of lineage (OpenLineage events, runs, the graph) and of the event catalog:
team orders' job ``orders/orders_daily`` reads ``raw/orders`` and writes
``curated/orders_daily``, which finance's ``revenue_daily`` reads."""

from __future__ import annotations

from catalog import event_types

from . import request, response

RUN_ID = "3f1b6c2e-8d4a-4e57-9b0c-6a2d1e9f7c43"
ORDERS_JOB = {"namespace": "orders", "name": "orders_daily"}
_SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/airflow"

OPEN_LINEAGE_EVENT = {
    "eventTime": "2026-11-29T04:51:58Z",
    "eventType": "COMPLETE",
    "run": {"runId": RUN_ID},
    "job": ORDERS_JOB,
    "inputs": [{"namespace": "s3://tidemark-demo", "name": "raw/orders"}],
    "outputs": [
        {
            "namespace": "s3://tidemark-demo",
            "name": "curated/orders_daily",
            "facets": {
                "schema": {
                    "_producer": _PRODUCER,
                    "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/"
                    "SchemaDatasetFacet.json",
                    "fields": [
                        {"name": "order_id", "type": "bigint"},
                        {"name": "country", "type": "string"},
                        {"name": "amount", "type": "decimal(18,2)"},
                    ],
                }
            },
        }
    ],
    "producer": _PRODUCER,
    "schemaURL": _SCHEMA_URL,
}

OPEN_LINEAGE_EVENT_INPUT = request("A run of orders_daily completed", OPEN_LINEAGE_EVENT)

LINEAGE_EVENT_RECEIVED_OUTPUT = response(
    "The event stored, verified by team orders' claim",
    {
        "id": 77119,
        "kind": "run",
        "event_type": "COMPLETE",
        "event_time": "2026-11-29T04:51:58Z",
        "event_time_assumed_utc": False,
        "run_id": RUN_ID,
        "job": ORDERS_JOB,
        "team": "orders",
        "verified": True,
        "duplicate": False,
        "problems": [],
    },
)

RUN_OUTPUT = response(
    "A completed run",
    {
        "run_id": RUN_ID,
        "job": ORDERS_JOB,
        "state": "complete",
        "started_at": "2026-11-29T04:30:02Z",
        "ended_at": "2026-11-29T04:51:58Z",
        "last_event_at": "2026-11-29T04:51:58Z",
        "parent_run_id": None,
        "parent_job": None,
        "team": "orders",
        "verified": True,
    },
)

LINEAGE_EVENT_OUTPUT = response(
    "A run's COMPLETE event, processed",
    {
        "id": 77119,
        "kind": "run",
        "event_type": "COMPLETE",
        "event_time": "2026-11-29T04:51:58Z",
        "event_time_assumed_utc": False,
        "team": "orders",
        "verified": True,
        "received_at": "2026-11-29T04:51:59Z",
        "content_encoding": "",
        "state": "processed",
        "conflict": None,
        "processed_at": "2026-11-29T04:52:00Z",
        "last_error": "",
        "problems": [],
        "payload": OPEN_LINEAGE_EVENT,
    },
)

_ORDERS_DAILY = "dataset:s3://tidemark-demo:curated/orders_daily"
_RAW_ORDERS = "dataset:s3://tidemark-demo:raw/orders"
_JOB = "job:orders:orders_daily"

LINEAGE_GRAPH_OUTPUT = response(
    "curated/orders_daily, one job hop upstream",
    {
        "root": _ORDERS_DAILY,
        "truncated": False,
        "nodes": [
            {
                "id": _ORDERS_DAILY,
                "type": "dataset",
                "namespace": "s3://tidemark-demo",
                "name": "curated/orders_daily",
                "catalogued": True,
                "dataset_id": 42,
            },
            {
                "id": _JOB,
                "type": "job",
                "namespace": "orders",
                "name": "orders_daily",
                "team": "orders",
            },
            {
                "id": _RAW_ORDERS,
                "type": "dataset",
                "namespace": "s3://tidemark-demo",
                "name": "raw/orders",
                "catalogued": True,
                "dataset_id": 41,
            },
        ],
        "edges": [
            {
                "source": _RAW_ORDERS,
                "target": _JOB,
                "direction": "read",
                "run_count": 28,
                "last_seen": "2026-11-29T04:51:58Z",
                "verified": True,
            },
            {
                "source": _JOB,
                "target": _ORDERS_DAILY,
                "direction": "write",
                "run_count": 28,
                "last_seen": "2026-11-29T04:51:58Z",
                "verified": True,
            },
        ],
    },
)

_PARTITION_READY = event_types.event_type_require("partition.ready")
EVENT_TYPE = {
    "type": _PARTITION_READY.name,
    "audience": list(_PARTITION_READY.audience),
    "description": _PARTITION_READY.description,
    "schema": _PARTITION_READY.schema,
    "example": _PARTITION_READY.example,
}

EVENT_TYPE_OUTPUT = response("partition.ready", EVENT_TYPE)
EVENT_TYPE_LIST_OUTPUT = response("The catalog (one type shown)", {"results": [EVENT_TYPE]})
