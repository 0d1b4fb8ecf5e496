"""Celery entry points for lineage: thin and idempotent, driven by ``LineageEvent`` rows."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from catalog import doorbell
from catalog.services import aliases

from . import collectors
from .services import collecting, processing, runs

logger = logging.getLogger(__name__)


@shared_task(name=processing.PROCESS_EVENTS)
def process_events() -> str:
    """Process the pending OpenLineage events: the receive doorbell and the 30 s beat
    sweep both ring this (queue ``lineage``).

    Runs a bounded pass; when the pass stopped with work left, rings itself again rather
    than holding the worker.
    """
    summary = processing.lineage_events_process_due()
    logger.info("lineage events: %s", summary)
    if summary.more_due:
        doorbell.ring_now(processing.PROCESS_EVENTS)
    return str(summary)


@shared_task(name=collecting.COLLECT_LINEAGE)
def collect_lineage() -> str:
    """Run every configured lineage collector once (beat, every 5 minutes; queue
    ``lineage``). A collector that fails is logged and tried again at the next beat; the
    others still run."""
    summaries = []
    for name in sorted(collectors.configured()):
        try:
            summary = collecting.collector_run(name=name, now=timezone.now())
        except Exception:  # one unreachable source must not stop the others
            logger.exception("lineage collector %s failed", name)
            summaries.append(f"{name}: failed")
            continue
        logger.info("lineage collector %s", summary)
        summaries.append(str(summary))
    return "; ".join(summaries)


@shared_task(name="lineage.tasks.fold_alias_usage")
def fold_alias_usage() -> str:
    """Fold into their datasets' rows the usage still recorded under a symlink alias's
    identity (beat, every 5 minutes; queue ``lineage``): what an event processed while
    the alias was being declared recorded before it could see the declaration."""
    folded = aliases.alias_usage_fold_due(merge_dependents=runs.run_edges_merge)
    if folded:
        logger.info("alias usage: %d usage rows folded into their datasets'", folded)
    return f"{folded} folded"
