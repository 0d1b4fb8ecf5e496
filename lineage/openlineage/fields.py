"""The core members of an event: its kind, objects, strings and UUIDs, each error named by
its field and rule."""

from __future__ import annotations

import uuid
from typing import Any

from problems import FieldError
from problems import required as missing

RUN, JOB, DATASET = "run", "job", "dataset"
MAX_JOB_NAMESPACE_LENGTH = 255
MAX_JOB_NAME_LENGTH = 1024
MAX_RUN_ID_LENGTH = 64


# The ``schemaURL`` fragment (``.../OpenLineage.json#/$defs/JobEvent``) names a job or
# dataset event, and Marquez reads it first (its EventTypeResolver), so a JobEvent that
# also sends an ``eventType`` is a JobEvent. Any other fragment, RunEvent included, leaves
# the kind to the body's shape: Marquez would take it as a RunEvent, but bodies shaped as
# job or dataset events under a RunEvent schemaURL were accepted as such before.
_KIND_FRAGMENTS = {"JobEvent": JOB, "DatasetEvent": DATASET}


def kind_of(data: dict) -> str:
    """The event's kind, ``RUN``, ``JOB`` or ``DATASET`` (the module docstring's rule)."""
    schema_url = data.get("schemaURL")
    if isinstance(schema_url, str) and "#" in schema_url:
        fragment = schema_url.rsplit("#", 1)[1].rstrip("/").rsplit("/", 1)[-1]
        if fragment in _KIND_FRAGMENTS:
            return _KIND_FRAGMENTS[fragment]
    if "run" in data or "eventType" in data:
        return RUN
    if "dataset" in data and "job" not in data:
        return DATASET
    if "job" in data:
        return JOB
    return RUN


def object_member(
    data: dict,
    key: str,
    missing_field: str,
    errors: list[FieldError],
    also_missing: tuple[str, ...] = (),
) -> dict | None:
    """``data[key]`` when it is an object; a missing one is reported as its required
    members (``missing_field`` and ``also_missing``) being missing."""
    value = data.get(key)
    if value is None:
        for field in (missing_field, *also_missing):
            errors.append(missing(field))
        return None
    if not isinstance(value, dict):
        errors.append(FieldError(key, f"{key} must be an object", "object"))
        return None
    return value


def text_member(
    data: dict, key: str, path: str, max_length: int, errors: list[FieldError]
) -> str | None:
    """``data[key]`` as a non-empty string of at most ``max_length`` characters; else None,
    with the error (``required``, ``string``, ``max_length``) named ``path.key``."""
    field = f"{path}.{key}"
    value = data.get(key)
    if value is None or value == "":
        errors.append(missing(field))
    elif not isinstance(value, str):
        errors.append(FieldError(field, f"{field} must be a string", "string"))
    elif len(value) > max_length:
        errors.append(
            FieldError(field, f"{field} is longer than {max_length} characters", "max_length")
        )
    else:
        return value
    return None


def run_id_member(value: Any, field: str, errors: list[FieldError]) -> uuid.UUID | None:
    """A required UUID; None, with the error named ``field``, when missing or malformed."""
    if value is None or value == "":
        errors.append(missing(field))
        return None
    parsed = parse_uuid(value)
    if parsed is None:
        errors.append(FieldError(field, f"{field} must be a UUID", "uuid"))
    return parsed


def parse_uuid(value: Any) -> uuid.UUID | None:
    """``value`` as a UUID (a string of at most ``MAX_RUN_ID_LENGTH``), else None."""
    if not isinstance(value, str) or len(value) > MAX_RUN_ID_LENGTH:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
