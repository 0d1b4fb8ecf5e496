"""Recording one ping (``record``): a plain success or a refusal in one statement, else
under the monitor's row lock."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import transaction

from .. import db
from ..models import Monitor, Ping
from .applying import (
    PING_FIELDS,
    apply_failure,
    apply_start,
    apply_success,
    duration_ms,
    track_run,
)
from .inputs import NOT_FOUND, PingInput, PingRejected, decode_body
from .partitions import checked_partition
from .rates import count_against_rate, first_look, rate_limited


def record(*, ping_key: uuid.UUID, ping: PingInput, now: datetime) -> str:
    """Record a ping and apply it to its monitor, in one transaction.

    A success moves a period monitor's deadline, marks the monitor up, and resolves the
    incidents it satisfies (a partition ping resolves only the deadlines expecting that
    partition); a failure (``/fail`` or a non-zero exit status) opens a ``failed`` incident
    and pages at once; a ``log`` ping is kept and changes nothing else.

    A plain success is one statement (``ping_statement``), and so is a refusal: an unknown
    key, a monitor over its rate and a GET to a POST-only monitor are answered without
    locking the monitor's row.

    Returns:
        ``"ok"``, or ``"ignored"`` for a GET/HEAD on a POST-only monitor.

    Raises:
        PingRejected: 404 unknown key, 429 over the per-monitor rate (with
            ``retry_after``), 400 bad partition, 422 a partition whose period has not
            started (``checked_partition``).
    """
    limit = settings.WATCHDOG_PING_RATE_PER_MINUTE
    first = first_look(ping_key, ping, limit=limit, now=now)
    if first.recorded:
        return "ok"
    if not first.found:
        raise PingRejected(404, NOT_FOUND)
    if first.ignored:
        return "ignored"
    if first.retry_after is not None:
        raise rate_limited(limit, first.retry_after)
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().filter(ping_key=ping_key).first()
        if monitor is None:
            raise PingRejected(404, NOT_FOUND)
        if monitor.post_only and ping.method in ("GET", "HEAD"):
            return "ignored"
        count_against_rate(monitor, now=now)
        if ping.kind == Ping.Kind.LOG:
            _record_log(monitor, ping, now=now)
            return "ok"
        partition = checked_partition(monitor, ping.partition, now=now)
        kind = ping.kind
        if ping.exit_status is not None:
            kind = Ping.Kind.SUCCESS if ping.exit_status == 0 else Ping.Kind.FAIL
        Ping.objects.create(
            monitor=monitor,
            kind=kind,
            exit_status=ping.exit_status,
            partition=partition,
            run_id=ping.run_id[:64],
            received_at=now,
            method=ping.method[:8],
            remote_addr=ping.remote_addr[:64],
            user_agent=ping.user_agent[:200],
            body=decode_body(ping.body),
            duration_ms=duration_ms(monitor, ping.run_id, kind, now=now)
            if ping.run_id or monitor.last_ping_kind == Ping.Kind.START
            else None,
        )
        monitor.last_ping_at = now
        monitor.last_ping_kind = kind
        if kind == Ping.Kind.START or monitor.last_start_at is not None:
            track_run(monitor, ping.run_id[:64], kind, now=now)
        if kind == Ping.Kind.START:
            apply_start(monitor, now=now)
        elif kind == Ping.Kind.SUCCESS:
            apply_success(monitor, partition, now=now)
        else:
            apply_failure(monitor, ping.exit_status, partition, now=now)
        monitor.save(update_fields=PING_FIELDS)
    return "ok"


def _record_log(monitor: Monitor, ping: PingInput, *, now: datetime) -> None:
    """A ``/log`` ping: kept in the history (its body, run id and partition as sent), and
    counted against the rate; the monitor's state, deadlines and runs are untouched."""
    Ping.objects.create(
        monitor=monitor,
        kind=Ping.Kind.LOG,
        partition=ping.partition[:32],
        run_id=ping.run_id[:64],
        received_at=now,
        method=ping.method[:8],
        remote_addr=ping.remote_addr[:64],
        user_agent=ping.user_agent[:200],
        body=decode_body(ping.body),
    )
    monitor.save(update_fields=["rate_window_start", "rate_count"])
