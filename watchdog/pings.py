"""Receiving pings: the dead-man's-switch convention (``/ping/<uuid>``, ``/start``,
``/fail``, ``/<exit status>``, ``?rid=``), plus ``?partition=`` so a deadline can expect the
data, not only the task."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections, transaction

from problems import FieldError
from schedules import PartitionKeyError, parse_partition_key

from . import db, incidents, schedule
from .models import Incident, Monitor, Ping, Run

MAX_PING_BODY = 10_000  # bytes kept of a ping's body
RATE_WINDOW = timedelta(minutes=1)


class PingRejected(Exception):
    """The ping cannot be taken; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class PingInput:
    """One ping as the view parsed it.

    Attributes:
        kind: ``success``, ``start`` or ``fail``.
        exit_status: the ``/<exit status>`` form's number (0 success, 1-255 failure).
        partition: ``?partition=`` or "".
        run_id: ``?rid=`` or "" (pairs start with finish to measure duration).
        body: the raw request body (truncated and decoded leniently here).
    """

    kind: str
    method: str
    exit_status: int | None = None
    partition: str = ""
    run_id: str = ""
    body: bytes = b""
    remote_addr: str = ""
    user_agent: str = ""


def decode_body(raw: bytes) -> str:
    """The first ``MAX_PING_BODY`` bytes as text: invalid UTF-8 (or a character cut at the
    limit) becomes U+FFFD, and NUL is dropped (text columns cannot hold it)."""
    return raw[:MAX_PING_BODY].decode("utf-8", "replace").replace("\x00", "")


def record(*, ping_key: uuid.UUID, ping: PingInput, now: datetime) -> str:
    """Record a ping and apply it to its monitor, in one transaction.

    A success moves a period monitor's deadline, marks the monitor up, and resolves the
    incidents it satisfies (a partition ping resolves only the deadlines expecting that
    partition); a failure (``/fail`` or a non-zero exit status) opens a ``failed`` incident
    and pages at once.

    Returns:
        ``"ok"``, or ``"ignored"`` for a GET/HEAD on a POST-only monitor.

    Raises:
        PingRejected: 404 unknown key, 429 over the per-monitor rate, 400 bad partition.
    """
    if _record_plain_success(ping_key, ping, now=now):
        return "ok"
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().filter(ping_key=ping_key).first()
        if monitor is None:
            raise PingRejected(404, "no such monitor")
        if monitor.post_only and ping.method in ("GET", "HEAD"):
            return "ignored"
        _count_against_rate(monitor, now=now)
        partition = _checked_partition(monitor, ping.partition)
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
            duration_ms=_duration_ms(monitor, ping.run_id, kind, now=now)
            if ping.run_id or monitor.last_ping_kind == Ping.Kind.START
            else None,
        )
        monitor.last_ping_at = now
        monitor.last_ping_kind = kind
        if kind == Ping.Kind.START or monitor.last_start_at is not None:
            _track_run(monitor, ping.run_id[:64], kind, now=now)
        if kind == Ping.Kind.START:
            _apply_start(monitor, now=now)
        elif kind == Ping.Kind.SUCCESS:
            _apply_success(monitor, partition, now=now)
        else:
            _apply_failure(monitor, ping.exit_status, partition, now=now)
        monitor.save(update_fields=_PING_FIELDS)
    return "ok"


# How a partition fed with a managing system's definition shows in the ping history.
FEED_METHOD = "FEED"
FEED_USER_AGENT = "definition ready_partitions"


def ready_partition_problems(monitor: Monitor, partitions: list[str]) -> list[FieldError]:
    """What is wrong with ``partitions`` fed to ``monitor`` with its definition: they need
    a deadline monitor with a partition rule, and each must be a key of that rule.

    Returns:
        One FieldError per broken rule, naming ``ready_partitions`` or
        ``ready_partitions.N``; empty when none.
    """
    if not partitions:
        return []
    if monitor.kind != Monitor.Kind.DEADLINE or not monitor.partitioning:
        return [
            FieldError(
                "ready_partitions",
                "only a deadline monitor with partitioning expects partitions",
                "partitioned_deadline_only",
            )
        ]
    problems = []
    for index, key in enumerate(partitions):
        try:
            parse_partition_key(monitor.partitioning, key, monitor.partition_timezone)
        except PartitionKeyError as exc:
            problems.append(FieldError(f"ready_partitions.{index}", str(exc), "partition_key"))
    return problems


def record_ready(monitor: Monitor, partitions: list[str], *, now: datetime) -> list[str]:
    """Record a success ping for each of ``partitions`` that has none yet, as if each had
    been pinged with ``?partition=`` now (the partitions a managing system reports ready
    when it defines the monitor), in the caller's transaction.

    Idempotent: a partition with a success ping already is left alone, so a definition
    sent again records nothing twice. Not counted against the ping rate (the list is
    bounded by the API).

    Args:
        monitor: a partitioned deadline monitor (``ready_partition_problems`` passed).
        partitions: partition keys of its partitioning, any order.
        now: aware UTC; the pings' ``received_at``.

    Returns:
        The keys newly recorded, oldest first.
    """
    if not partitions:
        return []
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().get(pk=monitor.pk)
        pinged = set(
            Ping.objects.filter(
                monitor=monitor, kind=Ping.Kind.SUCCESS, partition__in=partitions
            ).values_list("partition", flat=True)
        )
        new = sorted(set(partitions) - pinged)
        if not new:
            return []
        Ping.objects.bulk_create(
            [
                Ping(
                    monitor=monitor,
                    kind=Ping.Kind.SUCCESS,
                    partition=key,
                    received_at=now,
                    method=FEED_METHOD,
                    user_agent=FEED_USER_AGENT,
                )
                for key in new
            ],
            ignore_conflicts=True,  # the partial unique index on (monitor, partition)
        )
        monitor.last_ping_at, monitor.last_ping_kind = now, Ping.Kind.SUCCESS
        for key in new:
            _apply_success(monitor, key, now=now)
        monitor.save(update_fields=_PING_FIELDS)
    return new


# The common ping in one statement: a success, without a run id or partition rule, to a
# monitor that is up (or new), under its rate limit and with no run to track. The UPDATE
# does exactly what ``record`` would (deadline of a period monitor moved on, rate counted)
# and matches nothing otherwise, leaving the ping to the general path.
_PLAIN_SUCCESS_SQL = """
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
        AND state IN ('new', 'up')
        AND last_start_at IS NULL
        AND last_ping_kind <> 'start'
        AND (kind = 'period' OR deadline_at IS NOT NULL)
        AND (%(partition)s = '' OR partitioning = '')
        AND (NOT post_only OR %(posted)s)
        AND (rate_window_start IS NULL OR rate_window_start <= %(window)s
             OR rate_count < %(limit)s)
    RETURNING id
)
INSERT INTO watchdog_ping (monitor_id, kind, exit_status, partition, run_id, received_at,
                           method, remote_addr, user_agent, body)
SELECT id, 'success', %(exit_status)s, %(partition)s, '', %(now)s,
       %(method)s, %(remote_addr)s, %(user_agent)s, %(body)s
FROM m
RETURNING id
"""


def _record_plain_success(ping_key: uuid.UUID, ping: PingInput, *, now: datetime) -> bool:
    """Record the common ping in one statement (PostgreSQL); False when it is not one, or
    when the monitor's state asks for more than that (then ``record`` does it all)."""
    alias = db.alias()
    connection = connections[alias]
    if (
        connection.vendor != "postgresql"
        or ping.run_id
        or ping.kind != Ping.Kind.SUCCESS
        or ping.exit_status not in (None, 0)
    ):
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            _PLAIN_SUCCESS_SQL,
            {
                "now": now,
                "window": now - RATE_WINDOW,
                "key": ping_key,
                "partition": ping.partition[:32],
                "posted": ping.method not in ("GET", "HEAD"),
                "limit": settings.WATCHDOG_PING_RATE_PER_MINUTE,
                "exit_status": ping.exit_status,
                "method": ping.method[:8],
                "remote_addr": ping.remote_addr[:64],
                "user_agent": ping.user_agent[:200],
                "body": decode_body(ping.body),
            },
        )
        return cursor.fetchone() is not None


# What a ping may change on its monitor (a narrow UPDATE: pings are the hot path).
_PING_FIELDS = [
    "last_ping_at",
    "last_ping_kind",
    "last_start_at",
    "start_expected_at",
    "start_check_at",
    "last_success_at",
    "last_partition",
    "state",
    "deadline_at",
    "check_at",
    "rate_window_start",
    "rate_count",
    "updated_at",
]


def _track_run(monitor: Monitor, run_id: str, kind: str, *, now: datetime) -> None:
    """Open a run on ``start``; close the run this finish belongs to (the same run id, or
    without one the newest open run) and resolve its run-time incident, if any."""
    if kind == Ping.Kind.START:
        overdue = (
            now + timedelta(seconds=monitor.max_runtime_seconds)
            if monitor.max_runtime_seconds
            else None
        )
        Run.objects.create(monitor=monitor, run_id=run_id, started_at=now, overdue_at=overdue)
        return
    run = (
        Run.objects.filter(monitor=monitor, run_id=run_id, finished_at__isnull=True)
        .order_by("-started_at")
        .first()
    )
    if run is None:
        return
    run.finished_at, run.outcome, run.overdue_at = now, kind, None
    run.save(update_fields=["finished_at", "outcome", "overdue_at"])
    incidents.resolve(
        list(
            monitor.incidents.filter(
                reason=Incident.Reason.RUNTIME,
                deadline_at=run.started_at,
                resolved_at__isnull=True,
            )
        ),
        now=now,
    )


def _apply_start(monitor: Monitor, *, now: datetime) -> None:
    """A ``/start``: resolve the start-late incidents it ends (the job did start, late), or
    else count it for the scheduled start it is in the window of, and plan the next one."""
    monitor.last_start_at = now
    if monitor.state == Monitor.State.PAUSED or not schedule.watches_start(monitor):
        return
    late = list(
        monitor.incidents.filter(reason=Incident.Reason.START_LATE, resolved_at__isnull=True)
    )
    if late:
        incidents.resolve(late, now=now)
        if not monitor.incidents.filter(resolved_at__isnull=True).exists():
            monitor.state = Monitor.State.UP
    if monitor.kind == Monitor.Kind.PERIOD or monitor.start_expected_at is None:
        monitor.start_expected_at = schedule.first_expected_start(monitor, now=now)
    elif not late and now >= schedule.start_window_opens(monitor, monitor.start_expected_at):
        monitor.start_expected_at = schedule.next_expected_start(monitor, monitor.start_expected_at)
    monitor.start_check_at = schedule.start_check_at(monitor, monitor.start_expected_at)


def _count_against_rate(monitor: Monitor, *, now: datetime) -> None:
    limit = settings.WATCHDOG_PING_RATE_PER_MINUTE
    if monitor.rate_window_start is None or now - monitor.rate_window_start >= RATE_WINDOW:
        monitor.rate_window_start, monitor.rate_count = now, 0
    monitor.rate_count += 1
    if monitor.rate_count > limit:
        Monitor.objects.filter(pk=monitor.pk).update(rate_count=monitor.rate_count)
        raise PingRejected(429, f"over {limit} pings a minute for this monitor")


def _checked_partition(monitor: Monitor, partition: str) -> str:
    if not partition:
        return ""
    if not monitor.partitioning:
        return partition[:32]
    try:
        parse_partition_key(monitor.partitioning, partition, monitor.partition_timezone)
    except PartitionKeyError as exc:
        raise PingRejected(400, f"partition: {exc}") from exc
    return partition


def _duration_ms(monitor: Monitor, run_id: str, kind: str, *, now: datetime) -> int | None:
    if kind == Ping.Kind.START:
        return None
    starts = Ping.objects.filter(monitor=monitor, kind=Ping.Kind.START)
    start = (
        starts.filter(run_id=run_id[:64]).order_by("-received_at").first()
        if run_id
        else starts.filter(received_at__gte=monitor.last_ping_at or now)
        .order_by("-received_at")
        .first()
    )
    if start is None:
        return None
    return int((now - start.received_at).total_seconds() * 1000)


def _apply_success(monitor: Monitor, partition: str, *, now: datetime) -> None:
    monitor.last_success_at = now
    if partition and partition > monitor.last_partition:
        monitor.last_partition = partition
    if monitor.state == Monitor.State.NEW:
        monitor.state = Monitor.State.UP
    # A paused monitor keeps no deadline (resume plans one from its own "now").
    if monitor.state != Monitor.State.PAUSED and (
        monitor.kind == Monitor.Kind.PERIOD or monitor.deadline_at is None
    ):
        monitor.deadline_at = schedule.first_deadline(monitor, now=now)
        monitor.check_at = schedule.check_at(monitor, monitor.deadline_at)
    if monitor.state != Monitor.State.DOWN:
        return  # every open incident puts its monitor down: nothing to resolve
    open_incidents = list(monitor.incidents.filter(resolved_at__isnull=True))
    satisfied = [i for i in open_incidents if _satisfies(monitor, i, partition)]
    incidents.resolve(satisfied, now=now)
    if monitor.state == Monitor.State.DOWN and len(satisfied) == len(open_incidents):
        monitor.state = Monitor.State.UP


def _satisfies(monitor: Monitor, incident: Incident, partition: str) -> bool:
    """Whether a success ping (for ``partition``) resolves ``incident``: a failure or a
    missed period by any success; a missed partition deadline only once every partition it
    expected has a success ping (a ping for yesterday never resolves today's)."""
    if incident.reason == Incident.Reason.RUNTIME:
        return False  # only the finish of that run resolves it
    if incident.reason != Incident.Reason.MISSED or not monitor.partitioning:
        return True
    expected = schedule.expected_partitions(monitor, incident.deadline_at) or [incident.partition]
    if partition not in expected:
        return False
    pinged = set(
        Ping.objects.filter(
            monitor=monitor, kind=Ping.Kind.SUCCESS, partition__in=expected
        ).values_list("partition", flat=True)
    )
    return pinged >= set(expected)


def _apply_failure(
    monitor: Monitor, exit_status: int | None, partition: str, *, now: datetime
) -> None:
    """A failure opens a ``failed`` incident naming the partition the ping named (or,
    without one, the partition the run was for: ``incidents.open_incident``)."""
    if monitor.state == Monitor.State.PAUSED:
        return
    status = f" (exit status {exit_status})" if exit_status is not None else ""
    named = f" for partition {partition}" if partition and monitor.partitioning else ""
    if incidents.open_incident(
        monitor,
        reason=Incident.Reason.FAILED,
        deadline_at=now,
        partition=partition if monitor.partitioning else "",
        summary=f"{monitor.name} reported failure{named}{status}",
        now=now,
    ):
        monitor.state = Monitor.State.DOWN
