"""Building blocks of the event schemas: the envelope every notification has
(``notices.notification_payload``) and the shapes several types share.

Every schema is JSON Schema draft 2020-12. Objects list their fields and which are
required; they do not forbid others, so a consumer validating with them keeps working
when Tidemark adds a field (Tidemark's own tests check that no field goes undescribed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DIALECT = "https://json-schema.org/draft/2020-12/schema"

Schema = dict[str, Any]

DATE_TIME: Schema = {"type": "string", "format": "date-time", "description": "UTC, ISO 8601"}


@dataclass(frozen=True)
class EventType:
    """One notification type Tidemark sends: its name (``Notification.Type``), who
    receives it (``audience``: ``subscribers`` (their webhooks), ``owners`` (the contacts
    of the team owning the dataset or endpoint), ``consumers`` (consumer teams'
    contacts) or ``watchdog``), a description, the JSON Schema of the whole payload and an example
    payload that validates against it."""

    name: str
    audience: tuple[str, ...]
    description: str
    schema: Schema
    example: dict[str, Any]


def nullable(schema: Schema) -> Schema:
    """``schema`` or JSON null."""
    return {"anyOf": [schema, {"type": "null"}]}


def string(description: str = "", **more: Any) -> Schema:
    """A string field (``more``: e.g. ``enum``, ``format``)."""
    return {"type": "string", **({"description": description} if description else {}), **more}


def integer(description: str = "") -> Schema:
    """An integer field."""
    return {"type": "integer", **({"description": description} if description else {})}


def boolean(description: str = "") -> Schema:
    """A boolean field."""
    return {"type": "boolean", **({"description": description} if description else {})}


def obj(properties: dict[str, Schema], *, optional: tuple[str, ...] = ()) -> Schema:
    """An object with ``properties``, all required but ``optional``."""
    return {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
    }


def dataset_ref(*, with_id: bool) -> Schema:
    """The dataset a notification is about (``id`` where the type carries it)."""
    fields = {"namespace": string("OpenLineage namespace"), "name": string("OpenLineage name")}
    if with_id:
        fields = {"id": integer("the dataset's id in /api/v1/datasets/{id}"), **fields}
    return obj(fields)


def envelope(name: str, data: Schema, *, title: str) -> Schema:
    """The schema of a whole ``name`` payload whose ``data`` is ``data``."""
    return {
        "$schema": DIALECT,
        "$id": f"urn:tidemark:event-type:{name}",
        "title": title,
        **obj(
            {
                "id": string(
                    "the notification's stable id, also the webhook-id header: the same on "
                    "every attempt and replay",
                    format="uuid",
                ),
                "type": {"const": name},
                "timestamp": DATE_TIME,
                "data": data,
            }
        ),
    }


def example(name: str, data: dict[str, Any], *, at: str = "2026-11-29T06:00:04Z") -> dict:
    """An example payload of type ``name``."""
    return {
        "id": "0b9c6f3e-3f6d-4a4e-9d0b-6c1f2e5a7d10",
        "type": name,
        "timestamp": at,
        "data": data,
    }
