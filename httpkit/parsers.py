"""A JSON parser that refuses what PostgreSQL's jsonb and UTF-8 cannot store."""

from __future__ import annotations

import json
import re
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from problems import FieldError, ValidationProblem

MAX_DEPTH = 64
# What jsonb and UTF-8 cannot store: NUL, and a UTF-16 surrogate left unpaired by \uXXXX.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


class StrictJSONParser(parsers.JSONParser):
    """RFC 8259 JSON only: no NaN/Infinity, no overflowing numbers, nesting at most 64 deep,
    and no string (key or value) holding a NUL or a lone surrogate. Anything else is a 400
    naming the offending field, never a 500 from the database or the renderer."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            data = json.loads(
                raw.decode("utf-8"),
                parse_constant=_no_constant,
                parse_float=_finite_float,
            )
        except RecursionError as exc:
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels") from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error: {exc}") from exc
        _check(data, "", 0)
        return data


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _check(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValidationProblem(
            f"JSON nested deeper than {MAX_DEPTH} levels",
            errors=[FieldError(path or "body", f"nested deeper than {MAX_DEPTH} levels", "depth")],
        )
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            _check_text(key, child)
            _check(item, child, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}.{index}" if path else str(index), depth + 1)


def _check_text(text: str, path: str) -> None:
    if _UNSTORABLE.search(text):
        raise ValidationProblem(
            f"{path or 'body'} holds a NUL character or a lone UTF-16 surrogate",
            errors=[FieldError(path or "body", "NUL or lone surrogate in a string", "text")],
        )
