"""Template filters of the catalog's pages."""

from __future__ import annotations

import re
from datetime import timedelta

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from ..arrival_profiles import clock_time

register = template.Library()

_SEPARATOR = re.compile(r"([/_.:\-]+)")


@register.filter
def breakable(value: object) -> SafeString:
    """``value`` escaped, with a line-break opportunity (``<wbr>``) after each run of
    ``/ _ . : -``: a long dataset name wraps between its parts on a narrow screen rather
    than in the middle of a word (browsers do not break after ``/`` or ``_`` by themselves).
    The text, copied or searched, is unchanged."""
    return mark_safe(_SEPARATOR.sub(r"\1<wbr>", str(conditional_escape(value))))  # noqa: S308


@register.filter
def duration(value: int | float | timedelta | None) -> str:
    """Seconds (or a timedelta) in words, two units at most: ``1 d 3 h``, ``42 min``,
    ``7 s``; ``""`` for None."""
    if value is None:
        return ""
    seconds = int(value.total_seconds() if isinstance(value, timedelta) else value)
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
        if len(parts) == 2:
            break
    return sign + " ".join(parts)


@register.filter
def arrival_clock(seconds: int | None, partitioning: str) -> str:
    """An arrival offset as a daily partition's local clock time, ``"05:40"``; ``""``
    when it does not read as one (``catalog.arrival_profiles.clock_time``)."""
    return clock_time(seconds, partitioning) or ""
