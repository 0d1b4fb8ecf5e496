"""Writes of lineage: receiving OpenLineage events and processing them into runs, jobs and
observed usage. Every function is keyword-only and typed.

Receiving stores the raw event in one short transaction and rings the lineage doorbell
after commit. Processing is the outbox pattern of catalog deliveries (DESIGN.md
principles 1 and 2): pending events are claimed with a lease under ``FOR UPDATE SKIP
LOCKED``, a claimed batch is applied in one transaction fenced by its claim token (each
event under its own savepoint, so one failing event does not undo the others), and the
beat sweep finds events whose doorbell was lost or whose worker died. Applying an event is
idempotent and order-independent, so processing one twice, or its run's events in any
order, leaves the same runs, jobs and usage.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, Q
from django.db.models.functions import Now
from django.utils import timezone

from catalog import doorbell, schema_changes, selectors
from catalog.actors import Actor
from catalog.models import Claim, DatasetUsage, Job, SchemaObservation, Team
from catalog.services import aliases, subscriptions, usage

from . import collectors, openlineage, runstate
from .errors import CollectorUnknown
from .models import CollectorCursor, LineageEvent, LineageRun, LineageRunEdge

logger = logging.getLogger(__name__)

PROCESS_EVENTS = "lineage.tasks.process_events"


def _config() -> dict:
    return settings.TIDEMARK_LINEAGE


# --- receiving --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiveResult:
    """``lineage_event_receive``'s answer: the stored event, and False in ``created`` when
    the same event from the same team was already stored (nothing changed)."""

    event: LineageEvent
    created: bool


def lineage_event_receive(
    *,
    actor: Actor,
    payload: Any,
    content_encoding: str = "",
    body_bytes: int = 0,
    now: datetime,
) -> ReceiveResult:
    """Check one OpenLineage event (RunEvent, JobEvent or DatasetEvent, spec 2-0-2) and
    store it, raw, for processing.

    The event is attributed to the actor's team. It is verified when that team claims the
    event's job namespace now (``catalog.Claim``, kind ``job_namespace``); otherwise it is
    kept, unverified: its usage is recorded apart and never counts as a declaration.

    Args:
        payload: the decoded JSON body.
        content_encoding: the request's ``Content-Encoding`` (``gzip`` or empty), kept.
        body_bytes: the body's size as received (compressed, if it was), kept.
        now: aware UTC instant; the event is due for processing from then.

    Returns:
        ``ReceiveResult``; ``created`` False when this team sent the same event before
        (same canonical JSON): nothing is stored again.

    Raises:
        EventInvalid: a required identifier is missing, empty or malformed (422).
        EventTimeInvalid: ``eventTime`` is not a date-time (400).

    Side effects: rings the lineage doorbell after commit (never fails the request).
    """
    parsed = openlineage.parse_event(payload)
    values = {
        "team_id": actor.team.pk,
        "api_key_id": actor.api_key.pk if actor.api_key is not None else None,
        "kind": parsed.kind,
        "event_type": parsed.event_type or "",
        "event_time": parsed.event_time,
        "event_time_assumed_utc": parsed.event_time_assumed_utc,
        "run_id": parsed.run_id,
        "job_namespace": parsed.job_namespace or "",
        "job_name": parsed.job_name or "",
        "payload": payload,
        "problems": [problem.as_dict() for problem in parsed.problems],
        "fingerprint": openlineage.event_fingerprint(payload),
        "content_encoding": content_encoding[:16],
        "body_bytes": body_bytes,
        "next_attempt_at": now,
    }
    # Insert first: a new event (the usual case) costs one INSERT and its commit; a repeat
    # conflicts on the unique (team, fingerprint) constraint and is read back. Outside a
    # transaction the INSERT commits on its own: no BEGIN and COMMIT.
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        event = (
            _event_insert_pg(values)
            if connection.vendor == "postgresql"
            else _event_insert_orm(values, team=actor.team)
        )
        if event is not None:
            ring_after_commit()
    if event is None:
        event = LineageEvent.objects.get(team=actor.team, fingerprint=values["fingerprint"])
        return ReceiveResult(event=event, created=False)
    return ReceiveResult(event=event, created=True)


# Verified is decided by the INSERT itself: whether the team claims the job namespace now.
_EVENT_INSERT_SQL = f"""INSERT INTO {LineageEvent._meta.db_table} (
    team_id, api_key_id, verified, kind, event_type, event_time, event_time_assumed_utc,
    run_id, job_namespace, job_name, payload, problems, fingerprint, content_encoding,
    body_bytes, received_at, state, attempts, next_attempt_at, last_error
)
VALUES (
    %(team_id)s, %(api_key_id)s,
    %(job_namespace)s <> '' AND EXISTS (
        SELECT 1 FROM {Claim._meta.db_table}
        WHERE team_id = %(team_id)s AND kind = %(claim_kind)s AND pattern = %(job_namespace)s
    ),
    %(kind)s, %(event_type)s, %(event_time)s, %(event_time_assumed_utc)s, %(run_id)s,
    %(job_namespace)s, %(job_name)s, %(payload)s::jsonb, %(problems)s::jsonb,
    %(fingerprint)s, %(content_encoding)s, %(body_bytes)s, %(received_at)s, %(state)s, 0,
    %(next_attempt_at)s, ''
)
ON CONFLICT ON CONSTRAINT uniq_lineage_event DO NOTHING
RETURNING id, verified
"""  # noqa: S608 - model tables and placeholders only


def _event_insert_pg(values: dict[str, Any]) -> LineageEvent | None:
    """Insert the event in one statement (the ORM's compiling of it cost a quarter of an
    accept's CPU); None when this team sent the same event before."""
    received_at = timezone.now()
    params = {
        **values,
        "payload": json.dumps(values["payload"], ensure_ascii=False),
        "problems": json.dumps(values["problems"]),
        "claim_kind": Claim.Kind.JOB_NAMESPACE,
        "received_at": received_at,
        "state": LineageEvent.State.PENDING,
    }
    with connection.cursor() as cursor:
        cursor.execute(_EVENT_INSERT_SQL, params)
        row = cursor.fetchone()
    if row is None:
        return None
    event = LineageEvent(
        id=row[0],
        verified=row[1],
        received_at=received_at,
        state=LineageEvent.State.PENDING,
        attempts=0,
        last_error="",
        **values,
    )
    event._state.adding = False
    event._state.db = connection.alias
    return event


def _event_insert_orm(values: dict[str, Any], *, team: Team) -> LineageEvent | None:
    """The same insert through the ORM (SQLite); None when the event is a repeat."""
    verified = bool(values["job_namespace"]) and Exists(
        selectors.job_namespace_claim_list(team=team, namespace=values["job_namespace"])
    )
    try:
        with transaction.atomic():
            return LineageEvent.objects.create(**{**values, "verified": verified})
    except IntegrityError:
        if LineageEvent.objects.filter(team=team, fingerprint=values["fingerprint"]).exists():
            return None
        raise  # not a repeat: another constraint failed


def ring_after_commit() -> None:
    """Ring the lineage workers' doorbell once the current transaction commits, coalesced
    with this process's other rings of it (``catalog.doorbell``); a broker failure is
    logged, never raised (the sweep processes what a lost ring left)."""
    doorbell.ring_after_commit(PROCESS_EVENTS)


# --- processing -------------------------------------------------------------------------


@dataclass(frozen=True)
class EventClaim:
    """One claimed event: its id, the claim's token and this attempt's number."""

    event_id: int
    token: uuid.UUID
    attempt: int


def lineage_event_claim_due(*, limit: int, lease_seconds: int) -> list[EventClaim]:
    """Claim up to ``limit`` pending events whose ``next_attempt_at`` has come and whose
    lease (if any) has expired, oldest first; rows other workers hold are skipped.

    Args:
        lease_seconds: how long the claim is exclusive (the database's clock).

    Returns:
        The claims; each claimed event's ``attempts`` has been counted.
    """
    token = uuid.uuid4()
    with transaction.atomic():
        ids = list(
            LineageEvent.objects.select_for_update(skip_locked=True)
            .filter(state=LineageEvent.State.PENDING, next_attempt_at__lte=Now())
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=Now()))
            .order_by("next_attempt_at", "id")
            .values_list("id", flat=True)[:limit]
        )
        if not ids:
            return []
        LineageEvent.objects.filter(id__in=ids).update(
            claim_token=token,
            claimed_until=Now() + timedelta(seconds=lease_seconds),
            attempts=F("attempts") + 1,
        )
        attempts = dict(LineageEvent.objects.filter(id__in=ids).values_list("id", "attempts"))
    return [EventClaim(event_id=pk, token=token, attempt=attempts[pk]) for pk in ids]


def lineage_event_process(*, claim: EventClaim, now: datetime) -> str | None:
    """Apply one claimed event: ``lineage_events_process_claimed`` for a single claim.

    Returns:
        The event's new state, or None when the claim was lost.
    """
    return lineage_events_process_claimed(claims=[claim], now=now)[claim.event_id]


# Events applied per transaction: each writes under a savepoint (a subtransaction with its
# own xid), and past 64 of them in one transaction PostgreSQL's per-backend subtransaction
# cache overflows, which slows every other session's visibility checks.
EVENTS_PER_TRANSACTION = 50


def lineage_events_process_claimed(
    *, claims: list[EventClaim], now: datetime
) -> dict[int, str | None]:
    """Apply claimed events to runs, jobs and usage, in one transaction fenced by their
    claim tokens, and mark them processed.

    Run events: the job is recorded (its owner set when the event is verified); the run
    is created or locked, keeps the job, team and parent it was first given, and its
    state and times fold in the event (``lineage.runstate``); every input and every table
    its ``sql`` job facet's query reads (read), and every output (write), is recorded as
    usage of the run's job, counted once per run. Job
    events record the job; a verified one also declares its inputs that are catalog
    datasets as subscriptions of the job's team naming the job (no endpoint), never
    changing one that exists; unverified ones declare nothing. Every event keeps the
    received spelling of each dataset identity that normalised to another. A dataset's
    well-formed ``schema`` facet is a schema sighting of the catalog dataset
    (``catalog.schema_changes``: recorded for verified events and the owner's own), and
    its ``symlinks`` facet, in a verified event of the dataset's owner, declares aliases
    of it (``catalog.services.aliases.dataset_symlinks_record``).

    A transaction takes at most ``EVENTS_PER_TRANSACTION`` of the claims, applied first
    without savepoints; if one of them fails, the transaction is rolled back and the
    chunk applied again with each event under its own savepoint: one that fails is rolled
    back alone and scheduled for a retry (or failed), as if it had been processed on its
    own. Events
    are applied in order of job, run and id, so that concurrent workers take the job, run
    and usage rows' locks in one order. Should the batch's transaction fail as a whole
    (a deadlock, a lost connection), each claim is processed in a transaction of its own.

    Args:
        claims: claims from ``lineage_event_claim_due``.
        now: aware UTC instant recorded as ``processed_at``.

    Returns:
        Each claimed event's new state (``processed``, ``pending`` for a retry,
        ``failed`` after ``max_attempts``) by event id, or None when the claim was lost
        (another worker took the event after the lease expired, or it was processed
        already): nothing is written for it then.
    """
    states: dict[int, str | None] = {}
    for start in range(0, len(claims), EVENTS_PER_TRANSACTION):
        states.update(_process_chunk(claims[start : start + EVENTS_PER_TRANSACTION], now=now))
    return states


def _process_chunk(claims: list[EventClaim], *, now: datetime) -> dict[int, str | None]:
    if len(claims) > 1:
        # Optimistic first: the whole chunk without a savepoint per event (two statements
        # fewer per event). Should any event fail, nothing of the chunk is written and
        # it is applied again with savepoints, where the failure stays that event's own.
        try:
            return _process_together(claims, now=now, isolated=False)
        except Exception as exc:
            logger.info(
                "lineage events: a batch of %d failed (%s); again, one savepoint per event",
                len(claims),
                _describe(exc),
            )
    try:
        return _process_together(claims, now=now, isolated=True)
    except Exception as exc:  # the transaction failed as a whole: nothing of it was written
        if len(claims) == 1:
            logger.exception("lineage event %s: processing failed", claims[0].event_id)
            return {claims[0].event_id: _record_failure(claims[0], _describe(exc))}
        logger.exception("lineage events: a batch of %d failed; one at a time", len(claims))
        states: dict[int, str | None] = {}
        for claim in claims:
            states.update(_process_chunk([claim], now=now))
        return states


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _process_together(
    claims: list[EventClaim], *, now: datetime, isolated: bool
) -> dict[int, str | None]:
    """Apply the claims in one transaction. ``isolated``: each event under a savepoint
    (a failing one is rolled back alone and recorded as failed); otherwise any failure
    propagates and rolls back the whole transaction."""
    by_id = {claim.event_id: claim for claim in claims}
    states: dict[int, str | None] = dict.fromkeys(by_id)
    failures: list[tuple[EventClaim, str]] = []
    with transaction.atomic():
        fence = Q()
        for token in {claim.token for claim in claims}:
            ids = [claim.event_id for claim in claims if claim.token == token]
            fence |= Q(pk__in=ids, claim_token=token)
        events = list(
            # Only the event rows: locking their team would hold up every insert that
            # references the team (FOR KEY SHARE) until these events are processed.
            LineageEvent.objects.select_for_update(of=("self",))
            .select_related("team")
            .filter(fence, state=LineageEvent.State.PENDING)
            .order_by("id")
        )
        events.sort(key=_lock_order)
        done: list[int] = []
        for event in events:
            if not isolated:
                _apply(event, now=now)
                done.append(event.pk)
                continue
            try:
                with transaction.atomic():  # a savepoint: a failure undoes this event only
                    _apply(event, now=now)
            except Exception as exc:  # one bad event must not stop the batch; it is retried
                logger.exception("lineage event %s: processing failed", event.pk)
                failures.append((by_id[event.pk], _describe(exc)))
            else:
                done.append(event.pk)
        if done:
            # Fenced by the row locks taken above: no other claim can have these events.
            LineageEvent.objects.filter(pk__in=done).update(
                state=LineageEvent.State.PROCESSED,
                processed_at=now,
                claim_token=None,
                claimed_until=None,
                last_error="",
            )
            states.update(dict.fromkeys(done, LineageEvent.State.PROCESSED))
        for claim, error in failures:
            states[claim.event_id] = _record_failure(claim, error)
    return states


def _lock_order(event: LineageEvent) -> tuple:
    """Job, then run, then arrival: the order rows are locked in by every worker."""
    return (event.job_namespace, event.job_name, str(event.run_id or ""), event.pk)


def _record_failure(claim: EventClaim, error: str) -> str | None:
    """Schedule a retry with capped exponential backoff, or give up after
    ``max_attempts`` (state ``failed``, kept with its error for an operator)."""
    config = _config()
    changes: dict[str, Any] = {"claim_token": None, "claimed_until": None, "last_error": error}
    if claim.attempt >= config["max_attempts"]:
        changes["state"] = LineageEvent.State.FAILED
    else:
        delay = min(
            config["backoff_cap_seconds"], config["backoff_base_seconds"] * 2 ** (claim.attempt - 1)
        )
        changes["next_attempt_at"] = Now() + timedelta(seconds=delay)
    updated = LineageEvent.objects.filter(pk=claim.event_id, claim_token=claim.token).update(
        **changes
    )
    if updated != 1:
        return None
    return changes.get("state", LineageEvent.State.PENDING)


def _apply(event: LineageEvent, *, now: datetime) -> None:
    parsed = openlineage.parse_event(event.payload)
    owner = event.team if event.verified else None
    if parsed.kind == openlineage.RUN:
        _apply_run_event(event, parsed, now=now)
    elif parsed.kind == openlineage.JOB:
        usage.job_record(
            namespace=parsed.job_namespace,
            name=parsed.job_name,
            team=owner,
            seen_at=parsed.event_time,
        )
        if owner is not None:  # a verified JobEvent's inputs declare what the job reads
            subscriptions.subscription_declare_for_job(
                team=owner,
                job_namespace=parsed.job_namespace,
                job_name=parsed.job_name,
                identities=sorted({(ref.namespace, ref.name) for ref in parsed.inputs}),
            )
    refs = [*parsed.inputs, *parsed.outputs, *([parsed.dataset] if parsed.dataset else [])]
    for ref in sorted(refs, key=lambda r: (r.received_namespace, r.received_name)):
        aliases.dataset_alias_record(
            alias_namespace=ref.received_namespace,
            alias_name=ref.received_name,
            namespace=ref.namespace,
            name=ref.name,
            seen_at=parsed.event_time,
        )
    links = [(ref.namespace, ref.name, ref.symlinks) for ref in refs if ref.symlinks]
    if links and event.verified:  # only the owner's verified events declare aliases
        aliases.dataset_symlinks_record(team=event.team, links=links, seen_at=parsed.event_time)
    sightings = [
        schema_changes.SchemaSighting(ref.namespace, ref.name, ref.schema)
        for ref in refs
        if ref.schema is not None
    ]
    if sightings:  # nothing at all for the events that carry no schema
        schema_changes.schema_sightings_record(
            sightings=sightings,
            observed_at=parsed.event_time,
            source=SchemaObservation.Source.LINEAGE,
            team=event.team,
            authorised=False,  # the owner's events only
            now=now,
            job_namespace=parsed.job_namespace or "",
            job_name=parsed.job_name or "",
            run_id=parsed.run_id,
            lineage_event_id=event.pk,
        )


def _apply_run_event(
    event: LineageEvent, parsed: openlineage.OpenLineageEvent, *, now: datetime
) -> None:
    """Locks in one order everywhere (job, run, usage rows sorted by identity), so
    concurrent workers never deadlock."""
    job = usage.job_record(
        namespace=parsed.job_namespace,
        name=parsed.job_name,
        team=event.team if event.verified else None,
        seen_at=parsed.event_time,
    )
    run = _run_lock_or_create(parsed, job=job, event=event)

    changed = False
    facts = runstate.apply(run.facts(), event_type=parsed.event_type, event_time=parsed.event_time)
    if facts != run.facts():
        run.state, run.started_at = facts.state, facts.started_at
        run.ended_at, run.last_event_at = facts.ended_at, facts.last_event_at
        changed = True
    if run.parent_run_id is None and parsed.parent is not None:
        run.parent_run_id = parsed.parent.run_id
        run.parent_job_namespace = parsed.parent.job_namespace
        run.parent_job_name = parsed.parent.job_name
        changed = True
    if changed:
        _run_save(run, now=now)

    # An event naming another job than its run's reports for the run's job, which its
    # team's claim does not cover: unverified.
    verified = event.verified and run.job_id == job.pk
    edges = sorted(
        {
            (DatasetUsage.Direction.READ, ref.namespace, ref.name)
            for ref in (*parsed.inputs, *parsed.sql_reads)
        }
        | {(DatasetUsage.Direction.WRITE, ref.namespace, ref.name) for ref in parsed.outputs},
        key=lambda edge: (edge[1], edge[2], edge[0]),
    )
    if not edges:
        return
    usage_ids = usage.usages_observe(
        job=run.job,
        edges=edges,
        team=event.team,
        verified=verified,
        seen_at=parsed.event_time,
    )
    # The run row is locked: no one else adds its edges meanwhile.
    new_ids = _run_edges_add(run, sorted(usage_ids.values()))
    usage.usage_count_runs(usage_ids=new_ids)


_RUN_SAVED_FIELDS = [
    "state",
    "started_at",
    "ended_at",
    "last_event_at",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
]


def _run_save(run: LineageRun, *, now: datetime) -> None:
    """Write the locked run's state, times and parent. One fixed UPDATE whatever changed,
    so PostgreSQL prepares it once (the ORM's update compiled anew for every event)."""
    run.updated_at = now
    if connection.vendor != "postgresql":
        LineageRun.objects.filter(pk=run.pk).update(
            **{column: getattr(run, column) for column in _RUN_SAVED_FIELDS}, updated_at=now
        )
        return
    assignments = ", ".join(f"{column} = %s" for column in [*_RUN_SAVED_FIELDS, "updated_at"])
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {LineageRun._meta.db_table} SET {assignments} WHERE id = %s",  # noqa: S608
            [*(getattr(run, column) for column in _RUN_SAVED_FIELDS), now, run.pk],
        )


def _run_edges_add(run: LineageRun, usage_ids: list[int]) -> list[int]:
    """Insert the run's edges to these usage rows that it does not have yet.

    Returns:
        The usage ids whose edge is new: the runs these usage rows have not counted.
    """
    if connection.vendor != "postgresql":
        known = set(
            LineageRunEdge.objects.filter(run=run, usage_id__in=usage_ids).values_list(
                "usage_id", flat=True
            )
        )
        new_ids = [pk for pk in usage_ids if pk not in known]
        LineageRunEdge.objects.bulk_create([LineageRunEdge(run=run, usage_id=pk) for pk in new_ids])
        return new_ids
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LineageRunEdge._meta.db_table} (run_id, usage_id, created_at)
            SELECT %s::bigint, usage_id, %s::timestamptz
            FROM unnest(%s::bigint[]) AS usage_id
            ON CONFLICT ON CONSTRAINT uniq_run_edge DO NOTHING
            RETURNING usage_id
            """,  # noqa: S608 - model tables and placeholders only
            [run.pk, timezone.now(), usage_ids],
        )
        return sorted(pk for (pk,) in cursor)


def _run_lock_or_create(
    parsed: openlineage.OpenLineageEvent, *, job: Job, event: LineageEvent
) -> LineageRun:
    """The run row, locked for this transaction; created (with this event's job, team
    and parent) when it is the first event of the run to be processed.

    On PostgreSQL one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` creates or locks
    it; elsewhere an insert that ignores conflicts, then a locking read."""
    parent = parsed.parent
    run = LineageRun(
        run_id=parsed.run_id,
        job=job,
        team=event.team,
        parent_run_id=parent.run_id if parent else None,
        parent_job_namespace=parent.job_namespace if parent else "",
        parent_job_name=parent.job_name if parent else "",
    )
    if connection.vendor == "postgresql":
        return _run_upsert(run)
    LineageRun.objects.bulk_create([run], ignore_conflicts=True)
    return (
        LineageRun.objects.select_for_update(of=("self",))
        .select_related("job")
        .get(run_id=parsed.run_id)
    )


_RUN_COLUMNS = [
    "id",
    "run_id",
    "job_id",
    "team_id",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
    "state",
    "started_at",
    "ended_at",
    "last_event_at",
    "created_at",
    "updated_at",
]


def _run_upsert(new: LineageRun) -> LineageRun:
    """Insert the run, or lock the existing row (the no-op update takes its row lock),
    and read it back, in one statement."""
    stamp = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LineageRun._meta.db_table} AS r (
                run_id, job_id, team_id, parent_run_id, parent_job_namespace,
                parent_job_name, state, created_at, updated_at
            )
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (run_id) DO UPDATE SET run_id = r.run_id
            RETURNING {", ".join(f"r.{column}" for column in _RUN_COLUMNS)}
            """,  # noqa: S608 - model table and placeholders only
            [
                new.run_id,
                new.job_id,
                new.team_id,
                new.parent_run_id,
                new.parent_job_namespace,
                new.parent_job_name,
                LineageRun.State.NEW,
                stamp,
                stamp,
            ],
        )
        row = cursor.fetchone()
    run = LineageRun(**dict(zip(_RUN_COLUMNS, row, strict=True)))
    run._state.adding = False
    run._state.db = connection.alias
    if run.job_id == new.job_id:
        run.job = new.job
    return run


@dataclass
class ProcessSummary:
    """What one processing pass did: claimed events by final state, claims lost."""

    claimed: int = 0
    by_state: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    more_due: bool = False

    def __str__(self) -> str:
        states = ", ".join(f"{k} {v}" for k, v in sorted(self.by_state.items())) or "none"
        return f"claimed {self.claimed}: {states}; claims lost {self.lost}"


def lineage_events_process_due(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    max_batches: int = 20,
    max_seconds: float = 45.0,
) -> ProcessSummary:
    """Claim and process due events until none is left, ``max_batches`` batches are done,
    or ``max_seconds`` have passed (checked after each batch, well inside Celery's 90 s
    soft time limit).

    Args:
        now: aware UTC instant for ``processed_at`` (default: the current time, read
            for each batch).

    Returns:
        A summary; ``more_due`` says the pass stopped with work possibly left.
    """
    config = _config()
    size = batch_size or config["batch_size"]
    summary = ProcessSummary()
    started = time.monotonic()
    for _ in range(max_batches):
        claims = lineage_event_claim_due(limit=size, lease_seconds=config["lease_seconds"])
        summary.more_due = len(claims) == size
        if not claims:
            break
        summary.claimed += len(claims)
        states = lineage_events_process_claimed(claims=claims, now=now or timezone.now())
        for state in states.values():
            if state is None:
                summary.lost += 1
            else:
                summary.by_state[state] = summary.by_state.get(state, 0) + 1
        if time.monotonic() - started > max_seconds:
            summary.more_due = True
            break
    return summary


# --- collectors (pulled access history) -------------------------------------------------

COLLECT_LINEAGE = "lineage.tasks.collect_lineage"


@dataclass
class CollectSummary:
    """What one collector run did: accesses observed, usage rows recorded (for
    principals a team claims), principals no team claims (their jobs are recorded and
    their accesses held, attributed to no team, until a team claims the role), and
    whether history was left to read (``more``); ``skipped`` when
    another run of the same collector held its cursor."""

    collector: str
    accesses: int = 0
    recorded: int = 0
    unclaimed_principals: list[str] = field(default_factory=list)
    more: bool = False
    skipped: bool = False
    stats: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-serialisable data (kept on the cursor row)."""
        return {
            "accesses": self.accesses,
            "recorded": self.recorded,
            "unclaimed_principals": self.unclaimed_principals,
            "more": self.more,
            **self.stats,
        }

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.collector}: skipped (another run holds it)"
        unclaimed = ", ".join(self.unclaimed_principals) or "none"
        return (
            f"{self.collector}: {self.accesses} accesses, {self.recorded} usage rows; "
            f"unclaimed principals: {unclaimed}{'; more to read' if self.more else ''}"
        )


def collector_run(*, name: str, now: datetime) -> CollectSummary:
    """Run one configured lineage collector once and record what it observed.

    In one transaction: the collector's cursor row is locked (a concurrent run of the same
    collector is skipped, not queued), the collector reads one bounded slice of its
    source after the cursor, every observed access of a principal that a team claims
    (``Claim`` kind ``db_role``, pattern ``<job namespace>/<principal>``) is recorded as
    verified usage of the job ``<job namespace>`` / ``<principal>`` for that team (its
    ``run_count`` grows by the access count), the jobs of unclaimed principals are
    recorded without an owner and their accesses held (``catalog.UnclaimedUsage``) until
    a team claims the role, which makes them its usage at once
    (``catalog.services.usage.held_usage_attribute``), and the new cursor is stored. A failure
    rolls all of it back, so the next run reads the same history again: running twice records once.

    Args:
        name: a key of ``TIDEMARK_LINEAGE_COLLECTORS``.
        now: aware UTC instant of the run.

    Returns:
        A ``CollectSummary``.

    Raises:
        CollectorUnknown: no collector of that name is configured.
        CollectorConfigError: its settings entry is malformed.
        Whatever the source raises (``psycopg.Error`` ...): nothing is recorded.
    """
    config = collectors.configured()
    if name not in config:
        raise CollectorUnknown(f"no lineage collector {name!r} is configured")
    collector = collectors.build(name, config[name])
    summary = CollectSummary(collector=name)
    CollectorCursor.objects.get_or_create(name=name)
    with transaction.atomic():
        row = CollectorCursor.objects.select_for_update(skip_locked=True).filter(name=name).first()
        if row is None:
            summary.skipped = True
            return summary
        collection = collector.collect(cursor=row.state or None, now=now)
        summary.accesses = len(collection.accesses)
        summary.more = collection.more
        summary.stats = dict(collection.stats)
        summary.recorded, summary.unclaimed_principals = _record_accesses(
            collector, collection.accesses
        )
        CollectorCursor.objects.filter(pk=row.pk).update(
            state=collection.cursor,
            runs=F("runs") + 1,
            last_run_at=now,
            last_summary=summary.as_dict(),
            updated_at=now,
        )
    return summary


def _record_accesses(
    collector: collectors.Collector, accesses: list[collectors.ObservedAccess]
) -> tuple[int, list[str]]:
    """Record accesses as usage, per principal in name order (so concurrent collectors
    lock rows in one order). Returns (usage rows touched, unclaimed principals)."""
    by_principal: dict[str, list[collectors.ObservedAccess]] = {}
    for access in accesses:
        by_principal.setdefault(access.principal, []).append(access)
    patterns = {principal: f"{collector.job_namespace}/{principal}" for principal in by_principal}
    teams = selectors.claimants(kind=Claim.Kind.DB_ROLE, patterns=sorted(patterns.values()))
    recorded = 0
    unclaimed: list[str] = []
    for principal in sorted(by_principal):
        team = teams.get(patterns[principal])
        principal_accesses = by_principal[principal]
        seen_at = max(access.observed_at for access in principal_accesses)
        job = usage.job_record(
            namespace=collector.job_namespace, name=principal, team=team, seen_at=seen_at
        )
        counts: dict[tuple[str, str, str], int] = {}
        for access in principal_accesses:
            edge = (access.direction, access.namespace, access.name)
            counts[edge] = counts.get(edge, 0) + access.count
        if team is None:  # held, attributed to no team, until a team claims the role
            unclaimed.append(principal)
            usage.usages_hold(job=job, pattern=patterns[principal], counts=counts, seen_at=seen_at)
            continue
        # What was held while it was unclaimed and the claim did not see (it committed
        # while this run was reading) is the claimant's now.
        usage.held_usage_attribute(team=team, pattern=patterns[principal])
        edges = sorted(counts, key=lambda edge: (edge[1], edge[2], edge[0]))
        usage_ids = usage.usages_observe(
            job=job, edges=edges, team=team, verified=True, seen_at=seen_at
        )
        by_count: dict[int, list[int]] = {}
        for edge, usage_id in usage_ids.items():
            by_count.setdefault(counts[edge], []).append(usage_id)
        for count, ids in sorted(by_count.items()):
            usage.usage_count_runs(usage_ids=sorted(ids), runs=count)
        recorded += len(usage_ids)
    return recorded, unclaimed
