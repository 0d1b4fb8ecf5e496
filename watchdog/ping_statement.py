"""The ping hot path in one statement (PostgreSQL): a plain success is recorded by it, and
for any other ping it reads what decides the answer without a lock (is there a monitor,
is it over its rate, does it ignore this method), so a 404, a 429 or an ignored GET costs
what an accepted ping does and never waits behind pings that hold the monitor's row.

Why a rejection read without a lock is right: within a rate window the count only grows,
and a window is only replaced once it is over, so a committed count at the limit in a
window not yet over stays at the limit until that window ends, whatever concurrent pings
do. Reading it from the statement's snapshot can only be older than the row, never wrong
in the other direction: a ping it lets through is counted again, under the lock, by
``pings.record``'s general path.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections

from . import db

RATE_WINDOW = timedelta(minutes=1)


@dataclass(frozen=True)
class Answer:
    """What the statement found.

    Attributes:
        recorded: the ping was a plain success and is recorded, with its monitor updated.
        found: a monitor has this ping key.
        ignored: the monitor takes POST only and this ping is a GET or HEAD.
        retry_after: seconds until the monitor's rate window ends, when it is over its
            rate (the ping is refused); else None.
    """

    recorded: bool
    found: bool
    ignored: bool = False
    retry_after: int | None = None


def retry_after(window_start: datetime | None, count: int, *, limit: int, now: datetime):
    """Seconds (an int, at least 1) until a monitor whose rate window began at
    ``window_start`` with ``count`` pings counted takes pings again; None when it takes
    one now (no window, a window over, or under ``limit``)."""
    if window_start is None or now - window_start >= RATE_WINDOW or count < limit:
        return None
    return max(1, math.ceil((window_start + RATE_WINDOW - now).total_seconds()))


# The UPDATE does exactly what ``pings.record`` would for a plain success (the deadline of
# a period monitor moved on, the rate counted) and matches nothing otherwise. The final
# SELECT reads the monitor as it was when the statement began (its snapshot), whether or
# not the UPDATE matched, so every ping learns in one round trip what decides its answer.
_SQL = """
WITH m AS (
    UPDATE watchdog_monitor SET
        last_ping_at = %(now)s,
        last_ping_kind = 'success',
        last_success_at = %(now)s,
        last_partition = CASE WHEN %(partition)s COLLATE "C" > last_partition COLLATE "C"
            THEN %(partition)s ELSE last_partition END,
        state = 'up',
        deadline_at = CASE WHEN kind = 'period'
            THEN %(now)s + period_seconds * interval '1 second' ELSE deadline_at END,
        check_at = CASE WHEN kind = 'period'
            THEN %(now)s + (period_seconds + grace_seconds) * interval '1 second'
            ELSE check_at END,
        rate_count = CASE WHEN rate_window_start IS NULL OR rate_window_start <= %(window)s
            THEN 1 ELSE rate_count + 1 END,
        rate_window_start = CASE WHEN rate_window_start IS NULL OR rate_window_start <= %(window)s
            THEN %(now)s ELSE rate_window_start END,
        updated_at = %(now)s
    WHERE ping_key = %(key)s
        AND %(plain)s
        AND state IN ('new', 'up')
        AND last_start_at IS NULL
        AND last_ping_kind <> 'start'
        AND (kind = 'period' OR deadline_at IS NOT NULL)
        AND (%(partition)s = '' OR partitioning = '')
        AND (NOT post_only OR %(posted)s)
        AND (rate_window_start IS NULL OR rate_window_start <= %(window)s
             OR rate_count < %(limit)s)
    RETURNING id
), p AS (
    INSERT INTO watchdog_ping (monitor_id, kind, exit_status, partition, run_id, received_at,
                               method, remote_addr, user_agent, body)
    SELECT id, 'success', %(exit_status)s, %(partition)s, '', %(now)s,
           %(method)s, %(remote_addr)s, %(user_agent)s, %(body)s
    FROM m
    RETURNING id
)
SELECT (SELECT count(*) FROM p), w.rate_window_start, w.rate_count, w.post_only
FROM watchdog_monitor w
WHERE w.ping_key = %(key)s
"""


def run(
    ping_key: uuid.UUID,
    *,
    plain: bool,
    method: str,
    partition: str,
    exit_status: int | None,
    remote_addr: str,
    user_agent: str,
    body: str,
    limit: int,
    now: datetime,
) -> Answer | None:
    """Record a plain success ping (``plain``: a success without a run id, and an exit
    status of none or 0) in one statement, or learn why it was not.

    Args:
        method, partition, remote_addr, user_agent: already truncated to their columns.
        body: already decoded (``pings.decode_body``).
        limit: pings a monitor takes per ``RATE_WINDOW``.
        now: aware UTC, the ping's ``received_at``.

    Returns:
        An Answer; None when the watchdog's database is not PostgreSQL (the caller then
        reads the same without a lock through the ORM).
    """
    connection = connections[db.alias()]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            _SQL,
            {
                "now": now,
                "window": now - RATE_WINDOW,
                "key": ping_key,
                "plain": plain,
                "partition": partition,
                "posted": method not in ("GET", "HEAD"),
                "limit": limit,
                "exit_status": exit_status,
                "method": method,
                "remote_addr": remote_addr,
                "user_agent": user_agent,
                "body": body,
            },
        )
        row = cursor.fetchone()
    if row is None:
        return Answer(recorded=False, found=False)
    recorded, window_start, count, post_only = row
    if recorded:
        return Answer(recorded=True, found=True)
    return Answer(
        recorded=False,
        found=True,
        ignored=post_only and method in ("GET", "HEAD"),
        retry_after=retry_after(window_start, count, limit=limit, now=now),
    )
