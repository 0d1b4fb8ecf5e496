"""``change_notice.announced``, ``.reminder`` and ``.effective``
(``catalog.change_notices``: ``notice_data`` and what each step adds)."""

from __future__ import annotations

from typing import Any

from .common import (
    DATE_TIME,
    EventType,
    Schema,
    boolean,
    dataset_ref,
    envelope,
    example,
    integer,
    obj,
    string,
)

ANNOUNCED = "change_notice.announced"
REMINDER = "change_notice.reminder"
EFFECTIVE = "change_notice.effective"

KINDS = [
    "breaking_schema_change",
    "semantic_change",
    "deprecation",
    "location_move",
    "retirement",
]


def _data(fields: dict[str, Schema]) -> Schema:
    return obj(
        {
            "team": string(
                "the team whose people are told (only in a notice to a team's contacts)"
            ),
            "notice_id": integer(),
            "dataset": dataset_ref(with_id=True),
            "owner": string("the owner team's slug"),
            "kind": string(enum=KINDS),
            "description": string(),
            "schema_diff": {"description": "the announced schema difference, as given, or null"},
            "link": string("a link to details; empty when none"),
            "announced_at": DATE_TIME,
            "effective_at": DATE_TIME,
            "emergency": boolean("announced with less than the notice period"),
            "override_reason": string("why, for an emergency; else empty"),
            "require_acknowledgements": boolean(),
            "acknowledge_path": string("POST here to acknowledge"),
            **fields,
        },
        optional=("team",),
    )


_EXAMPLE: dict[str, Any] = {
    "notice_id": 3,
    "dataset": {"id": 42, "namespace": "s3://lake", "name": "raw/orders"},
    "owner": "orders",
    "kind": "breaking_schema_change",
    "description": "customer_id becomes a string",
    "schema_diff": None,
    "link": "https://wiki.example.com/orders-v3",
    "announced_at": "2026-11-15T10:00:00Z",
    "effective_at": "2026-11-29T10:00:00Z",
    "emergency": False,
    "override_reason": "",
    "require_acknowledgements": True,
    "acknowledge_path": "/api/v1/datasets/42/change-notices/3/acknowledgements",
}

EVENT_TYPES = (
    EventType(
        name=ANNOUNCED,
        audience=("subscribers", "consumers"),
        description=(
            "The owner announced a change to a dataset (schema, meaning, location, "
            "deprecation, retirement) effective at effective_at. Subscribers' webhooks get "
            "it, and every consumer team's contacts (with team set)."
        ),
        schema=envelope(ANNOUNCED, _data({}), title="Change notice announced"),
        example=example(ANNOUNCED, _EXAMPLE, at="2026-11-15T10:00:00Z"),
    ),
    EventType(
        name=REMINDER,
        audience=("subscribers", "consumers"),
        description=(
            "A reminder of a change notice, reminder_seconds_before its effective time, "
            "sent only to the consumer teams that have not acknowledged it yet: to their "
            "subscriptions' webhooks and their contacts."
        ),
        schema=envelope(
            REMINDER,
            _data({"reminder_seconds_before": integer()}),
            title="Change notice reminder",
        ),
        example=example(
            REMINDER, {**_EXAMPLE, "reminder_seconds_before": 259200}, at="2026-11-26T10:00:00Z"
        ),
    ),
    EventType(
        name=EFFECTIVE,
        audience=("subscribers", "owners"),
        description="A change notice took effect (at its effective time, or applied early).",
        schema=envelope(
            EFFECTIVE,
            _data({"took_effect_at": DATE_TIME, "applied_early": boolean()}),
            title="Change notice effective",
        ),
        example=example(
            EFFECTIVE,
            {**_EXAMPLE, "took_effect_at": "2026-11-29T10:00:00Z", "applied_early": False},
            at="2026-11-29T10:00:02Z",
        ),
    ),
)
