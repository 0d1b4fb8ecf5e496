"""Examples of claims, ownership transfers and the governance reports: team orders
produces under ``s3://tidemark-demo/curated/``, team finance reads it."""

from __future__ import annotations

from . import request, response

ORDERS_DAILY = {
    "id": 42,
    "namespace": "s3://tidemark-demo",
    "name": "curated/orders_daily",
    "owner": "orders",
}
REVENUE_JOB = {"namespace": "finance", "name": "revenue_daily"}
ORDERS_JOB = {"namespace": "orders", "name": "orders_daily"}

CLAIM_CREATE_INPUT = request(
    "Claim the datasets under curated/orders",
    {"kind": "dataset_prefix", "pattern": "s3://tidemark-demo/curated/orders"},
)

CLAIM_OUTPUT = response(
    "A dataset prefix claimed by team orders",
    {
        "id": 4,
        "team": "orders",
        "kind": "dataset_prefix",
        "pattern": "s3://tidemark-demo/curated/orders",
        "created_at": "2026-11-02T09:20:00Z",
    },
)

_TRANSFER = {
    "id": 2,
    "dataset": 42,
    "from_team": "orders",
    "to_team": "finance",
    "state": "proposed",
    "proposed_by": "key:8kq2m4ZpQ1",
    "decided_by": "",
    "created_at": "2026-11-29T11:00:00Z",
    "decided_at": None,
}

DATASET_TRANSFER_CREATE_INPUT = request("Hand the dataset to team finance", {"to_team": "finance"})

DATASET_TRANSFER_OUTPUT = response("A proposed transfer", _TRANSFER)

DATASET_TRANSFER_LIST_OUTPUT = response(
    "A transfer awaiting team finance's decision",
    {**_TRANSFER, "namespace": "s3://tidemark-demo", "name": "curated/orders_daily"},
)

UNDECLARED_READ_OUTPUT = response(
    "Finance's job reads a dataset it has not subscribed to",
    {
        "team": "finance",
        "job": {"namespace": "finance", "name": "margin_weekly"},
        "dataset": ORDERS_DAILY,
        "first_seen_at": "2026-11-10T07:02:00Z",
        "last_seen_at": "2026-11-29T07:01:44Z",
        "runs": 20,
        "verified": True,
    },
)

STALE_DECLARATION_OUTPUT = response(
    "A subscription no verified run has read for 30 days",
    {
        "subscription": 9,
        "team": "finance",
        "job": {"namespace": "finance", "name": "orders_monthly_close"},
        "dataset": ORDERS_DAILY,
        "created_at": "2026-09-01T08:00:00Z",
        "last_read_at": "2026-10-01T06:40:00Z",
    },
)

UNDECLARED_WRITE_OUTPUT = response(
    "A job writes a dataset of another team",
    {
        "team": "finance",
        "job": {"namespace": "finance", "name": "orders_fixup"},
        "dataset": ORDERS_DAILY,
        "first_seen_at": "2026-11-27T13:10:00Z",
        "last_seen_at": "2026-11-28T13:10:05Z",
        "runs": 2,
    },
)

_PARTY = {"last_seen_at": "2026-11-29T04:50:00Z", "runs": 28}

UNCATALOGUED_DATASET_OUTPUT = response(
    "A dataset seen in lineage but never registered",
    {
        "namespace": "s3://tidemark-demo",
        "name": "staging/orders_dedup",
        "first_seen_at": "2026-11-01T04:10:00Z",
        "last_seen_at": "2026-11-29T04:50:00Z",
        "runs": 56,
        "readers": [{"team": "orders", "job": ORDERS_JOB, **_PARTY}],
        "writers": [
            {"team": "orders", "job": {"namespace": "orders", "name": "orders_dedup"}, **_PARTY}
        ],
    },
)

UNANNOUNCED_CHANGE_OUTPUT = response(
    "A column dropped without a change notice",
    {
        "id": 6,
        "dataset": ORDERS_DAILY,
        "observed_at": "2026-11-29T04:51:58Z",
        "previous_observed_at": "2026-11-02T04:48:12Z",
        "removed": ["discount"],
        "retyped": [{"name": "amount", "from": "decimal(18,2)", "to": "double"}],
        "added": ["channel"],
        "source": "lineage",
        "job": ORDERS_JOB,
        "run_id": "3f1b6c2e-8d4a-4e57-9b0c-6a2d1e9f7c43",
        "readiness_event_id": None,
        "created_at": "2026-11-29T04:52:03Z",
    },
)

RUN_CONFLICT_OUTPUT = response(
    "Another team's unverified event for a verified run",
    {
        "run_id": "3f1b6c2e-8d4a-4e57-9b0c-6a2d1e9f7c43",
        "run": {"job": ORDERS_JOB, "team": "orders", "verified": True},
        "event": {
            "id": 77120,
            "team": "finance",
            "job": ORDERS_JOB,
            "verified": False,
            "event_type": "COMPLETE",
            "event_time": "2026-11-29T04:51:58Z",
        },
        "reason": "other_team",
        "detected_at": "2026-11-29T04:52:01Z",
    },
)

NEEDED_EARLIER_OUTPUT = response(
    "Finance needs the partition half an hour before the SLA promises it",
    {
        "subscription": 7,
        "dataset": ORDERS_DAILY,
        "team": "finance",
        "job": REVENUE_JOB,
        "sla_deadline_at": "2026-11-30T05:30:00Z",
        "need_by_at": "2026-11-30T05:00:00Z",
        "gap_minutes": 30,
    },
)

SCHEMA_OBSERVATION_OUTPUT = response(
    "The schema a lineage event showed",
    {
        "id": 31,
        "fields": [
            {"name": "order_id", "type": "bigint"},
            {"name": "country", "type": "string"},
            {"name": "amount", "type": "decimal(18,2)"},
        ],
        "fingerprint": "9c4e1f0b7a2d58e3c6b1f4a09d7e2c5b8a3f6d1e0c9b4a7f2e5d8c1b6a9f3e0d",
        "observed_at": "2026-11-02T04:48:12Z",
        "last_seen_at": "2026-11-28T04:49:30Z",
        "source": "lineage",
        "team": "orders",
        "job": ORDERS_JOB,
        "run_id": "0e4d2c9a-5b7f-4a13-8c6e-1f9d3b2a7e50",
        "readiness_event_id": None,
    },
)
