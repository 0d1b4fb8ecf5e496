"""The PagerDuty Events API v2 rules a receiver checks, as a JSON Schema: the oracle the
PagerDuty stand-in applies to every event it is sent.

From PagerDuty's Events API v2 reference (send an alert event): ``routing_key`` (32
characters), ``event_action`` (trigger, acknowledge, resolve) and a ``dedup_key`` of at
most 255 characters; a trigger's ``payload`` needs ``summary`` (at most 1024 characters),
``source`` and ``severity`` (critical, error, warning, info), may carry ``timestamp``
(ISO 8601), ``component``, ``group``, ``class`` and ``custom_details`` (an object);
``images`` are ``{src, href?, alt?}``, ``links`` ``{href, text?}``, and ``client`` and
``client_url`` sit at the top level.
"""

from __future__ import annotations

from datetime import datetime

import jsonschema

_STRING = {"type": "string"}
_NON_EMPTY = {"type": "string", "minLength": 1}

PAYLOAD = {
    "type": "object",
    "required": ["summary", "source", "severity"],
    "additionalProperties": False,
    "properties": {
        "summary": {"type": "string", "minLength": 1, "maxLength": 1024},
        "source": _NON_EMPTY,
        "severity": {"enum": ["critical", "error", "warning", "info"]},
        "timestamp": {"type": "string", "format": "date-time"},
        "component": _STRING,
        "group": _STRING,
        "class": _STRING,
        "custom_details": {"type": "object"},
    },
}

EVENT = {
    "type": "object",
    "required": ["routing_key", "event_action"],
    "additionalProperties": False,
    "properties": {
        "routing_key": {"type": "string", "minLength": 32, "maxLength": 32},
        "event_action": {"enum": ["trigger", "acknowledge", "resolve"]},
        "dedup_key": {"type": "string", "minLength": 1, "maxLength": 255},
        "payload": PAYLOAD,
        "client": _STRING,
        "client_url": {"type": "string", "format": "uri"},
        "images": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["src"],
                "additionalProperties": False,
                "properties": {"src": _NON_EMPTY, "href": _STRING, "alt": _STRING},
            },
        },
        "links": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["href"],
                "additionalProperties": False,
                "properties": {"href": {"type": "string", "format": "uri"}, "text": _STRING},
            },
        },
    },
    "allOf": [
        {
            "if": {"properties": {"event_action": {"const": "trigger"}}},
            "then": {"required": ["payload"]},
        },
        {
            "if": {"properties": {"event_action": {"enum": ["acknowledge", "resolve"]}}},
            "then": {"required": ["dedup_key"]},
        },
    ],
}

_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("date-time", raises=ValueError)
def _iso_8601(value: object) -> bool:
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


@_FORMATS.checks("uri", raises=ValueError)
def _absolute_url(value: object) -> bool:
    return not isinstance(value, str) or value.startswith(("https://", "http://"))


def errors(event: object) -> list[str]:
    """What in ``event`` breaks the Events API v2 rules (empty: PagerDuty accepts it)."""
    validator = jsonschema.Draft202012Validator(EVENT, format_checker=_FORMATS)
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(event)'}: {e.message}"
        for e in validator.iter_errors(event)
    ]
