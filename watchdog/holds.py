"""Holds: one late root, one page.

A monitor may name the monitors whose missed deadlines cause its own (``depends_on``:
external ids; the catalog feeds each critical dataset's data monitor the data monitors
of the datasets its jobs read, from verified lineage). When its trigger is about to go
out for a missing partition, and an upstream monitor (or one sharing its subject, e.g.
the same dataset's pipeline monitor) has an open ``missed`` or ``failed`` incident for a
partition inside that one's period (the partitions it needs, as the catalog's
``covering_keys`` reads them) whose page was sent or is on its way, the trigger is held:
its owner is told by the catalog (``dataset.late`` with ``caused_by``) but not paged for
a cause that is not theirs. It is held under the furthest late root (``chain_root``):
when that direct upstream's incident is itself held under its own upstream's (A late,
B late because of A, C late because of B), C is held under A's incident, as B is, and
``held_via`` names B's; the catalog's ``caused_by`` names the same root.

A held trigger is:

- released ``hold_after_upstream_seconds`` (``WATCHDOG_HOLD_AFTER_UPSTREAM``) after the
  root's incident resolves, if this incident is still open then: the downstream job had
  its time to catch up, the lateness is now this monitor's own, and it pages, unless an
  upstream still missing holds it again (in a chain, B pages once A's hold on it is
  released, and C is held under B's incident from then on); at once when the root
  stops paging (its page failed for good);
- in a chain, released ``hold_after_upstream_seconds`` after the direct upstream's
  incident resolves, when that comes first (B landed while A is still missing: C's job
  had its time after its own input);
- cancelled unsent when this incident resolves first (the data arrived): resolved
  silently, as a trigger held while Tidemark is degraded is.

An independent cause is never held: an upstream that is on time has no open incident for
the partitions needed, and an upstream whose own page nobody will receive (no channel,
or failed for good) holds nothing. A hold never loops: an upstream incident that is
itself held (directly or up a chain) under the incident asking holds nothing.

Everything is decided by the watchdog from its own tables, at send time: it needs nothing
from the catalog at the moment of paging, and pages when the catalog is down.

Concurrency: a pass never waits for a row lock. Each incident it holds or releases, and
each trigger it holds or defers, is locked with SKIP LOCKED (``FOR NO KEY UPDATE``, so
pages and incidents referring to it are not blocked) and checked again once locked; what
another transaction holds (a ping or a pause resolving the incident, a sender claiming
the trigger, a loop grouping it, another pass) is left to the next pass. So a pass takes
part in no deadlock, whatever order pings and pauses lock their incidents in, and none of
them is ever the victim PostgreSQL kills. A trigger is held only while every trigger of
its incident is pending, unleased and locked by the pass: a trigger that went out (sent,
grouped) or is on its way (claimed) is never held afterwards, and a held one loses its
claim token, so that a sender that claimed it earlier sends nothing (``paging._renew``).
A sender and the flood grouping, in turn, look again at what they locked and leave what
a pass held meanwhile (``held_now``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from schedules import PartitionKeyError, parse_partition_key

from . import db, incidents
from .models import Incident, Monitor, Page

logger = logging.getLogger(__name__)

# Steps followed up a chain of holds (an upstream held under its own upstream...).
MAX_DEPTH = 8
# A trigger waits this long at most for an upstream monitor that is due but not yet
# judged (another loop process is judging it): its incident may be the cause.
UPSTREAM_JUDGEMENT_WAIT = timedelta(seconds=60)
# How far a trigger waiting for an upstream's judgement is pushed back.
WAIT_STEP = timedelta(seconds=1)
# Triggers that are paging (or will): an upstream incident with one may hold others.
PAGING_STATES = (Page.State.PENDING, Page.State.SENT, Page.State.GROUPED)

# Triggers held right now: the claim and the flood grouping leave them alone.
HELD = Q(
    action=Page.Action.TRIGGER,
    incident__held_under__isnull=False,
    incident__released_at__isnull=True,
)


@dataclass(frozen=True)
class Changes:
    """What one ``hold_and_release`` did: incidents held, released, and triggers deferred
    while an upstream was being judged."""

    held: int = 0
    released: int = 0
    deferred: int = 0


def hold_and_release(*, now: datetime) -> Changes:
    """Release the holds whose upstream incident no longer pages, then hold the pending
    triggers an open upstream incident causes (``now``: aware UTC).

    Returns:
        ``Changes`` (counts).
    Side effects: sets ``held_under``/``held_at``/``released_at`` on incidents; pushes a
    trigger's ``next_attempt_at`` back by ``WAIT_STEP`` while an upstream is being judged.
    """
    with transaction.atomic(using=db.alias()):
        released = release(now=now)
        held, deferred = hold(now=now)
    return Changes(held=held, released=released, deferred=deferred)


def release(*, now: datetime) -> int:
    """Release every open held incident whose hold is over (``hold_over``), repeating
    until none is left (a chain's links release one another in one pass); returns how
    many. One that resolved meanwhile, or that another transaction holds, is left alone
    (it never pages, or is released next pass)."""
    released = 0
    for _ in range(MAX_DEPTH):
        step = 0
        held = Incident.objects.filter(
            held_under__isnull=False, released_at__isnull=True, resolved_at__isnull=True
        ).select_related("held_under__part_of", "held_via")
        for incident in held.order_by("pk"):
            if not hold_over(incident, now=now) or not _take(incident):
                continue
            step += Incident.objects.filter(pk=incident.pk).update(released_at=now)
            logger.info(
                "released the page of %s (held under incident %s)", incident, incident.held_under_id
            )
        released += step
        if not step:
            break
    return released


def hold_over(incident: Incident, *, now: datetime) -> bool:
    """Whether ``incident``'s hold (``held_under``: the root; ``held_via``: the direct
    upstream, None on holds made before it was recorded) is over at ``now`` (aware UTC):

    - the direct upstream resolved ``hold_after_upstream_seconds`` ago or more;
    - it is open, but the chain no longer stands: the root stopped paging (``pager``),
      the root resolved that long ago, or the direct upstream's own hold under the root
      was released (it pages for itself now, or is held elsewhere; ``hold`` holds this
      one again under whatever the direct upstream's page goes through).
    """
    settle = timedelta(seconds=settings.WATCHDOG_PAGING["hold_after_upstream_seconds"])
    root = incident.held_under
    via = incident.held_via or root
    assert root is not None

    def settled(upstream: Incident) -> bool:
        return upstream.resolved_at is not None and upstream.resolved_at <= now - settle

    if via.resolved_at is not None:
        return settled(via)
    if root.resolved_at is None and pager(root, avoid={incident.pk}) is None:
        return True
    if via.pk == root.pk:
        return False
    return settled(root) or chain_root(via, avoid={incident.pk}).pk != root.pk


def chain_root(incident: Incident, *, avoid: set[int]) -> Incident:
    """The furthest incident up the chain of holds from ``incident``: itself, or the
    root its own hold (or that of the incident it is part of) is under while that hold
    is in force (not released), followed at most ``MAX_DEPTH`` steps and never through
    an incident in ``avoid`` (a loop ends where it would come back)."""
    current = incident
    seen = set(avoid)
    for _ in range(MAX_DEPTH):
        group = Incident.objects.select_related("held_under").get(
            pk=(current.part_of_id or current.pk)
        )
        seen |= {current.pk, group.pk}
        upstream = group.held_under
        if upstream is None or group.released_at is not None or upstream.pk in seen:
            return current
        current = upstream
    return current


def _candidates(now: datetime) -> list[Incident]:
    """Open incidents paging for themselves with a trigger about to be claimed, whose
    monitor depends on others and names the partition missing, not held right now."""
    trigger_due = Page.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        incident_id=OuterRef("pk"),
        action=Page.Action.TRIGGER,
        state=Page.State.PENDING,
        next_attempt_at__lte=now,
    )
    return list(
        Incident.objects.filter(Exists(trigger_due), resolved_at__isnull=True, part_of__isnull=True)
        .exclude(partition="")
        .exclude(monitor__depends_on=[])
        .exclude(monitor__partitioning="")
        .exclude(held_under__isnull=False, released_at__isnull=True)
        .select_related("monitor")
        .order_by("pk")
    )


def hold(*, now: datetime) -> tuple[int, int]:
    """Hold each candidate trigger under the furthest late root (``chain_root``) of the
    first open upstream incident that causes it (``cause_of``); defer one whose upstream
    is due but not yet judged. A candidate whose cause is itself a candidate is decided
    after it, so a chain judged in one pass is held under its root at once. A trigger
    that paging has begun for, or that another transaction holds, is not held
    (``_take_triggers``). Returns ``(held, deferred)``."""
    candidates = _candidates(now)
    if not candidates:
        return 0, 0
    upstreams = _upstream_monitors(candidates)
    open_upstream = _open_upstream_incidents({m.pk for ms in upstreams.values() for m in ms})
    pending = {incident.pk: incident for incident in candidates}
    decided: set[int] = set()
    held = deferred = 0

    def decide(incident: Incident, depth: int = 0) -> None:
        nonlocal held, deferred
        decided.add(incident.pk)
        mine = upstreams.get(incident.monitor_id, [])
        cause = cause_of(incident, mine, open_upstream=open_upstream)
        if cause is not None and cause.pk in pending and cause.pk not in decided:
            if depth < MAX_DEPTH:
                decide(pending[cause.pk], depth + 1)
            cause = cause_of(incident, mine, open_upstream=open_upstream)
        if cause is not None:
            triggers = _take_triggers(incident, now=now)
            if not triggers:
                return
            root = chain_root(cause, avoid={incident.pk})
            held += Incident.objects.filter(pk=incident.pk).update(
                held_under=root, held_via=cause, held_at=now, released_at=None
            )
            # Taken over like an expired claim: a sender that claimed one earlier, and was
            # slow to send it, finds its claim gone and sends nothing.
            Page.objects.filter(pk__in=triggers).update(lease_until=None, claim_token=None)
            logger.info(
                "held the page of %s under incident %s (via %s)", incident, root.pk, cause.pk
            )
        elif any(_being_judged(m, now) for m in mine):
            deferred += Page.objects.filter(pk__in=_free_triggers(incident, now=now)).update(
                next_attempt_at=now + WAIT_STEP
            )

    for incident in candidates:
        if incident.pk not in decided:
            decide(incident)
    return held, deferred


def _take(incident: Incident, *, holdable: bool = False) -> bool:
    """Lock ``incident``'s row if it is still open (and, with ``holdable``, not held right
    now), skipping it when another transaction holds it; whether it was locked."""
    rows = Incident.objects.select_for_update(skip_locked=True, no_key=True).filter(
        pk=incident.pk, resolved_at__isnull=True
    )
    if holdable:
        rows = rows.exclude(held_under__isnull=False, released_at__isnull=True)
    else:
        rows = rows.filter(released_at__isnull=True)
    return bool(list(rows.values_list("pk", flat=True)))


def _free_triggers(incident: Incident, *, now: datetime) -> list[int]:
    """Lock ``incident``'s pending triggers that no sender is on (no lease, or one that
    ran out), skipping those another transaction holds; their ids."""
    return list(
        Page.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(incident=incident, action=Page.Action.TRIGGER, state=Page.State.PENDING)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _take_triggers(incident: Incident, *, now: datetime) -> list[int]:
    """Lock ``incident`` and its triggers for holding them: the ids of its triggers, or
    [] when it cannot be held now. It cannot when it resolved or was held meanwhile, when
    another transaction holds its row or one of its triggers (a ping resolving it, a sender
    claiming it, a loop grouping it), or when paging began: a trigger is sent, grouped or
    claimed."""
    if not _take(incident, holdable=True):
        return []
    free = _free_triggers(incident, now=now)
    if not free:
        return []
    begun = (
        Page.objects.filter(
            incident=incident,
            action=Page.Action.TRIGGER,
            state__in=(Page.State.PENDING, Page.State.SENT, Page.State.GROUPED),
        )
        .exclude(pk__in=free)
        .exists()
    )
    return [] if begun else free


def held_now(page_ids: list[int], *, held: Q = HELD) -> set[int]:
    """Which of ``page_ids`` are held (``held``: ``HELD`` or a wider condition) as of now.

    A sender or the flood grouping calls it on the pages it has just locked: their first
    read may predate a hold pass that committed before they got the lock."""
    if not page_ids:
        return set()
    return set(Page.objects.filter(pk__in=page_ids).filter(held).values_list("pk", flat=True))


def _being_judged(monitor: Monitor, now: datetime) -> bool:
    return (
        monitor.state != Monitor.State.PAUSED
        and monitor.check_at is not None
        and now - UPSTREAM_JUDGEMENT_WAIT < monitor.check_at <= now
    )


def _upstream_monitors(candidates: list[Incident]) -> dict[int, list[Monitor]]:
    """Per candidate monitor id, the monitors it depends on and those sharing their
    subjects (one dataset's data and pipeline monitors); two queries."""
    named = list(
        Monitor.objects.filter(
            external_id__in={e for i in candidates for e in i.monitor.depends_on}
        )
    )
    if not named:
        return {}
    everyone = list(Monitor.objects.filter(_of_monitors(named)))
    found: dict[int, list[Monitor]] = {}
    for incident in candidates:
        wanted = set(incident.monitor.depends_on)
        subjects = {incidents.subject_of(m) for m in named if m.external_id in wanted} - {""}
        found[incident.monitor_id] = [
            m
            for m in everyone
            if m.pk != incident.monitor_id
            and (m.external_id in wanted or incidents.subject_of(m) in subjects)
        ]
    return found


def _of_monitors(monitors: list[Monitor]) -> Q:
    condition = Q(pk__in=[m.pk for m in monitors])
    for subject in {incidents.subject_of(m) for m in monitors} - {""}:
        condition |= Q(external_id__startswith=f"{subject}:")
    return condition


def _period(monitor: Monitor, key: str):
    if not monitor.partitioning or not key:
        return None
    try:
        return parse_partition_key(monitor.partitioning, key, monitor.partition_timezone)
    except PartitionKeyError:
        return None


def _open_upstream_incidents(monitor_ids: set[int]) -> list[Incident]:
    """The open ``missed`` or ``failed`` incidents of ``monitor_ids`` naming a partition,
    oldest first (one query)."""
    if not monitor_ids:
        return []
    return list(
        Incident.objects.filter(
            monitor_id__in=monitor_ids,
            resolved_at__isnull=True,
            reason__in=(Incident.Reason.MISSED, Incident.Reason.FAILED),
        )
        .exclude(partition="")
        .select_related("part_of")
        .order_by("opened_at", "pk")
    )


def cause_of(
    incident: Incident, upstreams: list[Monitor], *, open_upstream: list[Incident]
) -> Incident | None:
    """The open upstream incident that ``incident``'s missing partition waits for, or None.

    The rule: among the open ``missed`` or ``failed`` incidents of ``upstreams`` naming a
    partition whose period lies inside the period of ``incident``'s partition (the same
    period, or a finer one inside it), oldest first, the first whose page is sent or on
    its way (``pager``, never through ``incident`` itself).

    ``open_upstream``: those incidents, read once for a whole pass
    (``_open_upstream_incidents``; a superset is fine)."""
    needed = _period(incident.monitor, incident.partition)
    if needed is None or not upstreams:
        return None
    by_id = {m.pk: m for m in upstreams}
    for candidate in open_upstream:
        if candidate.monitor_id not in by_id:
            continue
        period = _period(by_id[candidate.monitor_id], candidate.partition)
        if period is None or period.start < needed.start or period.end > needed.end:
            continue
        if pager(candidate, avoid={incident.pk}) is not None:
            return candidate
    return None


def pager(incident: Incident, *, avoid: set[int]) -> Incident | None:
    """The incident whose page tells people about ``incident``: the one it is part of
    (or itself), followed up its own hold while it is held; None when nobody is or will
    be paged through it (no trigger sent, pending or grouped; a chain reaching an
    incident in ``avoid``, or longer than ``MAX_DEPTH``)."""
    current = incident
    seen = set(avoid)
    for _ in range(MAX_DEPTH):
        root = current.part_of or current
        if current.pk in seen or root.pk in seen:
            return None
        seen |= {current.pk, root.pk}
        root = Incident.objects.select_related("held_under__part_of").get(pk=root.pk)
        upstream = root.held_under
        if upstream is not None and root.released_at is None and upstream.resolved_at is None:
            current = upstream  # held itself: the page is its upstream's
            continue
        if Page.objects.filter(
            incident=root, action=Page.Action.TRIGGER, state__in=PAGING_STATES
        ).exists():
            return root
        return None
    return None
