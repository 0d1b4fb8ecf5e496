"""Lineage's Prometheus metrics: events processed by outcome (a counter, recorded by the
workers that process them) and the backlog of events waiting (gauges read at scrape time,
added to the catalog's ``/metrics`` with ``catalog.metrics.register_state``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Q
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from .models import LineageEvent

EVENTS_PROCESSED = Counter(
    "tidemark_lineage_events_processed",
    "OpenLineage events processed by the lineage workers, by outcome: processed, pending "
    "(failed, to be retried), failed (attempts exhausted), claim_lost.",
    ["outcome"],
)


def record_processed(states: Iterable[str | None]) -> None:
    """Count processed events by their new state (None: the claim was lost)."""
    for state in states:
        EVENTS_PROCESSED.labels(state or "claim_lost").inc()


def backlog(now: datetime) -> list[Metric]:
    """The events waiting at ``now`` (aware UTC): all pending ones, and those due now
    (a failed one waits for its next attempt). One aggregate query."""
    waiting = LineageEvent.objects.filter(state=LineageEvent.State.PENDING).aggregate(
        pending=Count("pk"), due=Count("pk", filter=Q(next_attempt_at__lte=now))
    )
    family = GaugeMetricFamily(
        "tidemark_lineage_backlog_events",
        "OpenLineage events received and not processed yet: due (ready for a worker now) or "
        "waiting (for a retry after a failure).",
        labels=["state"],
    )
    family.add_metric(["due"], waiting["due"])
    family.add_metric(["waiting"], waiting["pending"] - waiting["due"])
    return [family]
