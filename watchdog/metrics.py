"""The watchdog's Prometheus metrics (``GET /metrics`` on its own server; docs/operations.md,
Metrics, says what each means).

Counters and histograms are recorded by the loop (``run_watchdog``): pages by channel
kind and result, deadlines missed, cycle durations. With ``PROMETHEUS_MULTIPROC_DIR``
shared by the loop and the watchdog's web server on one host, the server's ``/metrics``
sums the loop's values too (``httpkit.metrics``). Gauges (monitors by state, open
incidents, pages waiting, the loop's and the heartbeat's age) are read from the watchdog's
database at scrape time. The watchdog deployed alone imports nothing of the catalog.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from httpkit import metrics as http_metrics

from . import holds
from .models import Incident, LoopState, Monitor, Page

PAGES = Counter(
    "tidemark_watchdog_pages",
    "Page attempts written back, by channel kind and result: sent, retrying (failed, to "
    "be tried again), failed (rejected or out of attempts).",
    ["channel", "result"],
)
DEADLINES_MISSED = Counter(
    "tidemark_watchdog_deadlines_missed",
    "Deadlines the loop newly found missed (a missing ping or partition, an overrun or a "
    "late start): each opens an incident.",
)
CYCLE_DURATION = Histogram(
    "tidemark_watchdog_cycle_duration_seconds",
    "Time one watchdog loop cycle took: judging due deadlines, sending due pages, the "
    "heartbeat and, now and then, pruning.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


def record_page(*, channel: str, result: str) -> None:
    """Count one written-back page attempt to a channel of kind ``channel``."""
    PAGES.labels(channel, result).inc()


def record_cycle(*, duration_ms: float, missed: int) -> None:
    """Record one loop cycle: its duration (milliseconds) and the deadlines it newly found
    missed."""
    CYCLE_DURATION.observe(duration_ms / 1000)
    DEADLINES_MISSED.inc(missed)


class WatchdogCollector(http_metrics.StateCollector):
    """The watchdog's state, read at scrape time (``state``)."""

    up_name = "tidemark_watchdog_database_up"
    up_help = (
        "1 when the watchdog's database answered this scrape's state queries, else 0 "
        "(and no state gauges)."
    )

    def read(self, now: datetime) -> list[Metric]:
        return state(now=now)


def state(*, now: datetime) -> list[Metric]:
    """The watchdog's state gauges at ``now`` (aware UTC): five aggregate queries (monitors
    by state, open incidents by reason, pages waiting, held incidents, the loop's state
    row).

    Raises:
        DatabaseError when the database does not answer.
    """
    monitors = GaugeMetricFamily(
        "tidemark_watchdog_monitors",
        "Monitors by state (new, up, down, paused) and whether they watch Tidemark itself "
        "(system).",
        labels=["state", "system"],
    )
    counts = {
        (row["state"], row["system"]): row["n"]
        for row in Monitor.objects.values("state", "system").annotate(n=Count("pk")).order_by()
    }
    for monitor_state in Monitor.State.values:
        for system in (False, True):
            monitors.add_metric(
                [monitor_state, str(system).lower()], counts.get((monitor_state, system), 0)
            )

    incidents = GaugeMetricFamily(
        "tidemark_watchdog_open_incidents",
        "Incidents not resolved yet, by reason (missed, failed, runtime, start_late).",
        labels=["reason"],
    )
    open_by_reason = {
        row["reason"]: row["n"]
        for row in Incident.objects.filter(resolved_at__isnull=True)
        .values("reason")
        .annotate(n=Count("pk"))
        .order_by()
    }
    for reason in Incident.Reason.values:
        incidents.add_metric([reason], open_by_reason.get(reason, 0))

    waiting = Page.objects.filter(state=Page.State.PENDING).aggregate(
        n=Count("pk"), oldest=Min("next_attempt_at", filter=~holds.HELD)
    )
    pages = GaugeMetricFamily(
        "tidemark_watchdog_pages_pending", "Pages not sent yet (due, held or waiting to retry)."
    )
    pages.add_metric([], waiting["n"])
    oldest_page = GaugeMetricFamily(
        "tidemark_watchdog_oldest_due_page_age_seconds",
        "How long the oldest due page has waited to be sent (0: none due); a page held "
        "under an upstream's incident is not due.",
    )
    oldest_page.add_metric([], _age(waiting["oldest"], now))
    held = GaugeMetricFamily(
        "tidemark_watchdog_held_incidents",
        "Open incidents whose page is held under an upstream monitor's open incident (one "
        "late root, one page).",
    )
    held.add_metric(
        [],
        Incident.objects.filter(
            held_under__isnull=False, released_at__isnull=True, resolved_at__isnull=True
        ).count(),
    )

    loop = LoopState.objects.filter(pk=1).first()
    cycle_age = GaugeMetricFamily(
        "tidemark_watchdog_last_cycle_age_seconds",
        "Seconds since a watchdog loop last started a cycle (absent before the first).",
    )
    heartbeat_age = GaugeMetricFamily(
        "tidemark_watchdog_heartbeat_age_seconds",
        "Seconds since the loop last pinged its own heartbeat URL (absent before the first, "
        "or without WATCHDOG_HEARTBEAT_URL).",
    )
    heartbeat_ok = GaugeMetricFamily(
        "tidemark_watchdog_heartbeat_ok",
        "1 when the last heartbeat ping succeeded, else 0.",
    )
    families = [
        monitors,
        incidents,
        pages,
        oldest_page,
        held,
        cycle_age,
        heartbeat_age,
        heartbeat_ok,
    ]
    if loop is not None:
        if loop.last_cycle_at is not None:
            cycle_age.add_metric([], _age(loop.last_cycle_at, now))
        if loop.last_heartbeat_at is not None:
            heartbeat_age.add_metric([], _age(loop.last_heartbeat_at, now))
        heartbeat_ok.add_metric([], 1 if loop.heartbeat_ok else 0)
    return families


def _age(at: datetime | None, now: datetime) -> float:
    """Seconds from ``at`` to ``now``, never negative; 0 when ``at`` is None."""
    return max((now - at).total_seconds(), 0.0) if at is not None else 0.0


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics`` on the watchdog's server (``httpkit.metrics.metrics_response``)."""
    return http_metrics.metrics_response(request, [WatchdogCollector()])
