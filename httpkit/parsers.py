"""A JSON parser that refuses what PostgreSQL's jsonb and UTF-8 cannot store."""

from __future__ import annotations

import json

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from .storable import MAX_DEPTH, check_storable


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
        check_storable(data)
        return data


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value
