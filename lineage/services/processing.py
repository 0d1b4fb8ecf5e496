"""Processing received lineage events into runs, jobs and observed usage: the outbox
pattern of catalog deliveries (DESIGN.md principles 1 and 2). Pending events are claimed
with a lease under ``FOR UPDATE SKIP LOCKED``, a claimed batch is applied in one
transaction fenced by its claim token (each event under its own savepoint, so one
failing event does not undo the others), and the beat sweep finds events whose doorbell
was lost or whose worker died. Applying an event is idempotent and order-independent."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from catalog import schema_changes
from catalog.models import DatasetUsage, SchemaObservation
from catalog.services import aliases, static_lineage, subscriptions, usage

from .. import metrics, openlineage, runstate
from ..models import LineageEvent
from . import completion, runs

logger = logging.getLogger(__name__)

PROCESS_EVENTS = "lineage.tasks.process_events"


def _config() -> dict:
    return settings.TIDEMARK_LINEAGE


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
    is created or locked and the event judged against whose the run is
    (``lineage.runstate.judge``): a conflicting event (another job's, an unverified one
    for a run verified events made, another team's unverified report) is recorded as a
    conflict (``catalog.RunConflict``) and nothing else of it is; a verified event
    reaching a run unverified events made takes it over (``runs.run_take_over``).
    Otherwise the run's state and times fold in the event (``lineage.runstate``), it
    keeps the first parent given, and every input and every table its ``sql`` job
    facet's query reads (read), and every output (write), is recorded as usage of the
    run's job, counted once per run; a COMPLETE or FAIL event then publishes the
    partitions it wrote of its outputs that take OpenLineage as their completion signal
    (``completion.completion_publish``; what it could not publish is added to the
    event's ``problems``). Job events record the job and state its static
    lineage (``StaticLineage``: its inputs and outputs, replacing what its earlier
    JobEvents stated); a verified one also declares its inputs that are catalog datasets
    as subscriptions of the job's team naming the job (no endpoint), never changing one
    that exists; unverified ones declare nothing. A DatasetEvent records its dataset as
    static lineage with no job. Every event keeps the received spelling of each dataset
    identity that normalised to another. A dataset's
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
    metrics.record_processed(states.values())
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
        if not _apply_run_event(event, parsed, now=now):
            return  # a conflict: kept and shown, and nothing else of it recorded
        unpublished = completion.completion_publish(event=event, parsed=parsed, now=now)
        if unpublished:  # said on the event, as the problems found when it was received
            LineageEvent.objects.filter(pk=event.pk).update(
                problems=[*event.problems, *(problem.as_dict() for problem in unpublished)]
            )
    elif parsed.kind == openlineage.JOB:
        job = usage.job_record(
            namespace=parsed.job_namespace,
            name=parsed.job_name,
            team=owner,
            seen_at=parsed.event_time,
        )
        static_lineage.static_lineage_record(
            job=job,
            edges=sorted(
                {(DatasetUsage.Direction.READ, r.namespace, r.name) for r in parsed.inputs}
                | {(DatasetUsage.Direction.WRITE, r.namespace, r.name) for r in parsed.outputs}
            ),
            team=event.team,
            verified=event.verified,
            stated_at=parsed.event_time,
        )
        if owner is not None:  # a verified JobEvent's inputs declare what the job reads
            subscriptions.subscription_declare_for_job(
                team=owner,
                job_namespace=parsed.job_namespace,
                job_name=parsed.job_name,
                identities=sorted({(ref.namespace, ref.name) for ref in parsed.inputs}),
            )
    elif parsed.dataset is not None:  # a DatasetEvent: the dataset is a node of the graph
        static_lineage.static_dataset_record(
            namespace=parsed.dataset.namespace,
            name=parsed.dataset.name,
            team=event.team,
            stated_at=parsed.event_time,
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
        aliases.dataset_symlinks_record(
            team=event.team,
            links=links,
            seen_at=parsed.event_time,
            merge_dependents=runs.run_edges_merge,
        )
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
) -> bool:
    """Apply a RunEvent to its run, unless it conflicts with whose the run is
    (``runstate.judge``): then it is recorded as a conflict and False returned.

    Locks in one order everywhere (job, run, usage rows sorted by identity), so
    concurrent workers never deadlock."""
    job = usage.job_record(
        namespace=parsed.job_namespace,
        name=parsed.job_name,
        team=event.team if event.verified else None,
        seen_at=parsed.event_time,
    )
    run = runs.run_lock_or_create(parsed, job=job, event=event)
    reporter = runstate.Reporter(job_id=job.pk, team_id=event.team_id, verified=event.verified)
    verdict = runstate.judge(run.reporter(), reporter)
    changed = verdict == runstate.TAKE_OVER
    if changed:
        runs.run_take_over(run, job=job, event=event, now=now)
    elif verdict != runstate.ATTACH:
        runs.run_conflict_record(run, event=event, job=job, reason=verdict, now=now)
        return False

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
        runs.run_save(run, now=now)

    edges = sorted(
        {
            (DatasetUsage.Direction.READ, ref.namespace, ref.name)
            for ref in (*parsed.inputs, *parsed.sql_reads)
        }
        | {(DatasetUsage.Direction.WRITE, ref.namespace, ref.name) for ref in parsed.outputs},
        key=lambda edge: (edge[1], edge[2], edge[0]),
    )
    if not edges:
        return True
    usage_ids = usage.usages_observe(
        job=job,
        edges=edges,
        team=event.team,
        verified=event.verified,  # judged: the run's job, and verified as the run is
        seen_at=parsed.event_time,
    )
    # The run row is locked: no one else adds its edges meanwhile. An alias and its
    # dataset share a usage row: one edge.
    new_ids = runs.run_edges_add(run, sorted(set(usage_ids.values())))
    usage.usage_count_runs(usage_ids=new_ids)
    return True


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
