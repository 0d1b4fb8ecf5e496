"""Examples of endpoints, deliveries and their attempts: team finance's webhook
``https://hooks.finance.example/tidemark``, told that ``curated/orders_daily``'s partition
2026-11-28 is ready."""

from __future__ import annotations

from catalog import event_types

from . import request, response

URL = "https://hooks.finance.example/tidemark"
_PARTITION_READY = event_types.event_type_require("partition.ready").example
WEBHOOK_ID = _PARTITION_READY["id"]

ENDPOINT_OUTPUT = response(
    "An active webhook endpoint",
    {
        "id": 5,
        "kind": "webhook",
        "url": URL,
        "is_active": True,
        "disabled_reason": "",
        "failing_since": None,
        "disabled_at": None,
        "outage_started_at": None,
        "previous_secret_expires_at": None,
        "rate_limit_per_second": None,
        "throttled_until": None,
        "created_at": "2026-11-03T10:02:55Z",
        "deliveries": {
            "succeeded": 311,
            "waiting": 0,
            "dead_letters": 2,
            "success_rate": 0.9936,
        },
    },
)

SECRET_OUTPUT = response(
    "A new secret; the old one signs for another day",
    {
        "endpoint_secret": "whsec_MfKQ9r1cW0a2Jp7yXbD4nL8sT3vE6uHq",
        "previous_secret_expires_at": "2026-11-30T08:00:00Z",
    },
)

REPLAY_OUTPUT = response("Two dead letters sent again", {"replayed": 2})

_DELIVERY = {
    "id": 9021,
    "webhook_id": WEBHOOK_ID,
    "type": "partition.ready",
    "endpoint_id": 5,
    "endpoint_url": URL,
    "state": "succeeded",
    "attempts": 1,
    "next_attempt_at": "2026-11-29T04:52:11Z",
    "last_attempt_at": "2026-11-29T04:52:11Z",
    "last_status_code": 204,
    "last_error_kind": "",
    "last_error": "",
    "finished_at": "2026-11-29T04:52:11Z",
    "created_at": "2026-11-29T04:52:10Z",
}

DELIVERY_OUTPUT = response("A partition.ready delivered on the first attempt", _DELIVERY)

DELIVERY_DETAIL_OUTPUT = response(
    "A delivery with its payload and attempts",
    {
        **_DELIVERY,
        "payload": _PARTITION_READY,
        "attempt_log": [
            {
                "number": 1,
                "started_at": "2026-11-29T04:52:11Z",
                "duration_ms": 84,
                "status_code": 204,
                "decision": "succeeded",
                "error_kind": "",
                "error": "",
                "response_excerpt": "",
                "next_attempt_in_seconds": None,
            }
        ],
    },
)

ENDPOINT_UPDATE_INPUT = request(
    "At most two deliveries a second to this endpoint",
    {"rate_limit_per_second": 2},
)

ENDPOINT_RECOVER_INPUT = request(
    "Send again what failed since the outage began",
    {"since": "2026-11-28T22:00:00Z"},
)

ENDPOINT_RECOVER_OUTPUT = response(
    "Four failed deliveries queued again",
    {
        "queued": 4,
        "remaining": 0,
        "since": "2026-11-28T22:00:00Z",
        "earliest_since": "2026-11-15T08:00:00Z",
    },
)

ATTEMPT_LOG_OUTPUT = response(
    "A failed attempt, retried in five minutes",
    {
        "id": 20417,
        "delivery_id": 9022,
        "webhook_id": "5b9e2f0c-1d3a-4c8e-8f61-7e2d9a0b4c35",
        "type": "dataset.late",
        "number": 2,
        "attempted_at": "2026-11-29T06:16:03Z",
        "status_code": 503,
        "error_kind": "",
        "error": "",
        "outcome": "retry",
        "latency_ms": 312,
        "response_excerpt": "upstream connect error",
        "next_attempt_in_seconds": 300.0,
    },
)
