"""Tidemark watches itself: system monitors in the watchdog, pinged by beat's heartbeat task
while the catalog's own machinery is healthy.

- ``scheduler``: pinged whenever the heartbeat runs at all: beat scheduled it and the
  ``housekeeping`` worker ran it. That queue carries nothing else, so no backlog of
  deliveries, lineage events or storage sweeps can delay it.
- one monitor per measured lag, pinged while that lag is under its threshold
  (``TIDEMARK_SELF_MONITORING``): how long the oldest due work of one queue has waited.
  The work itself is rows, so the lag is read from the database: a queue whose workers
  are down, or alive but stuck, leaves its due rows waiting and its lag grows; a backlog
  that is being worked through stays under the threshold and pages nobody.

  ``deliveries``: the oldest due delivery (``delivery_lag_seconds``); ``poll``: the
  storage group most overdue for its sweep (``poll_lag_seconds``); ``freshness``: the
  dataset whose deadline judgement is most overdue (``freshness_lag_seconds``);
  ``change-notices``: the change notice whose reminder or effective step is most overdue
  (``change_notice_lag_seconds``, the ``default`` queue); and whatever other apps
  register (lineage registers ``lineage``, the oldest due OpenLineage event: the catalog
  never imports lineage).

These pings go straight to the watchdog's API (not through the delivery outbox, whose lag
is one of the things measured). When one stops, the watchdog pages its operators' channel
once ("Tidemark is degraded") and holds the dataset pages the outage causes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote

from django.conf import settings
from django.db.models import Min

import outbound

from . import watchdog_feed
from .models import ChangeNotice, Dataset, Delivery, StorageGroup

logger = logging.getLogger(__name__)

SCHEDULER = "tidemark:system:scheduler"


@dataclass(frozen=True)
class Lag:
    """A measured lag: one system monitor, pinged while ``measure(now)`` (how long the
    oldest due work has waited; None when nothing is due) is under the threshold
    ``TIDEMARK_SELF_MONITORING[threshold]`` (seconds)."""

    external_id: str
    name: str
    threshold: str
    measure: Callable[[datetime], timedelta | None]


def oldest_wait(oldest_due_at: datetime | None, *, now: datetime) -> timedelta | None:
    """How long the oldest due row (due at ``oldest_due_at``, or None) has waited at
    ``now``: never negative."""
    if oldest_due_at is None:
        return None
    return max(now - oldest_due_at, timedelta(0))


def _delivery_lag(now: datetime) -> timedelta | None:
    # Retrying deliveries are not due between attempts: a consumer that is down makes its
    # own deliveries wait, not Tidemark's machinery.
    oldest = Delivery.objects.filter(
        state__in=(Delivery.State.PENDING, Delivery.State.RETRYING),
        next_attempt_at__lte=now,
        endpoint__is_active=True,
    ).aggregate(at=Min("next_attempt_at"))["at"]
    return oldest_wait(oldest, now=now)


def _poll_lag(now: datetime) -> timedelta | None:
    oldest = StorageGroup.objects.filter(next_sweep_at__lte=now).aggregate(at=Min("next_sweep_at"))[
        "at"
    ]
    return oldest_wait(oldest, now=now)


def _freshness_lag(now: datetime) -> timedelta | None:
    # next_check_at is a deadline plus its grace: from then on the judgement is due.
    oldest = Dataset.objects.filter(next_check_at__lte=now).aggregate(at=Min("next_check_at"))["at"]
    return oldest_wait(oldest, now=now)


def _change_notice_lag(now: datetime) -> timedelta | None:
    oldest = ChangeNotice.objects.filter(
        state=ChangeNotice.State.ANNOUNCED, next_step_at__lte=now
    ).aggregate(at=Min("next_step_at"))["at"]
    return oldest_wait(oldest, now=now)


_LAGS: dict[str, Lag] = {
    lag.external_id: lag
    for lag in (
        Lag(
            "tidemark:system:deliveries",
            "Tidemark deliveries",
            "delivery_lag_seconds",
            _delivery_lag,
        ),
        Lag("tidemark:system:poll", "Tidemark storage poll", "poll_lag_seconds", _poll_lag),
        Lag(
            "tidemark:system:freshness",
            "Tidemark freshness judgement",
            "freshness_lag_seconds",
            _freshness_lag,
        ),
        Lag(
            "tidemark:system:change-notices",
            "Tidemark change notices",
            "change_notice_lag_seconds",
            _change_notice_lag,
        ),
    )
}
_provisioned: set[str] = set()  # per process: upsert once, then only ping


def register_lag(lag: Lag) -> None:
    """Watch one more measured lag (an app's ``AppConfig.ready``); idempotent."""
    _LAGS[lag.external_id] = lag


def system_monitors() -> dict[str, str]:
    """Every system monitor: external id -> name."""
    return {
        SCHEDULER: "Tidemark beat and housekeeping worker",
        **{lag.external_id: lag.name for lag in _LAGS.values()},
    }


def _config(name: str) -> int:
    return settings.TIDEMARK_SELF_MONITORING[name]


def lags(*, now: datetime) -> dict[str, timedelta | None]:
    """Each measured lag at ``now``, by system monitor external id (None: nothing due)."""
    return {external_id: lag.measure(now) for external_id, lag in _LAGS.items()}


def health(*, now: datetime) -> dict[str, bool]:
    """Which parts are healthy at ``now``, by system monitor external id: the scheduler
    always (the caller runs), each lag while under its threshold."""
    return _judge(lags(now=now))


def _judge(waited: dict[str, timedelta | None]) -> dict[str, bool]:
    status = {SCHEDULER: True}
    for external_id, lag in waited.items():
        threshold = timedelta(seconds=_config(_LAGS[external_id].threshold))
        status[external_id] = lag is None or lag < threshold
    return status


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
    waited = lags(now=now)
    logger.info(
        "lags: %s",
        ", ".join(
            f"{external_id.rsplit(':', 1)[-1]} {lag.total_seconds() if lag else 0:.0f} s"
            for external_id, lag in waited.items()
        ),
    )
    status = _judge(waited)
    names = system_monitors()
    for external_id, healthy in status.items():
        url = f"{base}/{quote(external_id, safe='')}"
        if external_id not in _provisioned:
            definition = {
                "name": names[external_id],
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
