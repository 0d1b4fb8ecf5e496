"""Doorbells: after a commit, tell a worker to look at the database now.

A doorbell only cuts latency; sweepers find work whose doorbell was lost. So ringing is
fire-and-forget: registered with ``on_commit(robust=True)``, one short publish with no
broker retries, and any failure logged rather than raised, so a broker outage never turns
a request whose data committed into an error (DESIGN.md principle 1).

After a failed ring the process stays quiet for ``QUIET_SECONDS``: during an outage each
request would otherwise wait out a connect timeout and log a traceback, for a ring the
30 s sweep makes up for anyway.
"""

from __future__ import annotations

import logging
import time

from django.db import transaction

logger = logging.getLogger(__name__)

DELIVER_DUE = "catalog.tasks.deliver_due"
QUIET_SECONDS = 5.0

_quiet_until = 0.0


def ring_deliveries() -> None:
    """Ring the delivery workers' doorbell once the current transaction commits."""
    transaction.on_commit(lambda: _send(DELIVER_DUE), robust=True)


def ring_now(task_name: str) -> None:
    """Ring at once (outside any transaction); failures are logged, never raised."""
    _send(task_name)


def _send(task_name: str) -> None:
    global _quiet_until
    if time.monotonic() < _quiet_until:
        return
    from config.celery import app  # the web process loads Celery only when it rings

    try:
        app.send_task(task_name, retry=False, ignore_result=True)
    except Exception as exc:  # any broker failure: the row is committed, a sweeper will find it
        _quiet_until = time.monotonic() + QUIET_SECONDS
        logger.warning(
            "doorbell %s not rung (%s: %s); not ringing for %.0f s, the sweep delivers",
            task_name,
            type(exc).__name__,
            exc,
            QUIET_SECONDS,
        )
