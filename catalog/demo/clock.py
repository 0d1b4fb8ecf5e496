"""The demo history's clock: every write of the history happens at an instant of the
story, not when ``load_demo`` runs.

The services take ``now`` explicitly, but some stamp rows with the current time
themselves (``auto_now_add`` fields such as ``Dataset.created_at``, which the partition
timeline reads as the start of tracking, or ``AuditEntry.created_at``), and a few
services read ``timezone.now()`` (registration schedules the first deadline from it).
Inside ``at(instant)`` Django's ``timezone.now`` answers ``instant``, so those rows carry
the story's time as well. Only the history's seeding uses it, in a single thread; the
database's own clock (``Now()`` in SQL, leases) is not touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from django.utils import timezone


@contextmanager
def at(instant: datetime) -> Iterator[datetime]:
    """Run the block as if it were ``instant`` (aware; returned as UTC)."""
    if instant.tzinfo is None:
        raise ValueError("the demo clock takes aware datetimes only")
    instant = instant.astimezone(UTC)
    original = timezone.now
    timezone.now = lambda: instant
    try:
        yield instant
    finally:
        timezone.now = original
