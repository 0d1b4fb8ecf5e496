"""Running retention rules: each batch is its own short transaction that locks the rows it
will delete (``FOR UPDATE SKIP LOCKED``) and deletes them by primary key, with what their
``on_delete`` relations make follow (``cascade``: set-based on PostgreSQL, else Django's
collector).

Safe to run twice at once (a row one pruner locked is skipped by the other), idempotent
(a rule selects only what is prunable now), and stoppable at any point (what a batch
deleted is committed; nothing else is kept between runs). The rule's query is
re-evaluated under the row lock, so a row that stopped being prunable since (a dead letter
replayed, an incident reopened) is left alone.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.apps import apps
from django.conf import settings
from django.db import OperationalError, connections, models, router, transaction
from psycopg import errors

from . import cascade

logger = logging.getLogger(__name__)

# A batch waits at most this long for a lock it needs (a cascade or SET NULL touching a
# row another transaction holds), then gives way: pruning never queues behind live work.
LOCK_TIMEOUT_MS = 2000
# PostgreSQL errors after which a batch gives way (nothing deleted) rather than fail the run.
GIVE_WAY = (errors.LockNotAvailable, errors.DeadlockDetected)


@dataclass(frozen=True)
class Rule:
    """Which rows of one table may be deleted at a given time.

    ``prunable(now)`` returns the queryset of rows deletable at ``now`` (aware UTC): the
    age condition and every "never deleted" condition are in that query, so they are
    checked again under the row lock. Rows of other tables that reference a deleted row
    follow Django's ``on_delete`` (a delivery's attempts, an incident's pages go with it).
    """

    table: str
    model: type[models.Model]
    prunable: Callable[[datetime], models.QuerySet]
    keeps: str  # what the rule never deletes, in words (``manage.py prune --help``)
    # The order batches take rows in: oldest first along an index, so that each batch
    # reads the front of one range (a random key such as a uuid would make every batch
    # step over the rows still kept, and the run quadratic in the table's size).
    order: tuple[str, ...] = ("pk",)
    # The table of a rule whose rows keep this one's (a notification stays while a
    # delivery names it): in a run, this rule starts once that one has nothing left, so
    # that its batches find what that rule freed instead of ending the run early on a
    # short batch.
    after: str = ""

    def alias(self) -> str:
        return router.db_for_write(self.model) or "default"


def rules(only: Iterable[str] = ()) -> list[Rule]:
    """The rules of the apps in ``TIDEMARK_PRUNE_APPS`` (their ``retention.RULES``), in
    order; only those whose ``table`` is in ``only`` when given.

    Raises:
        LookupError: a name in ``only`` matches no rule.
    """
    found: list[Rule] = []
    for label in settings.TIDEMARK_PRUNE_APPS:
        module = importlib.import_module(f"{apps.get_app_config(label).name}.retention")
        found.extend(module.RULES)
    wanted = set(only)
    unknown = wanted - {rule.table for rule in found}
    if unknown:
        raise LookupError(f"no retention rule for {', '.join(sorted(unknown))}")
    return [rule for rule in found if not wanted or rule.table in wanted]


def count(rule: Rule, *, now: datetime) -> int:
    """How many rows ``rule`` would delete at ``now`` (its own table's rows only)."""
    return rule.prunable(now).using(rule.alias()).count()


def prune_batch(rule: Rule, *, now: datetime, size: int) -> Counter[str]:
    """Delete up to ``size`` prunable rows of ``rule`` in one transaction.

    Returns:
        Rows deleted per model label (``catalog.Delivery``, and what cascaded with them);
        an empty Counter when nothing was prunable, or another transaction held a lock
        the batch needed for longer than ``LOCK_TIMEOUT_MS`` or PostgreSQL broke a
        deadlock by rolling the batch back (then nothing was deleted).
    """
    alias = rule.alias()
    connection = connections[alias]
    try:
        with transaction.atomic(using=alias):
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
            # SKIP LOCKED: rows another pruner (or a worker) holds are someone else's now.
            ids = list(
                rule.prunable(now)
                .using(alias)
                .order_by(*rule.order)
                .select_for_update(skip_locked=True, of=("self",))
                .values_list("pk", flat=True)[:size]
            )
            if not ids:
                return Counter()
            if cascade.plannable(rule.model, alias):
                return cascade.delete(rule.model, ids, alias=alias)
            _, per_model = rule.model._base_manager.using(alias).filter(pk__in=ids).delete()
            return Counter({label: n for label, n in per_model.items() if n})
    except OperationalError as exc:
        # lock_not_available, deadlock_detected (two prunes nulling each other's locked
        # self-references): the batch rolled back whole; the next run takes it up.
        if not isinstance(exc.__cause__, GIVE_WAY):
            raise
        logger.warning("pruning %s gave way to a lock; the next run continues", rule.table)
        return Counter()


@dataclass
class Outcome:
    """What a run did for one rule: ``deleted`` rows of its table, ``cascaded`` rows of
    others (per model label), ``batches`` run, and whether rows may be left (``more``)."""

    rule: Rule
    deleted: int = 0
    cascaded: Counter[str] | None = None
    batches: int = 0
    more: bool = True


def pause_after(batch_seconds: float, duty_cycle: float) -> float:
    """Seconds to rest after a batch that took ``batch_seconds``, so that pruning works at
    most ``duty_cycle`` (0 < d <= 1) of the wall clock: ``batch_seconds * (1 - d) / d``
    (0.5: as long as the batch took; 1: no rest).

    Raises:
        ValueError: ``duty_cycle`` is not in (0, 1].
    """
    if not 0 < duty_cycle <= 1:
        raise ValueError(f"duty cycle must be in (0, 1], not {duty_cycle}")
    return max(0.0, batch_seconds) * (1 - duty_cycle) / duty_cycle


def prune(
    selected: list[Rule],
    *,
    now: datetime,
    batch_size: int,
    budget_seconds: float | None = None,
    duty_cycle: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Outcome]:
    """Run ``selected`` rules at ``now`` (aware UTC) in batches of ``batch_size`` rows,
    one batch per rule in turn so each rule progresses, until none has rows left or
    ``budget_seconds`` (wall clock, rests included; None: no limit) are spent. A rule with
    ``after`` waits until that rule (when selected) has none left. A run cut short by its
    budget leaves the rest to the next one.

    After each batch the run rests ``pause_after(batch's seconds, duty_cycle)`` (never
    past the budget, never after the last batch), so that a backlog is worked off beside
    the live workload instead of taking a core from it for the whole run. ``clock``
    (seconds, monotonic) and ``sleep`` (seconds) are the time the run measures and waits.

    Returns:
        One ``Outcome`` per rule, in ``selected``'s order.

    Raises:
        ValueError: ``duty_cycle`` is not in (0, 1].
    """
    pause_after(0.0, duty_cycle)  # checks it before anything is deleted
    ends = None if budget_seconds is None else clock() + budget_seconds
    outcomes = [Outcome(rule=rule, cascaded=Counter()) for rule in selected]
    active = list(outcomes)
    rest = 0.0
    while active:
        running = {outcome.rule.table for outcome in active}
        for outcome in [o for o in active if o.rule.after not in running]:
            if rest:
                sleep(rest if ends is None else max(0.0, min(rest, ends - clock())))
            if ends is not None and clock() >= ends:
                return outcomes
            began = clock()
            counts = prune_batch(outcome.rule, now=now, size=batch_size)
            rest = pause_after(clock() - began, duty_cycle)
            own = counts.pop(outcome.rule.model._meta.label, 0)
            outcome.deleted += own
            outcome.cascaded.update(counts)
            outcome.batches += 1
            if own < batch_size:
                outcome.more = False
                active.remove(outcome)
    return outcomes
