"""Periodic passes that catch up at once: batches until nothing is due or the time budget
is spent, one pass at a time, continued by a fresh task while work remains.

Beat starts the freshness evaluation (every 15 s) and the change-notice scheduler (every
minute). A pass that judged one batch and stopped would leave the rest of a shared
deadline to the following ticks (6,667 datasets due at 06:00, 200 a minute: the last
told 34 minutes late), so a pass takes batch after batch while each one comes back full, for at most
``settings.TIDEMARK_PASS_SECONDS``; then its task rings itself for another pass, so other
tasks queued on the worker get their turn and no task nears Celery's time limit.

One pass runs at a time per kind (``single_flight``): beat's tick while a chain of
passes is catching up finds the pass taken and returns at once, instead of starting a
second chain that would ring itself in turn (one more chain per tick of backlog). The
guard is a PostgreSQL session advisory lock, so a worker that dies mid-pass releases it
with its connection and beat's next tick starts a new chain: a crash costs at most a
tick, never the work. Correctness never rests on the guard: the passes lock their rows
with SKIP LOCKED and move them on by compare-and-set, so two passes at once (the guard
on SQLite, a lost connection) still judge each row once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection

FRESHNESS = "freshness"
CHANGE_NOTICES = "change-notices"
UNUSUALLY_LATE = "unusually-late"
AT_RISK = "at-risk"


@contextmanager
def single_flight(name: str) -> Iterator[bool]:
    """Hold the pass ``name`` for the block, if no other process holds it.

    Yields:
        True when this process holds the pass (the caller runs it); False when another
        does (the caller returns: that pass continues its own chain). On a database
        without advisory locks (embedded SQLite, one worker) always True.

    The lock lives on the database session, not in a transaction: it spans the pass's
    batches, each its own transaction, and goes with the connection if the process dies.
    """
    if connection.vendor != "postgresql":
        yield True
        return
    key = f"tidemark-pass:{name}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [key])
        held = cursor.fetchone()[0]
    try:
        yield held
    finally:
        # A connection lost mid-pass took the lock with it. An unlock that fails marks the
        # connection broken, and Celery's Django fixup closes a broken connection after
        # the task, which releases the lock.
        if held:
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [key])


@dataclass
class PassSummary:
    """What one pass did: ``batches`` run, ``handled`` items they returned, whether the
    pass was ``skipped`` (another held it) and whether it stopped with work possibly
    left (``more_due``: the caller rings for another pass)."""

    batches: int = 0
    handled: int = 0
    skipped: bool = False
    more_due: bool = False

    def __str__(self) -> str:
        if self.skipped:
            return "skipped: another pass is running"
        more = ", more due" if self.more_due else ""
        return f"{self.handled} in {self.batches} batch(es){more}"


def run_batches(
    batch: Callable[[], tuple[int, bool]],
    *,
    budget_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> PassSummary:
    """Call ``batch`` until it says it was not full, or ``budget_seconds`` have passed
    (checked after each batch, so one batch always runs).

    Args:
        batch: runs one batch in its own transaction and returns ``(items handled, full)``;
            ``full`` means the batch hit its limit, so more may be due.
        budget_seconds: the pass's time budget (default ``settings.TIDEMARK_PASS_SECONDS``).
        clock: monotonic seconds (tests move it).

    Returns:
        The summary; ``more_due`` when the budget ran out after a full batch.
    """
    budget = settings.TIDEMARK_PASS_SECONDS if budget_seconds is None else budget_seconds
    summary = PassSummary()
    started = clock()
    while True:
        handled, full = batch()
        summary.batches += 1
        summary.handled += handled
        if not full:
            return summary
        if clock() - started >= budget:
            summary.more_due = True
            return summary
