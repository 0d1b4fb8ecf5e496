"""The watchdog loop: judge due deadlines, send due pages, ping the heartbeat, and now
and then prune old history (``watchdog.retention``); repeat.

Runs as ``manage.py run_watchdog`` (a plain process, never Celery), safe as two processes on
one watchdog database: deadlines and pages are claimed with SKIP LOCKED, incidents are
unique per deadline and sends are fenced by claim tokens.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

import outbound
from pruning import engine

from . import evaluation, heartbeat, metrics, paging, retention
from .models import LoopState

logger = logging.getLogger(__name__)

PAGING_BUDGET_SECONDS = 10.0  # per cycle; what is left goes out next cycle


@dataclass
class CycleReport:
    missed: list[evaluation.Missed] = field(default_factory=list)
    pages_attempted: int = 0
    heartbeat: bool | None = None
    pruned: dict[str, int] | None = None  # rows deleted per table, when this cycle pruned
    duration_ms: float = 0.0


def run_cycle(
    *, sender: outbound.Sender, now: datetime | None = None, prune: bool = False
) -> CycleReport:
    """One cycle at ``now`` (aware UTC; the current time by default); with ``prune``, it
    ends by pruning for at most ``WATCHDOG_PRUNE["budget_seconds"]`` (``prune_history``)."""
    started = time.perf_counter()
    now = now or timezone.now()
    report = CycleReport()
    if not LoopState.objects.filter(pk=1).update(last_cycle_at=now):
        LoopState.objects.get_or_create(pk=1, defaults={"last_cycle_at": now})
    report.missed = evaluation.evaluate_due(now=now)
    # Drain the due pages within a budget, so a burst is not spread over many cycles.
    budget_ends = time.monotonic() + PAGING_BUDGET_SECONDS
    while True:
        sent = paging.send_due(sender=sender, now=now)
        report.pages_attempted += sent
        if sent < settings.WATCHDOG_PAGING["batch_size"] or time.monotonic() > budget_ends:
            break
    try:
        report.heartbeat = heartbeat.beat(sender=sender, now=now)
    except Exception:  # the heartbeat must never stop paging
        logger.exception("watchdog heartbeat failed")
    if prune:
        try:
            report.pruned = prune_history(now=now)
        except Exception:  # pruning must never stop paging either
            logger.exception("watchdog pruning failed")
    report.duration_ms = (time.perf_counter() - started) * 1000
    metrics.record_cycle(duration_ms=report.duration_ms, missed=len(report.missed))
    return report


def prune_history(*, now: datetime) -> dict[str, int]:
    """Delete what ``watchdog.retention`` allows at ``now`` (aware UTC), in batches of
    ``WATCHDOG_PRUNE["batch_size"]`` rows for at most its ``budget_seconds`` (resting
    between batches per its ``duty_cycle``), so a cycle stays short; the rest waits for
    the next pruning cycle.

    Returns:
        Rows deleted per table (``retention.RULES``' names).
    """
    config = settings.WATCHDOG_PRUNE
    outcomes = engine.prune(
        retention.RULES,
        now=now,
        batch_size=config["batch_size"],
        budget_seconds=config["budget_seconds"],
        duty_cycle=config["duty_cycle"],
    )
    return {outcome.rule.table: outcome.deleted for outcome in outcomes}


def run_forever(*, interval: float, sender: outbound.Sender) -> None:
    """Run cycles every ``interval`` seconds until SIGTERM or SIGINT; a cycle that fails
    (e.g. the database is briefly unreachable) is logged and retried next time."""
    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    prune_at = time.monotonic()  # the first cycle prunes, then every interval
    while not stopping:
        began = time.monotonic()
        prune = began >= prune_at
        if prune:
            prune_at = began + settings.WATCHDOG_PRUNE["interval_seconds"]
        try:
            report = run_cycle(sender=sender, prune=prune)
            for missed in report.missed:
                logger.warning("missed: %s at %s", missed.monitor, missed.deadline_at)
        except Exception:
            logger.exception("watchdog cycle failed; retrying")
            close_old_connections()
        time.sleep(max(0.0, interval - (time.monotonic() - began)))
