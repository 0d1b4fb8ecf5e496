"""Celery entry points for the catalog: thin, idempotent, driven by database rows."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from . import (
    at_risk,
    change_notices,
    delivery,
    doorbell,
    freshness,
    passes,
    polling,
    self_monitoring,
    unusually_late,
    watchdog_feed,
)

logger = logging.getLogger(__name__)

_sender = None


def _process_sender():
    """One HTTP client per worker process, so connections to endpoints are reused."""
    global _sender
    if _sender is None:
        _sender = delivery.sender_from_settings()
    return _sender


@shared_task(name="catalog.tasks.deliver_due")
def deliver_due() -> str:
    """Deliver what is due: the publish doorbell and the 30 s beat sweep both ring this.

    Runs a bounded pass; when the pass stopped with work left, rings itself again rather
    than holding the worker.
    """
    summary = delivery.deliver_due(sender=_process_sender())
    logger.info("deliveries: %s", summary)
    if summary.more_due:
        doorbell.ring_now(doorbell.DELIVER_DUE)
    return str(summary)


EVALUATE_FRESHNESS = "catalog.tasks.evaluate_freshness"
SEND_CHANGE_NOTICES = "catalog.tasks.send_change_notices"
CHECK_UNUSUALLY_LATE = "catalog.tasks.check_unusually_late"
CHECK_AT_RISK = "catalog.tasks.check_at_risk"


@shared_task(name=EVALUATE_FRESHNESS)
def evaluate_freshness() -> int:
    """Judge the SLA deadlines whose grace has passed, then close the late incidents whose
    partition is ready after all (``freshness.recover_arrived``) (beat, every 15 s);
    idempotent. Returns the number of partitions newly late.

    A pass takes batch after batch while work remains, for at most
    ``TIDEMARK_PASS_SECONDS``, then rings itself for the next; one pass runs at a time
    (``passes.single_flight``): while one runs, beat's tick returns at once (0).
    """
    summary = _single_flight_pass(
        passes.FRESHNESS,
        EVALUATE_FRESHNESS,
        lambda: freshness.evaluate_pass(clock=timezone.now, on_late=_log_late),
        log_as="freshness pass",
    )
    return summary.handled if summary else 0


def _single_flight_pass(
    name: str,
    task: str,
    run: Callable[[], passes.PassSummary],
    *,
    log_as: str | None = None,
) -> passes.PassSummary | None:
    """Run one pass (``run``) holding the pass ``name`` (``passes.single_flight``), and
    ring the task named ``task`` again when it stopped with work left.

    Args:
        log_as: when given, the summary is logged (INFO) under this label.

    Returns:
        the pass's summary, or None when another process held the pass (nothing ran).
    """
    with passes.single_flight(name) as held:
        if not held:
            return None
        summary = run()
    if log_as:
        logger.info("%s: %s", log_as, summary)
    if summary.more_due:  # rung after the pass is released, so the next one can take it
        doorbell.ring_now(task)
    return summary


def _log_late(report: freshness.LateReport) -> None:
    logger.info(
        "late: %s partition %s (deadline %s)", report.dataset, report.partition, report.deadline_at
    )


@shared_task(name=CHECK_UNUSUALLY_LATE)
def check_unusually_late() -> int:
    """Tell the partitions of datasets without an SLA that are later than usual
    (``unusually_late.check_pass``; beat, every 60 s, freshness queue); idempotent (one
    notice per partition). Continues and runs single-flight as ``evaluate_freshness``
    does. Returns the partitions told."""
    summary = _single_flight_pass(
        passes.UNUSUALLY_LATE,
        CHECK_UNUSUALLY_LATE,
        lambda: unusually_late.check_pass(clock=timezone.now, on_told=_log_unusual),
    )
    return summary.handled if summary else 0


def _log_unusual(report: unusually_late.UnusualReport) -> None:
    logger.info(
        "later than usual: %s partition %s (expected by %s)",
        report.dataset,
        report.partition,
        report.expected_by,
    )


@shared_task(name=CHECK_AT_RISK)
def check_at_risk() -> int:
    """Tell the partitions forecast to miss their deadline (``at_risk.run_pass``; beat,
    every ``TIDEMARK_FORECAST_SECONDS``, freshness queue); idempotent (one notice per
    partition). Continues and runs single-flight as ``evaluate_freshness`` does. Returns
    the partitions told."""
    summary = _single_flight_pass(
        passes.AT_RISK,
        CHECK_AT_RISK,
        lambda: at_risk.run_pass(clock=timezone.now, on_told=_log_at_risk),
    )
    return summary.handled if summary else 0


def _log_at_risk(report: at_risk.AtRiskReport) -> None:
    logger.info(
        "at risk: %s partition %s (expected %s)",
        report.dataset,
        report.partition,
        report.estimate_at,
    )


@shared_task(name=SEND_CHANGE_NOTICES)
def send_change_notices() -> int:
    """Send the change-notice reminders and effective notifications that are due (beat,
    every 60 s); idempotent: each step is sent once however often this runs. Continues
    and runs single-flight as ``evaluate_freshness`` does. Returns the steps sent."""
    summary = _single_flight_pass(
        passes.CHANGE_NOTICES,
        SEND_CHANGE_NOTICES,
        lambda: change_notices.send_pass(clock=timezone.now, on_step=_log_step),
    )
    return summary.handled if summary else 0


def _log_step(step: change_notices.StepReport) -> None:
    logger.info(
        "change notice %s: %s sent (%d deliveries)", step.notice_id, step.kind, step.deliveries
    )


@shared_task(name="catalog.tasks.poll_storage")
def poll_storage(boot_at: str | None = None) -> int:
    """Sweep the storage groups that are due (beat, every 60 s); with ``boot_at`` (ISO UTC),
    also every group not swept since then, in full: recovery after downtime."""
    boot = datetime.fromisoformat(boot_at) if boot_at else None
    reports = polling.sweep_due(now=timezone.now(), boot_at=boot)
    if len(reports) >= settings.TIDEMARK_POLL["batch_size"]:
        # A full batch may have left groups behind: go on in a new task, not this one.
        poll_storage.delay(boot_at=boot_at)
    return sum(r.partitions_found for r in reports)


@worker_ready.connect
def _sweep_after_boot(sender=None, **kwargs) -> None:
    """A worker of the poll queue that starts asks for a full sweep of every group whose
    last completed sweep is older than this start: what landed while Tidemark was down is
    found at once. A worker of other queues only (the housekeeping worker) asks nothing."""
    consumed = sender.app.amqp.queues.consume_from if sender is not None else None
    if consumed and settings.CELERY_TASK_ROUTES[poll_storage.name]["queue"] not in consumed:
        return
    try:
        poll_storage.delay(boot_at=timezone.now().isoformat())
    except Exception:  # the broker may be down; the next beat sweep still runs
        logger.warning("could not queue the start-up storage sweep", exc_info=True)


@shared_task(name="catalog.tasks.sync_watchdog_dependencies")
def sync_watchdog_dependencies() -> int:
    """Tell the watchdog which monitors each critical dataset's data monitor depends on,
    where verified lineage changed them (``watchdog_feed.sync_dependencies``; beat, every
    ``TIDEMARK_WATCHDOG_DEPENDENCIES_SECONDS``); idempotent. Returns the datasets synced."""
    synced = watchdog_feed.sync_dependencies(now=timezone.now())
    if synced:
        logger.info("watchdog dependencies sent again for %d datasets", len(synced))
    return len(synced)


@shared_task(name="catalog.tasks.heartbeat")
def heartbeat() -> dict:
    """Ping the watchdog's system monitors for the healthy parts (beat, every
    ``TIDEMARK_HEARTBEAT_PERIOD``; queue ``housekeeping``, which carries nothing else)."""
    return self_monitoring.heartbeat(sender=_process_sender(), now=timezone.now())


@shared_task(name="catalog.tasks.prune_history")
def prune_history() -> str:
    """Delete what the catalog's and lineage's retention rules allow (beat, every
    ``TIDEMARK_PRUNE["interval_seconds"]``, on the default queue), in batches, for
    at most ``budget_seconds``, working at most ``duty_cycle`` of it (it rests between
    batches); what is left waits for the next run. Safe twice at once."""
    from pruning import engine

    config = settings.TIDEMARK_PRUNE
    outcomes = engine.prune(
        engine.rules(),
        now=timezone.now(),
        batch_size=config["batch_size"],
        budget_seconds=config["budget_seconds"],
        duty_cycle=config["duty_cycle"],
    )
    summary = ", ".join(f"{o.rule.table} {o.deleted}" + ("+" if o.more else "") for o in outcomes)
    logger.info("pruned: %s", summary)
    return summary
