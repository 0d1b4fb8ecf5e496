"""``watchdog.monitor`` and ``watchdog.ping``: what the catalog sends the watchdog for a
critical dataset (``catalog.watchdog_feed``). Never sent to subscribers."""

from __future__ import annotations

from .common import (
    EventType,
    boolean,
    envelope,
    example,
    integer,
    nullable,
    obj,
    string,
)

MONITOR = "watchdog.monitor"
PING = "watchdog.ping"

_MONITOR_COMMON = {
    "owner": string("the owner team's slug"),
    "kind": {"const": "deadline"},
    "cron": string("the dataset's freshness deadline cron"),
    "timezone": string("IANA zone of the cron"),
    "grace_seconds": integer(),
    "calendar": string(
        "none: every deadline counts; business_days: only those on business days",
        enum=["none", "business_days"],
    ),
    "holidays_country": string("ISO 3166-1 alpha-2 code of the holidays, or empty"),
    "holidays_subdivision": string("the country's subdivision code, or empty"),
    "non_business_day": string(
        "what a deadline on a non-business day owed: due at the next business day's "
        "deadline, or not owed",
        enum=["next_business_day", "skip"],
    ),
    "channels": {
        "type": "array",
        "items": obj({"kind": string(), "target": string(), "name": string()}),
    },
    "severity": string(enum=["critical", "error", "warning", "info"]),
    "links": {"type": "array", "items": obj({"href": string(), "text": string()})},
    "active": boolean("false: paused (no longer critical, no SLA, or retired)"),
    "name": string(),
}

_DATA_MONITOR = obj(
    {
        **_MONITOR_COMMON,
        "partitioning": string(enum=["none", "hourly", "daily", "monthly"]),
        "partition_timezone": string(),
        "ready_partitions": {"type": "array", "items": string()},
        # The upstream data monitors its pages are held under (verified lineage).
        "depends_on": {"type": "array", "items": string()},
    }
)
_PIPELINE_MONITOR = obj({**_MONITOR_COMMON, "ping_key": nullable(string(format="uuid"))})

EVENT_TYPES = (
    EventType(
        name=MONITOR,
        audience=("watchdog",),
        description=(
            "A critical dataset's data or pipeline monitor definition, upserted in the "
            "watchdog by external_id; version orders definitions. Holds the pipeline's ping "
            "key: never sent to subscribers."
        ),
        schema=envelope(
            MONITOR,
            obj(
                {
                    "external_id": string(),
                    "version": string("the dataset's last change, ISO 8601"),
                    "monitor": {"oneOf": [_DATA_MONITOR, _PIPELINE_MONITOR]},
                }
            ),
            title="Watchdog monitor definition",
        ),
        example=example(
            MONITOR,
            {
                "external_id": "tidemark:dataset:42:data",
                "version": "2026-11-20T08:00:00Z",
                "monitor": {
                    "owner": "orders",
                    "kind": "deadline",
                    "cron": "0 6 * * *",
                    "timezone": "Europe/Paris",
                    "grace_seconds": 1800,
                    "calendar": "business_days",
                    "holidays_country": "FR",
                    "holidays_subdivision": "",
                    "non_business_day": "next_business_day",
                    "channels": [
                        {"kind": "pagerduty", "target": "R0UTINGKEY", "name": "orders on-call"}
                    ],
                    "severity": "critical",
                    "links": [
                        {
                            "href": "https://tidemark.example.com/datasets/42",
                            "text": "Dataset s3://lake/raw/orders",
                        }
                    ],
                    "active": True,
                    "name": "s3://lake/raw/orders data",
                    "partitioning": "daily",
                    "partition_timezone": "UTC",
                    "ready_partitions": ["2026-11-27", "2026-11-28"],
                    "depends_on": ["tidemark:dataset:17:data"],
                },
            },
        ),
    ),
    EventType(
        name=PING,
        audience=("watchdog",),
        description="A partition of a watched dataset became ready: a ping to its data monitor.",
        schema=envelope(
            PING,
            obj({"external_id": string(), "partition": string()}),
            title="Watchdog ping",
        ),
        example=example(
            PING, {"external_id": "tidemark:dataset:42:data", "partition": "2026-11-28"}
        ),
    ),
)
