"""Lineage's retention rule: raw OpenLineage events, once processed (run by
``pruning.engine``; default in ``TIDEMARK_RETENTION``).

What the events taught stays: runs, jobs, usage edges and their run counts, schemas. Never
deleted: pending events (work still to do), failed ones (kept for a look and a retry),
and events a run conflict or a schema observation names (the evidence governance reads).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet

from catalog.models import RunConflict, SchemaObservation
from pruning.engine import Rule

from .models import LineageEvent


def prunable_lineage_events(now: datetime) -> QuerySet[LineageEvent]:
    """Events processed more than ``lineage_events_days`` before ``now`` that no run
    conflict or schema observation names."""
    cutoff = now - timedelta(days=settings.TIDEMARK_RETENTION["lineage_events_days"])
    return LineageEvent.objects.filter(
        state=LineageEvent.State.PROCESSED, processed_at__lt=cutoff
    ).exclude(
        Q(Exists(RunConflict.objects.filter(event_id=OuterRef("pk"))))
        | Q(Exists(SchemaObservation.objects.filter(lineage_event_id=OuterRef("pk"))))
    )


RULES = [
    Rule(
        "lineage_events",
        LineageEvent,
        prunable_lineage_events,
        keeps="pending and failed events; events a run conflict or schema observation names",
    ),
]
