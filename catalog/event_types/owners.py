"""Notices to a team's own people: an endpoint's lifecycle, ``endpoint.disabled``
(``catalog.delivery``), ``endpoint.enabled`` (``catalog.services.endpoints``) and
``endpoint.recovered`` (``catalog.recovery``); and ``schema.unannounced_change``
(``catalog.schema_changes``); all through ``notices.notify_owner``, which adds the team's
slug as ``team``."""

from __future__ import annotations

from .common import (
    DATE_TIME,
    EventType,
    dataset_ref,
    envelope,
    example,
    integer,
    nullable,
    obj,
    string,
)

ENDPOINT_DISABLED = "endpoint.disabled"
ENDPOINT_ENABLED = "endpoint.enabled"
ENDPOINT_RECOVERED = "endpoint.recovered"
SCHEMA_UNANNOUNCED_CHANGE = "schema.unannounced_change"

EVENT_TYPES = (
    EventType(
        name=ENDPOINT_DISABLED,
        audience=("owners",),
        description=(
            "Tidemark stopped delivering to one of the team's webhook endpoints (it answered "
            "410 Gone, or kept failing too long). Deliveries wait until it is re-enabled; the "
            "failed ones are dead letters that can be replayed. Sent to the team's contacts."
        ),
        schema=envelope(
            ENDPOINT_DISABLED,
            obj(
                {
                    "team": string("the endpoint's team"),
                    "endpoint_id": integer("the endpoint's id in /api/v1/endpoints"),
                    "url": string(),
                    "reason": string(),
                }
            ),
            title="Endpoint disabled",
        ),
        example=example(
            ENDPOINT_DISABLED,
            {
                "team": "analytics",
                "endpoint_id": 9,
                "url": "https://hooks.example.com/tidemark",
                "reason": "answered 410 Gone",
            },
        ),
    ),
    EventType(
        name=ENDPOINT_ENABLED,
        audience=("owners",),
        description=(
            "One of the team's disabled webhook endpoints was enabled again (by a member, on "
            "the team page or with POST /api/v1/endpoints/{id}/enable). The deliveries that "
            "waited while it was disabled are being sent; its dead letters are not: recover "
            "them (POST /api/v1/endpoints/{id}/recover). Sent to the team's contacts."
        ),
        schema=envelope(
            ENDPOINT_ENABLED,
            obj(
                {
                    "team": string("the endpoint's team"),
                    "endpoint_id": integer("the endpoint's id in /api/v1/endpoints"),
                    "url": string(),
                    "disabled_at": nullable(DATE_TIME),
                    "disabled_reason": string("why it had been disabled"),
                    "waiting": integer("deliveries that waited while it was disabled, now sent"),
                    "dead_letters": integer("its failed deliveries a recovery can send again"),
                }
            ),
            title="Endpoint enabled",
        ),
        example=example(
            ENDPOINT_ENABLED,
            {
                "team": "analytics",
                "endpoint_id": 9,
                "url": "https://hooks.example.com/tidemark",
                "disabled_at": "2026-11-28T06:10:00Z",
                "disabled_reason": "answered 410 Gone",
                "waiting": 12,
                "dead_letters": 3,
            },
        ),
    ),
    EventType(
        name=ENDPOINT_RECOVERED,
        audience=("owners",),
        description=(
            "A recovery of one of the team's webhook endpoints (POST "
            "/api/v1/endpoints/{id}/recover, or the team page) queued its failed deliveries "
            "since a time again, each with its original webhook-id. `remaining` counts the "
            "failed deliveries past the recovery's maximum per request, which the next "
            "recovery with the same `since` sends. Sent to the team's contacts."
        ),
        schema=envelope(
            ENDPOINT_RECOVERED,
            obj(
                {
                    "team": string("the endpoint's team"),
                    "endpoint_id": integer("the endpoint's id in /api/v1/endpoints"),
                    "url": string(),
                    "since": DATE_TIME,
                    "queued": integer("failed deliveries queued again"),
                    "remaining": integer("failed deliveries since `since` not queued yet"),
                }
            ),
            title="Endpoint recovered",
        ),
        example=example(
            ENDPOINT_RECOVERED,
            {
                "team": "analytics",
                "endpoint_id": 9,
                "url": "https://hooks.example.com/tidemark",
                "since": "2026-11-28T06:00:00Z",
                "queued": 41,
                "remaining": 0,
            },
        ),
    ),
    EventType(
        name=SCHEMA_UNANNOUNCED_CHANGE,
        audience=("owners",),
        description=(
            "A dataset was seen (by lineage or a readiness event) with a breaking schema "
            "change (a column removed or retyped) that no change notice announced. Sent to "
            "the owner team's contacts; its consumers were not told."
        ),
        schema=envelope(
            SCHEMA_UNANNOUNCED_CHANGE,
            obj(
                {
                    "team": string("the owner team"),
                    "change_id": integer("the change's id in the unannounced-changes report"),
                    "dataset": dataset_ref(with_id=True),
                    "owner": string("the owner team's slug"),
                    "observed_at": DATE_TIME,
                    "removed": {"type": "array", "items": string("a column path")},
                    "retyped": {
                        "type": "array",
                        "items": obj({"name": string(), "from": string(), "to": string()}),
                    },
                    "added": {"type": "array", "items": string("a column path")},
                    "source": string("where the schema was seen", enum=["lineage", "readiness"]),
                    "job": nullable(obj({"namespace": string(), "name": string()})),
                    "run_id": nullable(string(format="uuid")),
                    "readiness_event_id": nullable(integer()),
                    "report_path": string("the governance report listing it"),
                }
            ),
            title="Unannounced schema change",
        ),
        example=example(
            SCHEMA_UNANNOUNCED_CHANGE,
            {
                "team": "orders",
                "change_id": 5,
                "dataset": {"id": 42, "namespace": "s3://lake", "name": "raw/orders"},
                "owner": "orders",
                "observed_at": "2026-11-29T05:41:10Z",
                "removed": ["discount"],
                "retyped": [{"name": "customer_id", "from": "bigint", "to": "varchar"}],
                "added": [],
                "source": "lineage",
                "job": {"namespace": "airflow", "name": "orders.load"},
                "run_id": "3f1d3a8e-8a55-4f0b-bb1e-2b87a5a3a0c2",
                "readiness_event_id": None,
                "report_path": "/api/v1/reports/unannounced-changes",
            },
        ),
    ),
)
