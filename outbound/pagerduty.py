"""PagerDuty Events API v2 events: the one place that shapes what PagerDuty is sent.

https://developer.pagerduty.com/docs/events-api-v2/trigger-events: ``payload.summary`` is
plain text of at most 1024 characters (PagerDuty rejects a longer one), ``source``,
``component``, ``group`` and ``class`` are short plain strings, and ``custom_details`` is
free-form JSON. User-supplied words reach the summary folded to one line and cut, and
``custom_details`` as JSON values, never interpreted. The ``dedup_key`` is the caller's
stable key (one per incident), so a trigger and its resolve pair and a retried trigger
attaches to the open alert.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from .text import one_line

SUMMARY_MAX_CHARS = 1024
FIELD_MAX_CHARS = 255  # source, component, group, class (PagerDuty's dedup_key limit too)
SEVERITIES = ("critical", "error", "warning", "info")


def trigger(
    *,
    routing_key: str,
    dedup_key: str,
    summary: str,
    source: str,
    timestamp: datetime,
    severity: str = "critical",
    component: str = "",
    group: str = "",
    kind: str = "",
    custom_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``trigger`` event.

    Args:
        routing_key: the integration's routing key.
        dedup_key: stable per alert (at most 255 characters), so repeats attach to it.
        summary: any text; sent as one line of at most ``SUMMARY_MAX_CHARS``.
        timestamp: aware datetime of the problem (ISO 8601 in the event).
        severity: one of ``SEVERITIES``.
        component, group, kind: plain labels (``kind`` is PagerDuty's ``class``); one
            line of at most ``FIELD_MAX_CHARS`` each, left out when empty.
        custom_details: JSON-serialisable details shown as they are.

    Raises:
        ValueError: ``severity`` is not one PagerDuty knows, or ``dedup_key`` is too long.
    """
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}")
    payload: dict[str, Any] = {
        "summary": one_line(summary, limit=SUMMARY_MAX_CHARS),
        "source": one_line(source, limit=FIELD_MAX_CHARS),
        "severity": severity,
        "timestamp": timestamp.isoformat(),
    }
    for name, value in (("component", component), ("group", group), ("class", kind)):
        if value:
            payload[name] = one_line(value, limit=FIELD_MAX_CHARS)
    if custom_details is not None:
        payload["custom_details"] = custom_details
    return {**_event(routing_key, "trigger", dedup_key), "payload": payload}


def resolve(*, routing_key: str, dedup_key: str) -> dict[str, Any]:
    """A ``resolve`` event for the alert ``dedup_key`` (the trigger's key).

    Raises:
        ValueError: ``dedup_key`` is too long.
    """
    return _event(routing_key, "resolve", dedup_key)


def _event(routing_key: str, action: str, dedup_key: str) -> dict[str, Any]:
    if len(dedup_key) > FIELD_MAX_CHARS:
        raise ValueError(f"dedup_key is longer than {FIELD_MAX_CHARS} characters")
    return {"routing_key": routing_key, "event_action": action, "dedup_key": dedup_key}


def body(event: dict[str, Any]) -> bytes:
    """An event as the JSON request body."""
    return json.dumps(event).encode()
