"""Celery entry points for lineage: thin and idempotent, driven by ``LineageEvent`` rows."""

from __future__ import annotations

import logging

from celery import shared_task

from catalog import doorbell

from . import services

logger = logging.getLogger(__name__)


@shared_task(name=services.PROCESS_EVENTS)
def process_events() -> str:
    """Process the pending OpenLineage events: the receive doorbell and the 30 s beat
    sweep both ring this (queue ``lineage``).

    Runs a bounded pass; when the pass stopped with work left, rings itself again rather
    than holding the worker.
    """
    summary = services.lineage_events_process_due()
    logger.info("lineage events: %s", summary)
    if summary.more_due:
        doorbell.ring_now(services.PROCESS_EVENTS)
    return str(summary)
