"""Doorbells: after a commit, tell a worker to look at the database now.

A doorbell only cuts latency; sweepers find work whose doorbell was lost. So ringing is
fire-and-forget: registered with ``on_commit(robust=True)``, one short publish with no
broker retries, and any failure logged rather than raised, so a broker outage never turns
a request whose data committed into an error (DESIGN.md principle 1).

After a failed ring the process stays quiet for ``QUIET_SECONDS``: during an outage each
request would otherwise wait out a connect timeout and log a traceback, for a ring the
30 s sweep makes up for anyway.

Rings coalesce per process and task: within ``settings.TIDEMARK_DOORBELL_INTERVAL``
seconds (0.05; embedded: 0, no coalescing) of the last ring of the same task, a commit's
ring is left to a ringer thread, which sends one ring of that task at the end of the
interval for every commit made meanwhile. A ring costs about half a millisecond of CPU (a
millisecond from a fresh thread: Celery sets up per thread), as much as a publish's own
SQL, and a worker needs one wake-up per batch, not one per commit; so under a burst each
process rings each task at most 1/interval times a second, and a commit's ring is late by
at most the interval. A lone commit still rings at once, from the committing thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)

DELIVER_DUE = "catalog.tasks.deliver_due"
QUIET_SECONDS = 5.0

_quiet_until = 0.0
_lock = threading.Lock()
_ring_wanted = threading.Condition(_lock)
_last_rung: dict[str, float] = {}  # task name -> time.monotonic() of this process's last ring
_pending: set[str] = set()  # tasks a commit waits on the ringer thread's next ring of
_ringer: threading.Thread | None = None
_silence = threading.local()


def ring_after_commit(task_name: str) -> None:
    """Ring the doorbell of the Celery task ``task_name`` once the current transaction
    commits: at once, or at most ``settings.TIDEMARK_DOORBELL_INTERVAL`` seconds later
    when this process has just rung it (nothing inside ``silenced``). Failures are
    logged, never raised."""
    if getattr(_silence, "on", False):
        return
    transaction.on_commit(partial(_ring_soon, task_name), robust=True)


@contextmanager
def silenced() -> Iterator[None]:
    """Ring no doorbell for what this thread commits inside the block: for bulk writes
    of work that is not due yet, or that the workers' sweeps find at their first tick
    (the embedded demo's history writes hundreds of rows, each of which would ring)."""
    before = getattr(_silence, "on", False)
    _silence.on = True
    try:
        yield
    finally:
        _silence.on = before


def ring_deliveries() -> None:
    """Ring the delivery workers' doorbell once the current transaction commits
    (``ring_after_commit`` of ``deliver_due``)."""
    ring_after_commit(DELIVER_DUE)


def _ring_soon(task_name: str) -> None:
    global _ringer
    with _lock:
        if task_name in _pending:
            return  # the ringer's next ring goes out after this commit, so it covers it
        last = _last_rung.get(task_name, float("-inf"))
        if time.monotonic() - last < settings.TIDEMARK_DOORBELL_INTERVAL:
            _pending.add(task_name)
            if _ringer is None:
                _ringer = threading.Thread(target=_ring_pending, name="doorbell", daemon=True)
                _ringer.start()
            _ring_wanted.notify()
            return
        _last_rung[task_name] = time.monotonic()
    _send(task_name)


def _ring_pending() -> None:
    """The ringer thread: one ring per task and interval while commits wait for one.

    It sleeps until the pending task rung longest ago is due; a task that becomes pending
    meanwhile was rung less than an interval before, so it waits at most the interval."""
    while True:
        with _lock:
            while not _pending:
                _ring_wanted.wait()
            interval = settings.TIDEMARK_DOORBELL_INTERVAL
            first_due = min(_last_rung.get(task, float("-inf")) for task in _pending) + interval
            delay = first_due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with _lock:
            now = time.monotonic()
            due = sorted(
                task for task in _pending if _last_rung.get(task, float("-inf")) + interval <= now
            )
            for task in due:
                _pending.discard(task)
                _last_rung[task] = now
        for task in due:
            _send(task)


@atexit.register
def _ring_pending_at_exit() -> None:
    """A process exiting with rings pending sends them (the ringer is a daemon thread)."""
    for task_name in sorted(_pending):
        _send(task_name)


def _forget_after_fork() -> None:
    """A forked child has no ringer thread (nor a lock anyone holds): start afresh."""
    global _lock, _ring_wanted, _last_rung, _pending, _ringer
    _lock = threading.Lock()
    _ring_wanted = threading.Condition(_lock)
    _last_rung, _pending, _ringer = {}, set(), None


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
