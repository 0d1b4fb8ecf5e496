"""What PostgreSQL and UTF-8 cannot store, checked where input comes in (JSON and YAML
bodies, path and query text), so it is a 400 naming the field rather than a 500 from the
driver. Pure: no Django."""

from __future__ import annotations

import re
from typing import Any

from problems import FieldError, ValidationProblem

# The deepest nesting a JSON or YAML body may have (objects and arrays, counted from 1).
MAX_DEPTH = 64
# PostgreSQL's text and jsonb refuse NUL; UTF-8 cannot encode a UTF-16 surrogate left
# unpaired (a JSON "\ud800" or a YAML "\ud800" escape).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def has_unstorable(text: str) -> bool:
    """Whether ``text`` holds a NUL or a lone surrogate."""
    return UNSTORABLE.search(text) is not None


def check_storable(value: Any, path: str = "", depth: int = 0) -> None:
    """Walk a parsed body (dicts, lists, scalars) and refuse what cannot be stored.

    Args:
        value: the parsed document; non-string keys (YAML allows them) are left alone.
        path: the dotted path of ``value`` in the body ("" for the body itself).
        depth: the nesting of ``value`` (0 for the body).

    Raises:
        ValidationProblem: a string (key or value) holding a NUL or a lone surrogate (rule
            ``text``), or nesting deeper than ``MAX_DEPTH`` (rule ``depth``), naming the
            first offending path.
    """
    if depth > MAX_DEPTH:
        raise ValidationProblem(
            f"the body is nested deeper than {MAX_DEPTH} levels",
            errors=[FieldError(path or "body", f"nested deeper than {MAX_DEPTH} levels", "depth")],
        )
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if isinstance(key, str):
                _check_text(key, child)
            check_storable(item, child, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_storable(item, f"{path}.{index}" if path else str(index), depth + 1)


def _check_text(text: str, path: str) -> None:
    if has_unstorable(text):
        raise ValidationProblem(
            f"{path or 'body'} holds a NUL character or a lone UTF-16 surrogate",
            errors=[FieldError(path or "body", "NUL or lone surrogate in a string", "text")],
        )
