"""``eventTime`` (and the nominal-time facet's times): RFC 3339 date-times, read to aware
UTC."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from problems import FieldError

from ..errors import EventTimeInvalid

_DATE_TIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}(?::\d{2})?)"
    r"(?:[.,](?P<fraction>\d{1,12}))?"
    r"(?P<offset>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)


def parse_event_time(value: Any) -> tuple[datetime, bool]:
    """Read an RFC 3339 date-time (``2026-11-28T06:12:03.418Z``, ``...+10:00``).

    Args:
        value: the ``eventTime`` member as decoded.

    Returns:
        ``(instant in aware UTC, assumed_utc)``; ``assumed_utc`` is True when the text had
        no offset and was read as UTC. Digits beyond microseconds are dropped.

    Raises:
        EventTimeInvalid: not a string of that form, or not a real instant (400).
    """
    match = _DATE_TIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise _bad_time(value)
    text = f"{match['date']}T{match['time']}"
    if match["fraction"]:
        text += "." + match["fraction"][:6].ljust(6, "0")
    offset = match["offset"]
    if offset in ("Z", "z"):
        text += "+00:00"
    elif offset:
        digits = offset[1:].replace(":", "")
        text += f"{offset[0]}{digits[:2]}:{digits[2:] or '00'}"
    try:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC), True
        return parsed.astimezone(UTC), False
    except (ValueError, OverflowError) as exc:
        raise _bad_time(value) from exc


def _bad_time(value: Any) -> EventTimeInvalid:
    shown = value[:40] if isinstance(value, str) else type(value).__name__
    return EventTimeInvalid(
        f"eventTime must be an RFC 3339 date-time such as 2026-11-28T06:12:03Z, got {shown!r}",
        errors=[FieldError("eventTime", "not an RFC 3339 date-time", "date_time")],
    )
