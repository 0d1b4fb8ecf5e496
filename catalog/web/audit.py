"""What the audit trail shows of an entry (``AuditEntry.changes``, ``{field: [old, new]}``):
only the fields that changed and apply to it, their values in words. Pure: no ORM.

Services record whole records at once (a registration writes every audited field, an
announcement its emergency flag and empty override reason); the page leaves out what did
not change (an old and a new value that are equal, or both blank: none, ``""``, ``[]``,
``{}`` or false) and, for a value set for the first time, what does not apply given the
entry's other values (a success marker's file name for a dataset completing by event).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..templatetags.tidemark import duration

# field: (the field deciding whether it applies, the test on that field's new value).
# Only values set for the first time (old value none) are left out by these rules: a
# change of a value that was set is always shown.
APPLIES_WHEN = {
    "success_marker": ("completion_signal", lambda signal: signal == "success_marker"),
    "manifest_name": ("completion_signal", lambda signal: signal == "manifest"),
    "location_template": ("storage_source", bool),
    "sla_timezone": ("sla_cron", bool),
    "sla_grace_seconds": ("sla_cron", bool),
    "sla_holidays_country": ("sla_calendar", lambda calendar: calendar == "business_days"),
    "sla_holidays_subdivision": ("sla_calendar", lambda calendar: calendar == "business_days"),
    "sla_non_business_day": ("sla_calendar", lambda calendar: calendar == "business_days"),
    "partition_timezone": ("partitioning", lambda partitioning: partitioning != "none"),
    "sunset_at": ("lifecycle", lambda lifecycle: lifecycle != "active"),
}
_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class ShownChange:
    """One line of an entry: ``field``, its ``old`` value in words (None when it was set
    for the first time) and its ``new`` one (None when it was cleared)."""

    field: str
    old: str | None
    new: str | None


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def _blank(value: Any) -> bool:
    return _empty(value) or value is False


def _pair(value: Any) -> tuple[Any, Any]:
    """``[old, new]``, or anything else recorded as the new value alone."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return value[0], value[1]
    return None, value


def words(field: str, value: Any) -> str:
    """``value`` of ``field`` for a person: an ISO datetime as ``2026-12-30 09:19 UTC``,
    ``*_seconds`` as a duration (``30 min``), a list comma-joined, booleans yes/no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if field.endswith("_seconds") and isinstance(value, int):
        return duration(value)
    if isinstance(value, list | tuple):
        return ", ".join(words(field, item) for item in value)
    if isinstance(value, str) and _ISO_DATETIME.match(value):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
        return moment.strftime("%Y-%m-%d %H:%M") + " UTC"
    return str(value)


def shown_changes(changes: dict[str, Any]) -> list[ShownChange]:
    """The lines an audit entry shows, in the order recorded.

    Args:
        changes: the entry's ``changes``, ``{field: [old, new]}`` (JSON values).

    Returns:
        One ``ShownChange`` per field that changed and applies (see the module's rules);
        empty when nothing did.
    """
    news = {field: _pair(value)[1] for field, value in changes.items()}
    shown = []
    for field, value in changes.items():
        old, new = _pair(value)
        if old == new or (_blank(old) and _blank(new)):
            continue
        rule = APPLIES_WHEN.get(field)
        if old is None and rule is not None and rule[0] in news and not rule[1](news[rule[0]]):
            continue
        shown.append(
            ShownChange(
                field=field,
                old=None if old is None else words(field, old),
                new=None if _empty(new) else words(field, new),
            )
        )
    return shown


def action_words(action: str) -> str:
    """An entry's action for a person: ``change_notice.announced`` as ``change notice
    announced``."""
    return action.replace(".", " ").replace("_", " ")
