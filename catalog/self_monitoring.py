"""Tidemark watches itself: system monitors in the watchdog, pinged by a one-minute beat
task while the catalog's own machinery is healthy.

- ``scheduler``: pinged whenever the task runs at all (beat scheduled it, a worker ran it);
- ``deliveries``: pinged while the oldest due delivery is younger than
  ``TIDEMARK_SELF_MONITORING["delivery_lag_seconds"]``;
- ``poll``: pinged while no storage group is overdue for its sweep by more than
  ``poll_lag_seconds``.

These pings go straight to the watchdog's API (not through the delivery outbox, whose lag
is one of the things measured). When one stops, the watchdog pages its operators' channel
once ("Tidemark is degraded") and holds the dataset pages the outage causes.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from urllib.parse import quote

from django.conf import settings

import outbound

from . import watchdog_feed
from .models import Delivery, StorageGroup

logger = logging.getLogger(__name__)

# external id -> name
SYSTEM_MONITORS = {
    "tidemark:system:scheduler": "Tidemark beat and workers",
    "tidemark:system:deliveries": "Tidemark deliveries",
    "tidemark:system:poll": "Tidemark storage poll",
}
_provisioned: set[str] = set()  # per process: upsert once, then only ping


def _config(name: str) -> int:
    return settings.TIDEMARK_SELF_MONITORING[name]


def health(*, now: datetime) -> dict[str, bool]:
    """Which parts are healthy at ``now``, by system monitor external id."""
    oldest_due = (
        Delivery.objects.filter(
            state__in=(Delivery.State.PENDING, Delivery.State.RETRYING),
            next_attempt_at__lte=now,
            endpoint__is_active=True,
        )
        .order_by("next_attempt_at")
        .values_list("next_attempt_at", flat=True)
        .first()
    )
    overdue_poll = StorageGroup.objects.filter(
        next_sweep_at__lt=now - timedelta(seconds=_config("poll_lag_seconds"))
    ).exists()
    return {
        "tidemark:system:scheduler": True,
        "tidemark:system:deliveries": oldest_due is None
        or now - oldest_due < timedelta(seconds=_config("delivery_lag_seconds")),
        "tidemark:system:poll": not overdue_poll,
    }


def heartbeat(*, sender: outbound.Sender, now: datetime) -> dict[str, bool]:
    """Provision the system monitors (once per process) and ping the healthy ones.

    Returns what was judged healthy; empty when no watchdog is configured. Failures to
    reach the watchdog are logged: its own silence is what pages.
    """
    if not watchdog_feed.configured():
        return {}
    base = f"{settings.TIDEMARK_WATCHDOG_URL.rstrip('/')}/api/v1/monitors/external"
    headers = {
        "Authorization": f"Bearer {settings.TIDEMARK_WATCHDOG_TOKEN}",
        "Content-Type": "application/json",
    }
    status = health(now=now)
    for external_id, healthy in status.items():
        url = f"{base}/{quote(external_id, safe='')}"
        if external_id not in _provisioned:
            definition = {
                "name": SYSTEM_MONITORS[external_id],
                "owner": "tidemark",
                "kind": "period",
                "period_seconds": _config("period_seconds"),
                "grace_seconds": _config("grace_seconds"),
                "system": True,
                "version": "1",
            }
            result = sender.post(url, json.dumps(definition).encode(), headers)
            if result.status_code in (200, 201, 208):
                _provisioned.add(external_id)
            else:
                logger.warning("cannot provision %s: %s", external_id, result)
                continue
        if healthy:
            result = sender.post(f"{url}/ping", b"", headers)
            if result.status_code != 200:
                logger.warning("cannot ping %s: %s", external_id, result)
        else:
            logger.warning("%s is unhealthy: not pinging it", external_id)
    return status
