"""Examples of the catalog's datasets, partitions, readiness, subscriptions and keys: the
demo's ``curated/orders_daily`` of team ``orders``, read by team ``finance``."""

from __future__ import annotations

from . import request, response

NAMESPACE = "s3://tidemark-demo"
NAME = "curated/orders_daily"

DATASET = {
    "id": 42,
    "namespace": NAMESPACE,
    "name": NAME,
    "owner": "orders",
    "description": "Orders per day and country, deduplicated; one partition per day.",
    "criticality": "high",
    "partitioning": "daily",
    "partition_timezone": "UTC",
    "completion_signal": "event",
    "success_marker": "_SUCCESS",
    "manifest_name": "_manifest.json",
    "storage_source": "",
    "location_template": "",
    "sla_cron": "30 6 * * *",
    "sla_timezone": "Europe/Berlin",
    "sla_grace_seconds": 900,
    "sla_calendar": "none",
    "sla_holidays_country": "",
    "sla_holidays_subdivision": "",
    "sla_non_business_day": "next_business_day",
    "next_deadline_at": "2026-11-30T05:30:00Z",
    "change_notice_days": 14,
    "accepts_future_partitions": False,
    "lifecycle": "active",
    "sunset_at": None,
    "created_at": "2026-11-02T09:14:03Z",
    "updated_at": "2026-11-20T16:41:27Z",
}

DATASET_OUTPUT = response("A daily dataset with an SLA", DATASET)

DATASET_DETAIL_OUTPUT = response(
    "A daily dataset, as its owner team reads it",
    {
        **DATASET,
        "badge_url": "https://tidemark.example/badge/Zq3xv0Hk2mWcT8yQ.svg",
        "needed_by": [
            {
                "subscription": 7,
                "team": "finance",
                "job": {"namespace": "finance", "name": "revenue_daily"},
                "need_by_cron": "0 7 * * *",
                "need_by_timezone": "Europe/Berlin",
                "next_need_by": {
                    "local": "2026-11-30T07:00:00+01:00",
                    "utc": "2026-11-30T06:00:00Z",
                },
                "sla_deadline_at": "2026-11-30T05:30:00Z",
                "need_by_at": "2026-11-30T06:00:00Z",
                "earlier_than_sla": False,
                "gap_minutes": -30,
            }
        ],
        "next_deadlines": [
            {"local": "2026-11-30T06:30:00+01:00", "utc": "2026-11-30T05:30:00Z"},
            {"local": "2026-12-01T06:30:00+01:00", "utc": "2026-12-01T05:30:00Z"},
            {"local": "2026-12-02T06:30:00+01:00", "utc": "2026-12-02T05:30:00Z"},
        ],
        "warnings": [],
    },
)

DATASET_CREATE_INPUT = request(
    "Register a daily dataset due at 06:30 Berlin time",
    {
        "namespace": NAMESPACE,
        "name": NAME,
        "description": "Orders per day and country, deduplicated; one partition per day.",
        "criticality": "high",
        "partitioning": "daily",
        "sla_cron": "30 6 * * *",
        "sla_timezone": "Europe/Berlin",
        "sla_grace_seconds": 900,
    },
)

DATASET_UPDATE_INPUT = request(
    "Move the SLA to 07:00 and give it more grace",
    {"sla_cron": "0 7 * * *", "sla_grace_seconds": 1800, "criticality": "critical"},
)

CATALOG_PLAN_OUTPUT = response(
    "The plan of a declaration (dry run)",
    {
        "team": "orders",
        "dry_run": True,
        "changed": True,
        "datasets": [
            {
                "namespace": NAMESPACE,
                "name": NAME,
                "action": "update",
                "changes": {"sla_cron": {"old": "30 6 * * *", "new": "0 7 * * *"}},
                "warnings": [],
            },
            {
                "namespace": NAMESPACE,
                "name": "curated/returns_daily",
                "action": "create",
                "changes": {},
                "warnings": [],
            },
        ],
        "not_declared": ["s3://tidemark-demo/raw/orders"],
    },
)

_DECLARATION = {
    "team": "orders",
    "datasets": [
        {
            "namespace": NAMESPACE,
            "name": NAME,
            "partitioning": "daily",
            "sla_cron": "0 7 * * *",
            "sla_timezone": "Europe/Berlin",
        },
        {"namespace": NAMESPACE, "name": "curated/returns_daily", "partitioning": "daily"},
    ],
}
CATALOG_DECLARATION_JSON = _DECLARATION
CATALOG_DECLARATION_YAML = """team: orders
datasets:
  - namespace: s3://tidemark-demo
    name: curated/orders_daily
    partitioning: daily
    sla_cron: "0 7 * * *"
    sla_timezone: Europe/Berlin
  - namespace: s3://tidemark-demo
    name: curated/returns_daily
    partitioning: daily
"""

AUDIT_ENTRY_OUTPUT = response(
    "An SLA change",
    {
        "id": 318,
        "actor": "key:8kq2m4ZpQ1",
        "action": "dataset.updated",
        "changes": {"sla_cron": {"old": "30 6 * * *", "new": "0 7 * * *"}},
        "created_at": "2026-11-20T16:41:27Z",
    },
)

READINESS_PUBLISH_INPUT = request(
    "Partition 2026-11-28 is ready",
    {
        "namespace": NAMESPACE,
        "name": NAME,
        "partition": "2026-11-28",
        "version": "v1",
        "state": "ready",
        "code_version": "orders-etl@3f9c2e1",
        "metadata": {"rows": 182734},
    },
)

READINESS_PUBLISH_OUTPUT = response(
    "The ready revision recorded",
    {
        "dataset": {"id": 42, "namespace": NAMESPACE, "name": NAME},
        "partition": "2026-11-28",
        "logical_start": "2026-11-28T00:00:00Z",
        "logical_end": "2026-11-29T00:00:00Z",
        "version": "v1",
        "state": "ready",
        "ready_at": "2026-11-29T04:52:10Z",
        "current_version": "v1",
        "event_id": 9131,
    },
)

PARTITION_OUTPUT = response(
    "A ready daily partition",
    {
        "key": "2026-11-28",
        "logical_start": "2026-11-28T00:00:00Z",
        "logical_end": "2026-11-29T00:00:00Z",
        "state": "ready",
        "current_revision": {
            "version": "v1",
            "state": "ready",
            "ready_at": "2026-11-29T04:52:10Z",
            "detected_by": "event",
            "code_version": "orders-etl@3f9c2e1",
            "manifest": None,
            "metadata": {"rows": 182734},
        },
        "updated_at": "2026-11-29T04:52:10Z",
    },
)

_SWEEP = {
    "started_at": "2026-11-29T05:00:00Z",
    "finished_at": "2026-11-29T05:00:02Z",
    "full": False,
    "listing": "delimiter",
    "objects_per_partition": 3.0,
    "list_calls": 2,
    "pages": 2,
    "objects_seen": 9,
    "partitions_checked": 1,
    "partitions_found": 1,
    "missed_events": 0,
    "incomplete": 0,
    "recent_pass": False,
    "partitions_restated": 0,
    "narrow": False,
    "datasets_listed": 1,
    "error": "",
}

POLL_OUTPUT = response(
    "A dataset the fallback poll watches",
    {
        "polled": True,
        "storage_source": "local",
        "location_template": "raw/clicks/dt={partition}/",
        "group_prefix": "raw/clicks/",
        "mode": "safety_net",
        "interval_seconds": 900,
        "next_sweep_at": "2026-11-29T05:15:00Z",
        "last_swept_at": "2026-11-29T05:00:02Z",
        "last_found_at": "2026-11-29T05:00:02Z",
        "recent_sweeps": [_SWEEP],
    },
)

_QUANTILES = {"periods": 4, "p50_seconds": 17400, "p90_seconds": 18900, "p99_seconds": 19800}
_WEEKEND = {"periods": 1, "p50_seconds": None, "p90_seconds": None, "p99_seconds": None}

FRESHNESS_OUTPUT = response(
    "A fresh dataset with its arrival profile",
    {
        "state": "fresh",
        "sla": "every day at 06:30 Europe/Berlin, 15 minutes' grace",
        "latest_ready": "2026-11-28",
        "partition_due": None,
        "deadline_at": "2026-11-29T05:30:00Z",
        "late_seconds": None,
        "next_deadline_at": "2026-11-30T05:30:00Z",
        "arrival_profile": {
            "window_periods": 28,
            "since": "2026-11-01T00:00:00Z",
            "periods": 27,
            "backfills": 1,
            "all_days": {
                "periods": 27,
                "p50_seconds": 17100,
                "p90_seconds": 18900,
                "p99_seconds": 20400,
            },
            "business_days": {
                "periods": 19,
                "p50_seconds": 17400,
                "p90_seconds": 19200,
                "p99_seconds": 20400,
            },
            "weekends": {
                "periods": 8,
                "p50_seconds": 16200,
                "p90_seconds": 17700,
                "p99_seconds": 18000,
            },
            "weekdays": {
                "monday": _QUANTILES,
                "tuesday": _QUANTILES,
                "wednesday": _QUANTILES,
                "thursday": _QUANTILES,
                "friday": {**_QUANTILES, "periods": 3},
                "saturday": {**_WEEKEND, "periods": 4},
                "sunday": {**_WEEKEND, "periods": 4},
            },
            "sla_suggestion": None,
        },
        "forecast": None,
        "caused_by": None,
        "blast_radius": {
            "partitions_count": 0,
            "datasets_count": 0,
            "datasets": [],
            "teams_count": 0,
            "teams": [],
        },
    },
)

SUBSCRIPTION = {
    "id": 7,
    "team": "finance",
    "dataset": {"id": 42, "namespace": NAMESPACE, "name": NAME},
    "job_namespace": "finance",
    "job_name": "revenue_daily",
    "endpoint_url": "https://hooks.finance.example/tidemark",
    "endpoints": [
        {"id": 5, "url": "https://hooks.finance.example/tidemark"},
        {"id": 11, "url": "https://backup.finance.example/tidemark"},
    ],
    "event_types": ["partition.ready", "partition.restated"],
    "partition_pattern": "",
    "newest_only": False,
    "need_by_cron": "0 7 * * *",
    "need_by_timezone": "Europe/Berlin",
    "need_by_next_at": "2026-11-30T06:00:00Z",
    "created_at": "2026-11-03T10:02:55Z",
}

SUBSCRIPTION_OUTPUT = response(
    "Team finance's subscription to curated/orders_daily",
    {**SUBSCRIPTION, "warnings": []},
)

SUBSCRIPTION_CREATE_INPUT = request(
    "Be told when a partition is ready, needing it by 07:00",
    {
        "namespace": NAMESPACE,
        "name": NAME,
        "job_namespace": "finance",
        "job_name": "revenue_daily",
        "endpoint_url": "https://hooks.finance.example/tidemark",
        "event_types": ["partition.ready", "partition.restated"],
        "need_by_cron": "0 7 * * *",
        "need_by_timezone": "Europe/Berlin",
    },
)

SUBSCRIPTION_UPDATE_INPUT = request(
    "Only the newest ready partition, needed by 06:45",
    {"newest_only": True, "need_by_cron": "45 6 * * *"},
)

SUBSCRIPTION_ENDPOINT_ADD_INPUT = request(
    "Deliver to a second receiver too, catching up on the last day",
    {"url": "https://backup.finance.example/tidemark", "since": "2026-11-28T06:00:00Z"},
)

SUBSCRIPTION_ENDPOINT_OUTPUT = response(
    "A new endpoint on the subscription, with its signing secret (shown once)",
    {
        "id": 11,
        "url": "https://backup.finance.example/tidemark",
        "subscription_id": 7,
        "endpoint_secret": "whsec_Zl3q8Yw1pK5vT0rN6cXbD2mJ9sF4aHeU",
        "caught_up": 2,
    },
)

API_KEY = {
    "public_id": "8kq2m4ZpQ1",
    "name": "orders-etl",
    "scopes": ["publish", "lineage", "read"],
    "created_at": "2026-11-02T09:10:41Z",
    "expires_at": None,
    "revoked_at": None,
    "last_used_at": "2026-11-29T04:52:10Z",
}

API_KEY_OUTPUT = response("The key the orders pipeline publishes with", API_KEY)

API_KEY_CREATED_OUTPUT = response(
    "A new key, with its token (shown once)",
    {
        **API_KEY,
        "public_id": "R4t7bN0cWx",
        "name": "finance-reader",
        "scopes": ["read"],
        "created_at": "2026-11-29T08:00:12Z",
        "expires_at": "2027-05-29T00:00:00Z",
        "last_used_at": None,
        "token": "tm_R4t7bN0cWx_q8ZyF1s3kL0vA9mPd2XwE6hJtN4uR7cB",
    },
)

API_KEY_CREATE_INPUT = request(
    "A read-only key that expires",
    {"name": "finance-reader", "scopes": ["read"], "expires_at": "2027-05-29T00:00:00Z"},
)

ME_OUTPUT = response(
    "The orders team's pipeline key",
    {"team": {"slug": "orders", "name": "Orders"}, "key": API_KEY},
)

CHANGE_NOTICE_CREATE_INPUT = request(
    "Announce a breaking schema change two weeks ahead",
    {
        "kind": "breaking_schema_change",
        "description": "Column `amount` becomes `amount_eur` (decimal(18,2)).",
        "schema_diff": {"renamed": [{"from": "amount", "to": "amount_eur"}]},
        "link": "https://wiki.example/orders/amount-eur",
        "effective_at": "2026-12-14T06:00:00Z",
        "require_acknowledgements": True,
    },
)

CHANGE_NOTICE_OUTPUT = response(
    "An announced change, acknowledged by finance",
    {
        "id": 12,
        "dataset_id": 42,
        "kind": "breaking_schema_change",
        "description": "Column `amount` becomes `amount_eur` (decimal(18,2)).",
        "schema_diff": {"renamed": [{"from": "amount", "to": "amount_eur"}]},
        "link": "https://wiki.example/orders/amount-eur",
        "announced_by": "key:8kq2m4ZpQ1",
        "announced_at": "2026-11-29T09:00:00Z",
        "effective_at": "2026-12-14T06:00:00Z",
        "emergency": False,
        "override_reason": "",
        "require_acknowledgements": True,
        "state": "announced",
        "took_effect_at": None,
        "applied_early": False,
        "acknowledgements": [
            {
                "team": "finance",
                "acknowledged_by": "key:R4t7bN0cWx",
                "acknowledged_at": "2026-11-30T10:12:00Z",
            }
        ],
        "pending_acknowledgements": [],
    },
)

CHANGE_NOTICE_ACKNOWLEDGEMENT_OUTPUT = response(
    "Team finance acknowledged",
    {
        "team": "finance",
        "acknowledged_by": "key:R4t7bN0cWx",
        "acknowledged_at": "2026-11-30T10:12:00Z",
    },
)

RESTATEMENT_OPEN_INPUT = request(
    "Restate three days after a deduplication fix",
    {
        "version": "v2",
        "first_partition": "2026-11-26",
        "last_partition": "2026-11-28",
        "code_version": "orders-etl@a41d7b0",
        "reason": "Duplicated orders from the retry storm of 2026-11-26.",
    },
)

RESTATEMENT_OUTPUT = response(
    "A staged restatement, one of three partitions ready",
    {
        "id": 3,
        "dataset_id": 42,
        "version": "v2",
        "code_version": "orders-etl@a41d7b0",
        "first_partition": "2026-11-26",
        "last_partition": "2026-11-28",
        "reason": "Duplicated orders from the retry storm of 2026-11-26.",
        "state": "staged",
        "opened_by": "key:8kq2m4ZpQ1",
        "opened_at": "2026-11-29T10:00:00Z",
        "closed_by": "",
        "closed_at": None,
        "partitions_total": 3,
        "partitions_ready": 1,
        "partitions": [
            {
                "partition": "2026-11-26",
                "state": "ready",
                "current": False,
                "code_version": "orders-etl@a41d7b0",
                "ready_at": "2026-11-29T10:40:00Z",
            },
            {
                "partition": "2026-11-27",
                "state": "pending",
                "current": False,
                "code_version": None,
                "ready_at": None,
            },
            {
                "partition": "2026-11-28",
                "state": "missing",
                "current": False,
                "code_version": None,
                "ready_at": None,
            },
        ],
    },
)
