"""The watchdog's own heartbeat: a ping to ``WATCHDOG_HEARTBEAT_URL`` (another watchdog, or
any dead-man's-switch service) at most once per interval, so something pages when the
watchdog itself goes quiet. Failures are recorded and logged, never fatal."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

import outbound

from .models import LoopState

logger = logging.getLogger(__name__)


def beat(*, sender: outbound.Sender, now: datetime) -> bool | None:
    """Ping the heartbeat URL if the last ping is older than the interval.

    A compare-and-set on ``LoopState.last_heartbeat_at`` makes one of a pair of loops send
    it. Returns None when nothing was due (or no URL is set), else whether it succeeded.
    """
    url = settings.WATCHDOG_HEARTBEAT_URL
    if not url:
        return None
    interval = timedelta(seconds=settings.WATCHDOG_HEARTBEAT_SECONDS)
    # The loop state row exists: every cycle starts by recording itself in it.
    won = LoopState.objects.filter(
        Q(last_heartbeat_at__isnull=True) | Q(last_heartbeat_at__lte=now - interval), pk=1
    ).update(last_heartbeat_at=now)
    if not won:
        return None
    result = sender.post(url, b"", {"Content-Type": "text/plain"})
    ok = result.status_code is not None and 200 <= result.status_code < 300
    error = "" if ok else (result.error or f"HTTP {result.status_code}")
    LoopState.objects.filter(pk=1).update(heartbeat_ok=ok, heartbeat_error=error[:2000])
    if not ok:
        logger.warning("watchdog heartbeat to its own switch failed: %s", error)
    return ok
