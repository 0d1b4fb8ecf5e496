"""PagerDuty Events API v2 events: the one place that shapes what PagerDuty is sent.

https://developer.pagerduty.com/docs/events-api-v2/trigger-events: ``payload.summary`` is
plain text of at most 1024 characters (PagerDuty rejects a longer one), ``source``,
``component``, ``group`` and ``class`` are short plain strings, and ``custom_details`` is
free-form JSON. User-supplied words reach the summary folded to one line and cut, and
``custom_details`` as JSON values, never interpreted. At the top level, ``client`` and
``client_url`` name the monitoring tool and where it shows the alert, and ``links`` are
``{href, text}`` objects PagerDuty shows as links: only http(s) addresses are sent, their
text one line. The ``dedup_key`` is the caller's
stable key (one per incident), so a trigger and its resolve pair and a retried trigger
attaches to the open alert.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from .text import one_line

SUMMARY_MAX_CHARS = 1024
FIELD_MAX_CHARS = 255  # source, component, group, class (PagerDuty's dedup_key limit too)
SEVERITIES = ("critical", "error", "warning", "info")
URL_MAX_CHARS = 2048
LINKS_MAX = 10


def web_address(url: str) -> bool:
    """Whether ``url`` is an http(s) address with a host, of at most ``URL_MAX_CHARS``
    characters, with no whitespace or control characters: what may be sent as a link (a
    ``javascript:`` or ``data:`` address never is)."""
    if not url or len(url) > URL_MAX_CHARS or any(c.isspace() or ord(c) < 32 for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


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
    client: str = "",
    client_url: str = "",
    links: Sequence[tuple[str, str]] = (),
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
        client: the monitoring tool's name (one line of at most ``FIELD_MAX_CHARS``),
            left out when empty.
        client_url: where the tool shows the alert; left out (with ``client``) unless
            ``web_address``.
        links: ``(href, text)`` pairs, sent as ``links: [{href, text}]`` in order, at
            most ``LINKS_MAX``; a pair whose ``href`` is not ``web_address`` is left
            out, and ``text`` is one line of at most ``FIELD_MAX_CHARS`` (the address
            when empty).

    Raises:
        ValueError: ``severity`` is not one PagerDuty knows, or ``dedup_key`` is too long.
    """
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}")
    event = _event(routing_key, "trigger", dedup_key)
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
    event["payload"] = payload
    if client and web_address(client_url):
        event["client"] = one_line(client, limit=FIELD_MAX_CHARS)
        event["client_url"] = client_url
    shown = [
        {"href": href, "text": one_line(text, limit=FIELD_MAX_CHARS) or href}
        for href, text in links
        if web_address(href)
    ][:LINKS_MAX]
    if shown:
        event["links"] = shown
    return event


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
