"""Checking notification payloads against the event catalog (``catalog.event_types``).

The published schemas leave objects open (a consumer keeps working when Tidemark adds a
field); here every object that lists its fields is closed, so a payload field that the
catalog does not describe fails as surely as a missing or mistyped one.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from jsonschema import Draft202012Validator

from catalog.event_types import event_type_get


def closed(schema: Any) -> Any:
    """A copy of ``schema`` in which every object listing ``properties`` forbids others
    (unless it says what it allows)."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


@functools.cache
def _validator(type: str) -> Draft202012Validator | None:
    event_type = event_type_get(type)
    if event_type is None:
        return None
    return Draft202012Validator(
        closed(event_type.schema), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def payload_problems(type: str, payload: Any) -> list[str]:
    """Why ``payload`` (a whole notification document) is not a valid ``type`` payload;
    empty when it is."""
    validator = _validator(type)
    if validator is None:
        return [f"{type!r} is not in the event catalog"]
    return [
        f"{type} at /{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(payload)
    ]
