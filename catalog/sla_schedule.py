"""What a dataset's SLA schedule shows people: warnings about its cron expression, and its
next deadlines in the SLA's own zone and in UTC.

Pure reads of the dataset's fields; the deadlines come from ``schedules`` (the one DST
policy), exactly as freshness judges them.
"""

from __future__ import annotations

from datetime import datetime

from problems import FieldWarning
from schedules import cron_checks, local_and_utc

from . import freshness_state
from .models import Dataset

NEXT_DEADLINES = 3


def sla_warnings(dataset: Dataset) -> list[FieldWarning]:
    """The warnings of the dataset's stored ``sla_cron``."""
    return cron_checks.field_warnings("sla_cron", dataset.sla_cron)


def upcoming_deadlines(
    dataset: Dataset, *, now: datetime, count: int = NEXT_DEADLINES
) -> list[datetime]:
    """The dataset's next ``count`` SLA deadlines strictly after ``now`` (aware UTC),
    oldest first; empty without an SLA (no cron, or unpartitioned)."""
    sla = freshness_state.sla_of(dataset)
    if sla is None:
        return []
    found, at = [], now
    for _ in range(count):
        at = sla.next_deadline(at)
        found.append(at)
    return found


def next_deadlines(
    dataset: Dataset, *, now: datetime, count: int = NEXT_DEADLINES
) -> list[dict[str, str]]:
    """``upcoming_deadlines`` as the API gives them, each ``{"local": ISO 8601 with the
    sla_timezone's offset, "utc": ISO 8601 ending in Z}``."""
    return [
        local_and_utc(at, dataset.sla_timezone)
        for at in upcoming_deadlines(dataset, now=now, count=count)
    ]
