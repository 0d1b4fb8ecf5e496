"""Doorbells: after a commit, tell a worker to look at the database now.

A doorbell only cuts latency; sweepers find work whose doorbell was lost. So ringing is
fire-and-forget: registered with ``on_commit(robust=True)``, one short publish with no
broker retries, and any failure logged rather than raised, so a broker outage never turns
a request whose data committed into an error (DESIGN.md principle 1).

After a failed ring the process stays quiet for ``QUIET_SECONDS``: during an outage each
request would otherwise wait out a connect timeout and log a traceback, for a ring the
30 s sweep makes up for anyway.

Delivery rings coalesce per process: within ``settings.TIDEMARK_DOORBELL_INTERVAL``
seconds (0.05; embedded: 0, no coalescing) of the last one, a commit's ring is left to a
ringer thread, which sends one ring at the end of the interval for every commit made
meanwhile. A ring costs about half a millisecond of CPU (a millisecond from a fresh
thread: Celery sets up per thread), as much as a publish's own SQL, and a worker needs one
wake-up per batch, not one per publish; so under a burst each process rings at most
1/interval times a second, and a commit's ring is late by at most the interval. A lone
commit still rings at once, from the committing thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time

from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)

DELIVER_DUE = "catalog.tasks.deliver_due"
QUIET_SECONDS = 5.0

_quiet_until = 0.0
_lock = threading.Lock()
_ring_wanted = threading.Condition(_lock)
_last_rung = float("-inf")  # time.monotonic() of this process's last delivery ring
_pending = False  # a commit waits for the ringer thread's next ring
_ringer: threading.Thread | None = None


def ring_deliveries() -> None:
    """Ring the delivery workers' doorbell once the current transaction commits: at once,
    or at most ``settings.TIDEMARK_DOORBELL_INTERVAL`` seconds later when this process has
    just rung."""
    transaction.on_commit(_ring_deliveries_soon, robust=True)


def _ring_deliveries_soon() -> None:
    global _last_rung, _pending, _ringer
    with _lock:
        if _pending:
            return  # the ringer's next ring goes out after this commit, so it covers it
        if time.monotonic() - _last_rung < settings.TIDEMARK_DOORBELL_INTERVAL:
            _pending = True
            if _ringer is None:
                _ringer = threading.Thread(target=_ring_pending, name="doorbell", daemon=True)
                _ringer.start()
            _ring_wanted.notify()
            return
        _last_rung = time.monotonic()
    _send(DELIVER_DUE)


def _ring_pending() -> None:
    """The ringer thread: one ring per interval while commits wait for one."""
    global _last_rung, _pending
    while True:
        with _lock:
            while not _pending:
                _ring_wanted.wait()
            delay = _last_rung + settings.TIDEMARK_DOORBELL_INTERVAL - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with _lock:
            _pending = False
            _last_rung = time.monotonic()
        _send(DELIVER_DUE)


@atexit.register
def _ring_pending_at_exit() -> None:
    """A process exiting with a ring pending sends it (the ringer is a daemon thread)."""
    if _pending:
        _send(DELIVER_DUE)


def _forget_after_fork() -> None:
    """A forked child has no ringer thread (nor a lock anyone holds): start afresh."""
    global _lock, _ring_wanted, _last_rung, _pending, _ringer
    _lock = threading.Lock()
    _ring_wanted = threading.Condition(_lock)
    _last_rung, _pending, _ringer = float("-inf"), False, None


os.register_at_fork(after_in_child=_forget_after_fork)


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
