"""The event catalog: every notification type Tidemark sends, with a description, the JSON
Schema (draft 2020-12) of its payload and an example, served by
``GET /api/v1/event-types`` so consumers can validate payloads and generate types.

The schemas live beside the code that builds each payload, one module per family
(``partitions``, ``datasets``, ``change_notices``, ``owners``, ``watchdog``); the tests
check that every payload Tidemark produces validates against its type's schema and that
this catalog and ``Notification.Type`` name the same types.
"""

from __future__ import annotations

from problems import FieldError

from .. import errors
from . import change_notices, datasets, owners, partitions, watchdog
from .common import EventType

EVENT_TYPES: tuple[EventType, ...] = (
    *partitions.EVENT_TYPES,
    *datasets.EVENT_TYPES,
    *change_notices.EVENT_TYPES,
    *owners.EVENT_TYPES,
    *watchdog.EVENT_TYPES,
)
_BY_NAME = {event_type.name: event_type for event_type in EVENT_TYPES}

__all__ = [
    "EVENT_TYPES",
    "EventType",
    "event_type_get",
    "event_type_names",
    "event_type_require",
    "subscriber_event_type_names",
]


def event_type_get(name: str) -> EventType | None:
    """The event type called ``name`` (e.g. ``partition.ready``), or None."""
    return _BY_NAME.get(name)


def event_type_names() -> list[str]:
    """Every event type's name, in the catalog's order."""
    return [event_type.name for event_type in EVENT_TYPES]


def subscriber_event_type_names() -> list[str]:
    """The names of the types a subscription can receive (``audience`` includes
    ``subscribers``), in the catalog's order; the others go to owners' contacts or to the
    watchdog, never to a subscriber's webhook."""
    return [e.name for e in EVENT_TYPES if "subscribers" in e.audience]


def event_type_require(name: str) -> EventType:
    """The event type called ``name``.

    Raises:
        EventTypeNotFound: no such type (404, naming it; ``known`` lists every type).
    """
    event_type = event_type_get(name)
    if event_type is None:
        known = event_type_names()
        raise errors.EventTypeNotFound(
            f"Tidemark sends no {name[:100]!r} notifications; it sends {', '.join(known)}",
            errors=[FieldError("type", f"{name[:100]!r} is not an event type", "known_event_type")],
            extra={"known": known},
        )
    return event_type
