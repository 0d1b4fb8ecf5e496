"""Celery entry points for the catalog: thin, idempotent, driven by database rows."""

from __future__ import annotations

import logging

from celery import shared_task

from . import selectors

logger = logging.getLogger(__name__)


@shared_task(name="catalog.tasks.deliver_due")
def deliver_due() -> int:
    """Doorbell target for due deliveries; returns how many are due now.

    The HTTP sender that claims and sends them belongs to the notifications work; until it
    lands, deliveries wait as outbox rows and this task reports the backlog.
    """
    due = selectors.delivery_count_due()
    logger.info("deliveries due: %d", due)
    return due
