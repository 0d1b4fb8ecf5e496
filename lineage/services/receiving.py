"""Receiving OpenLineage events: each raw event is stored in one short transaction (one
statement on PostgreSQL), and the lineage doorbell rings after commit so a worker
processes it."""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists
from django.utils import timezone

from catalog import doorbell, selectors
from catalog.actors import Actor
from catalog.models import Claim, Team

from .. import openlineage
from ..models import LineageEvent
from . import processing


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
    doorbell.ring_after_commit(processing.PROCESS_EVENTS)
