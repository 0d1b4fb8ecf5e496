"""Examples for the watchdog API's OpenAPI document, attached to its serializers with
``extend_schema_serializer(examples=...)``: the deadline monitor the catalog manages for
``s3://tidemark-demo curated/orders_daily`` (team ``orders``), with a Slack channel.
``tests/api/test_openapi_document.py`` validates each against its schema."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample

PING_KEY = "b3d1f2a4-7c5e-4e8a-9f60-1d2c3b4a5e6f"
PUBLIC_URL = "https://watchdog.tidemark.example"


def _request(summary: str, value: Any) -> list[OpenApiExample]:
    return [OpenApiExample(summary, value=value, request_only=True)]


def _response(summary: str, value: Any) -> list[OpenApiExample]:
    return [OpenApiExample(summary, value=value, response_only=True)]


_CHANNEL = {
    "id": 3,
    "name": "orders slack",
    "kind": "slack",
    "target": "https://hooks.slack.com/services/T024BE7LD/B08ORDERS/8kQz1uVb3mXr7pLc",
    "owner": "orders",
    "created_at": "2026-11-02T09:30:00Z",
}

CHANNEL = [
    OpenApiExample(
        "Team orders' Slack channel",
        value={key: _CHANNEL[key] for key in ("name", "kind", "target", "owner")},
        request_only=True,
    ),
    *_response("Team orders' Slack channel", _CHANNEL),
]

CHANNEL_CREATED = _response(
    "A webhook channel, with its signing secret (shown once)",
    {
        **_CHANNEL,
        "id": 4,
        "name": "orders on-call hook",
        "kind": "webhook",
        "target": "https://hooks.orders.example/watchdog",
        "signing_secret": "whsec_T1pZ8cVq0LmW4rXe7NbY2sKd5HjA9uGf",
    },
)

_MONITOR = {
    "id": 12,
    "name": "s3://tidemark-demo curated/orders_daily",
    "owner": "orders",
    "slug": "orders-daily",
    "external_id": "tidemark:dataset:42",
    "kind": "deadline",
    "period_seconds": None,
    "cron": "30 6 * * *",
    "timezone": "Europe/Berlin",
    "partitioning": "daily",
    "partition_timezone": "UTC",
    "grace_seconds": 900,
    "calendar": "none",
    "holidays_country": "",
    "holidays_subdivision": "",
    "non_business_day": "next_business_day",
    "max_runtime_seconds": None,
    "start_cron": "",
    "start_grace_seconds": None,
    "storage_source": "",
    "storage_template": "",
    "storage_marker": "",
    "post_only": False,
    "system": False,
    "severity": "critical",
    "links": [{"href": "https://tidemark.example/datasets/42", "text": "curated/orders_daily"}],
    "depends_on": ["tidemark:dataset:17:data"],
    "ping_url": f"{PUBLIC_URL}/ping/{PING_KEY}",
    "schedule": "At 06:30 every day, Europe/Berlin, 900 s grace",
    "state": "up",
    "deadline_at": "2026-11-30T05:30:00Z",
    "check_at": "2026-11-30T05:45:00Z",
    "start_expected_at": None,
    "start_check_at": None,
    "last_ping_at": "2026-11-29T04:52:11Z",
    "last_ping_kind": "success",
    "last_success_at": "2026-11-29T04:52:11Z",
    "last_partition": "2026-11-28",
    "paused_by": "",
    "paused_at": None,
    "paused_by_definition": False,
    "channels": [_CHANNEL],
    "open_incidents": 0,
    "created_at": "2026-11-02T09:31:12Z",
}

MONITOR_OUTPUT = _response("A daily deadline monitor that is up", _MONITOR)

MONITOR_DETAIL = _response(
    "A daily deadline monitor, with its next deadlines",
    {
        **_MONITOR,
        "next_deadlines": [
            {"local": "2026-11-30T06:30:00+01:00", "utc": "2026-11-30T05:30:00Z"},
            {"local": "2026-12-01T06:30:00+01:00", "utc": "2026-12-01T05:30:00Z"},
            {"local": "2026-12-02T06:30:00+01:00", "utc": "2026-12-02T05:30:00Z"},
        ],
        "warnings": [],
    },
)

MONITOR_INPUT = _request(
    "A partition due every day at 06:30 Berlin time",
    {
        "name": "orders nightly export",
        "owner": "orders",
        "slug": "orders-export",
        "kind": "deadline",
        "cron": "30 6 * * *",
        "timezone": "Europe/Berlin",
        "partitioning": "daily",
        "grace_seconds": 900,
        "severity": "error",
    },
)

EXTERNAL_MONITOR_INPUT = _request(
    "The catalog's definition of a critical dataset's monitor",
    {
        "name": "s3://tidemark-demo curated/orders_daily",
        "owner": "orders",
        "slug": "orders-daily",
        "kind": "deadline",
        "cron": "30 6 * * *",
        "timezone": "Europe/Berlin",
        "partitioning": "daily",
        "partition_timezone": "UTC",
        "grace_seconds": 900,
        "severity": "critical",
        "links": [{"href": "https://tidemark.example/datasets/42", "text": "curated/orders_daily"}],
        "version": "2026-11-20T16:41:27Z",
        "channels": [
            {
                "kind": "slack",
                "target": _CHANNEL["target"],
                "name": "orders slack",
            }
        ],
        "active": True,
        "ready_partitions": ["2026-11-27", "2026-11-28"],
        "depends_on": ["tidemark:dataset:17:data"],
    },
)

INCIDENT = _response(
    "A missed deadline, resolved when the partition arrived",
    {
        "id": 57,
        "monitor": "s3://tidemark-demo curated/orders_daily",
        "monitor_id": 12,
        "reason": "missed",
        "deadline_at": "2026-11-27T05:30:00Z",
        "partition": "2026-11-26",
        "summary": "s3://tidemark-demo curated/orders_daily: partition 2026-11-26 missed "
        "its 06:30 deadline (900 s grace)",
        "dedup_key": "tidemark-watchdog-b3d1f2a47c5e-57",
        "opened_at": "2026-11-27T05:45:02Z",
        "resolved_at": "2026-11-27T06:12:40Z",
        "part_of": None,
        "held_under": None,
        "held_via": None,
        "held_at": None,
        "released_at": None,
    },
)

HELD_INCIDENT = _response(
    "A missed deadline held under its upstream's incident (not paged)",
    {
        "id": 58,
        "monitor": "s3://tidemark-demo curated/orders_daily data",
        "monitor_id": 12,
        "reason": "missed",
        "deadline_at": "2026-11-28T05:30:00Z",
        "partition": "2026-11-27",
        "summary": "s3://tidemark-demo curated/orders_daily data: no ping partition "
        "2026-11-27 by 2026-11-28 05:30 UTC",
        "dedup_key": "tidemark-watchdog-b3d1f2a47c5e-58",
        "opened_at": "2026-11-28T05:45:02Z",
        "resolved_at": None,
        "part_of": None,
        "held_under": 56,
        "held_via": 56,
        "held_at": "2026-11-28T05:45:02Z",
        "released_at": None,
    },
)

PING_RESULT = _response("The ping was recorded", {"result": "ok"})

_PING_KEY = {
    "id": 2,
    "owner": "orders",
    "name": "orders airflow",
    "prefix": "q7vd",
    "created_at": "2026-11-02T09:40:00Z",
    "revoked_at": None,
}

PING_KEY_INPUT = _request(
    "A ping key for team orders' scheduler", {"owner": "orders", "name": "orders airflow"}
)

PING_KEY_OUTPUT = _response("Team orders' ping key", _PING_KEY)

PING_KEY_CREATED = _response(
    "A new ping key and its slug URL (shown once)",
    {
        **_PING_KEY,
        "key": "q7vdx2m9k4tz0bn8w1rc5p",
        "ping_url": f"{PUBLIC_URL}/ping/q7vdx2m9k4tz0bn8w1rc5p/{{slug}}",
    },
)
