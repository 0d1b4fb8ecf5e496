"""The per-monitor ping rate: a first look without a lock (one statement on PostgreSQL),
then counting the ping in its monitor's window under the lock."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings

from .. import ping_statement
from ..models import Monitor, Ping
from .inputs import PingInput, PingRejected, decode_body

RATE_WINDOW = ping_statement.RATE_WINDOW


def first_look(
    ping_key: uuid.UUID, ping: PingInput, *, limit: int, now: datetime
) -> ping_statement.Answer:
    """The plain success recorded, or what refuses the ping, read without a lock: in one
    statement on PostgreSQL, else by a plain read."""
    answer = ping_statement.run(
        ping_key,
        plain=not ping.run_id and ping.kind == Ping.Kind.SUCCESS and ping.exit_status in (None, 0),
        method=ping.method[:8],
        partition=ping.partition[:32],
        exit_status=ping.exit_status,
        remote_addr=ping.remote_addr[:64],
        user_agent=ping.user_agent[:200],
        body=decode_body(ping.body),
        limit=limit,
        now=now,
    )
    if answer is not None:
        return answer
    row = (
        Monitor.objects.filter(ping_key=ping_key)
        .values_list("rate_window_start", "rate_count", "post_only")
        .first()
    )
    if row is None:
        return ping_statement.Answer(recorded=False, found=False)
    window_start, count, post_only = row
    return ping_statement.Answer(
        recorded=False,
        found=True,
        ignored=post_only and ping.method in ("GET", "HEAD"),
        retry_after=ping_statement.retry_after(window_start, count, limit=limit, now=now),
    )


def rate_limited(limit: int, retry_after: int) -> PingRejected:
    return PingRejected(
        429,
        f"rate limited: over {limit} pings a minute for this monitor",
        retry_after=retry_after,
    )


def count_against_rate(monitor: Monitor, *, now: datetime) -> None:
    """Count the ping in its monitor's rate window (saved with the monitor), or refuse it
    (nothing is saved: the transaction rolls back)."""
    limit = settings.WATCHDOG_PING_RATE_PER_MINUTE
    if monitor.rate_window_start is None or now - monitor.rate_window_start >= RATE_WINDOW:
        monitor.rate_window_start, monitor.rate_count = now, 0
    monitor.rate_count += 1
    if monitor.rate_count > limit:
        wait = ping_statement.retry_after(
            monitor.rate_window_start, monitor.rate_count, limit=limit, now=now
        )
        raise rate_limited(limit, wait or 1)
