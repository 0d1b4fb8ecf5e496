"""Recording plain successes together: one statement (an UPDATE, an INSERT of the
attempts, an upsert of the endpoints' hourly success counters, ``success_counts``) for
every 2xx that a round of concurrent sends brought back (``catalog.sending``), instead of
a transaction each. Most attempts are plain successes; writing them one by one would make
recording, on the pass's one database thread, what limits a worker's deliveries per second.
PostgreSQL only (``UPDATE ... FROM (VALUES ...)`` with casts): on the embedded SQLite a
pass records every outcome through ``delivery_record``.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import connection

import outbound

from . import delivery, metrics, success_counts
from .models import Delivery, DeliveryAttempt, EndpointSuccessHour

logger = logging.getLogger(__name__)


def plain_success(claim: delivery.Claim, result: outbound.AttemptResult) -> bool:
    """A 2xx from an endpoint that had no failure streak when claimed: what
    ``successes_record`` writes exactly as ``delivery.delivery_record`` would (no streak
    to clear, no throttle, no backoff). Anything else is recorded one by one."""
    return (
        result.status_code is not None
        and 200 <= result.status_code < 300
        and not claim.endpoint_failing
    )


def successes_record(
    sent: list[tuple[delivery.Claim, datetime, outbound.AttemptResult]], *, now: datetime
) -> set[int]:
    """Record plain successes (``plain_success``) in one transaction: what
    ``delivery_record`` writes for each (state succeeded, claim cleared, last attempt,
    the attempt's row, the endpoint's success counter for the hour of ``now``), as one
    UPDATE fenced by every claim token, one INSERT and one upsert of the counters
    (``success_counts``), all one statement.

    Args:
        sent: (claim, when its send started (aware UTC), what it saw), each a plain
            success.
        now: aware UTC instant, the deliveries' ``finished_at``.

    Returns:
        The ids of the deliveries recorded. A claim lost meanwhile (its lease ran out and
        another worker took over) is left as it is and counted ``claim_lost``, as
        ``delivery_record`` does.
    """
    rows = {claim.delivery_id: (claim, started_at, result) for claim, started_at, result in sent}
    # Arrays, not a VALUES list per batch: the statement's text is the same for every
    # batch, so the driver converts it once and the server can keep it prepared.
    columns = list(
        zip(
            *((c.delivery_id, c.token, at, r.status_code, r.error) for c, at, r in rows.values()),
            strict=True,
        )
    )
    attempts = list(map(list, zip(*(_attempt(*row) for row in rows.values()), strict=True)))
    # One statement (atomic by itself): the UPDATE fenced by the claim tokens, and the
    # attempt rows and success counters of exactly the deliveries it updated.
    with connection.cursor() as cursor:
        cursor.execute(
            _RECORD_SUCCESSES,
            [
                Delivery.State.SUCCEEDED.value,
                now,
                *map(list, columns),
                *attempts,
                success_counts.hour_of(now),
            ],
        )
        recorded = {row[0] for row in cursor.fetchall()}
    for delivery_id, (claim, _, result) in rows.items():
        if delivery_id in recorded:
            metrics.record_delivery(
                kind=claim.kind, outcome=Delivery.State.SUCCEEDED, duration_ms=result.duration_ms
            )
        else:
            logger.warning("delivery %s: claim lost before write-back", delivery_id)
            metrics.record_delivery(kind=claim.kind, outcome="claim_lost", duration_ms=None)
    return recorded


# Columns of an attempt row (``_attempt``), with their types.
_ATTEMPT_COLUMNS = (
    ("delivery_id", "bigint"),
    ("endpoint_id", "bigint"),
    ("number", "integer"),
    ("started_at", "timestamptz"),
    ("duration_ms", "integer"),
    ("status_code", "integer"),
    ("decision", "text"),
    ("error_kind", "text"),
    ("error", "text"),
    ("response_excerpt", "text"),
    ("next_attempt_in_seconds", "double precision"),
)
_RECORD_SUCCESSES = (
    f"WITH updated AS (UPDATE {Delivery._meta.db_table} AS d SET state = %s, "  # noqa: S608
    "claimed_until = NULL, claim_token = NULL, last_attempt_at = v.started_at, "
    "last_status_code = v.status, last_error_kind = '', last_error = v.error, finished_at = %s "
    "FROM unnest(%s::bigint[], %s::uuid[], %s::timestamptz[], %s::integer[], %s::text[]) "
    "AS v (id, token, started_at, status, error) "
    "WHERE d.id = v.id AND d.claim_token = v.token RETURNING d.id, d.endpoint_id), "
    f"inserted AS (INSERT INTO {DeliveryAttempt._meta.db_table} "
    f"({', '.join(name for name, _ in _ATTEMPT_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"%s::{kind}[]" for _, kind in _ATTEMPT_COLUMNS)
    + f") AS a ({', '.join(name for name, _ in _ATTEMPT_COLUMNS)}) "  # noqa: S608
    "WHERE a.delivery_id IN (SELECT id FROM updated) ORDER BY a.delivery_id), "
    # One row per endpoint, taken in endpoint order: two workers' batches lock the
    # counters they share in the same order, so they wait for each other, never deadlock.
    f"counted AS (INSERT INTO {EndpointSuccessHour._meta.db_table} (endpoint_id, hour, "
    "succeeded) SELECT endpoint_id, %s::timestamptz, count(*) FROM updated "
    "GROUP BY endpoint_id ORDER BY endpoint_id ON CONFLICT (endpoint_id, hour) DO UPDATE "
    f"SET succeeded = {EndpointSuccessHour._meta.db_table}.succeeded + excluded.succeeded) "
    "SELECT id FROM updated"
)


def _attempt(claim: delivery.Claim, started_at: datetime, result: outbound.AttemptResult) -> tuple:
    """A plain success's attempt row, in ``_ATTEMPT_COLUMNS`` order."""
    return (
        claim.delivery_id,
        claim.endpoint_id,
        claim.attempt,
        started_at,
        result.duration_ms,
        result.status_code,
        outbound.Decision.SUCCEEDED.value,
        result.error_kind,
        result.error[:2000],
        result.response_excerpt,
        None,
    )
