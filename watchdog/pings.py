"""Receiving pings: the dead-man's-switch convention (``/ping/<uuid>``, ``/start``,
``/fail``, ``/log``, ``/<exit status>``, ``?rid=``), plus ``?partition=`` so a deadline can
expect the data, not only the task."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from problems import FieldError
from schedules import PartitionKeyError, has_started, newest_started, parse_partition_key

from . import db, incidents, ping_statement, schedule
from .models import Incident, Monitor, Ping, Run

RATE_WINDOW = ping_statement.RATE_WINDOW
NOT_FOUND = "not found"


class PingRejected(Exception):
    """The ping cannot be taken; ``status`` is the HTTP status to answer, ``retry_after``
    (seconds) when it is 429, and ``extra`` what the API's problem document adds for
    programs (e.g. the rule broken)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        retry_after: int | None = None,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.extra = extra or {}


FUTURE_RULE = "partition_started"


def body_limit() -> int:
    """Bytes of a ping's body that are kept (``WATCHDOG_PING_BODY_LIMIT``), as the
    ``Ping-Body-Limit`` response header tells clients."""
    return settings.WATCHDOG_PING_BODY_LIMIT


@dataclass(frozen=True)
class PingInput:
    """One ping as the view parsed it.

    Attributes:
        kind: ``success``, ``start``, ``fail`` or ``log``.
        exit_status: the ``/<exit status>`` form's number (0 success, 1-255 failure).
        partition: ``?partition=`` or "".
        run_id: ``?rid=`` (a UUID, lowercase) or "" (pairs start with finish to measure
            duration).
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
    """The first ``body_limit()`` bytes as text: invalid UTF-8 (or a character cut at the
    limit) becomes U+FFFD, and NUL is dropped (text columns cannot hold it)."""
    return raw[: body_limit()].decode("utf-8", "replace").replace("\x00", "")


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
            started (``_checked_partition``).
    """
    limit = settings.WATCHDOG_PING_RATE_PER_MINUTE
    first = _first_look(ping_key, ping, limit=limit, now=now)
    if first.recorded:
        return "ok"
    if not first.found:
        raise PingRejected(404, NOT_FOUND)
    if first.ignored:
        return "ignored"
    if first.retry_after is not None:
        raise _rate_limited(limit, first.retry_after)
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().filter(ping_key=ping_key).first()
        if monitor is None:
            raise PingRejected(404, NOT_FOUND)
        if monitor.post_only and ping.method in ("GET", "HEAD"):
            return "ignored"
        _count_against_rate(monitor, now=now)
        if ping.kind == Ping.Kind.LOG:
            _record_log(monitor, ping, now=now)
            return "ok"
        partition = _checked_partition(monitor, ping.partition, now=now)
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


def ready_partition_problems(
    monitor: Monitor, partitions: list[str], *, now: datetime
) -> list[FieldError]:
    """What is wrong with ``partitions`` fed to ``monitor`` with its definition: they need
    a deadline monitor with a partition rule, and each must be a key of that rule whose
    period has started by ``now`` plus the clock-skew allowance (as a ping's, rule
    ``partition_started``).

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
            _checked_partition(monitor, key, now=now)
        except PartitionKeyError as exc:
            problems.append(FieldError(f"ready_partitions.{index}", str(exc), "partition_key"))
        except PingRejected as exc:
            problems.append(FieldError(f"ready_partitions.{index}", str(exc), FUTURE_RULE))
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


def _first_look(
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


def _rate_limited(limit: int, retry_after: int) -> PingRejected:
    return PingRejected(
        429,
        f"rate limited: over {limit} pings a minute for this monitor",
        retry_after=retry_after,
    )


def _count_against_rate(monitor: Monitor, *, now: datetime) -> None:
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
        raise _rate_limited(limit, wait or 1)


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


def _checked_partition(monitor: Monitor, partition: str, *, now: datetime) -> str:
    """The ping's partition key as recorded: free text (cut) for an unpartitioned monitor;
    else a key of the monitor's partitioning whose period has started by ``now`` plus
    ``WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS`` (``schedules.has_started``, the catalog's
    rule): a key from the future is a typo, and taken it would be the monitor's newest
    partition, satisfying deadlines whose data never came.

    Raises:
        PingRejected: 400 a key of another format; 422 a period that has not started.
    """
    if not partition:
        return ""
    if not monitor.partitioning:
        return partition[:32]
    try:
        interval = parse_partition_key(monitor.partitioning, partition, monitor.partition_timezone)
    except PartitionKeyError as exc:
        raise PingRejected(400, f"partition: {exc}") from exc
    skew = timedelta(seconds=settings.WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS)
    if not has_started(interval, now=now, skew=skew):
        newest = newest_started(
            monitor.partitioning, monitor.partition_timezone, now=now, skew=skew
        ).key
        starts_at = _iso(interval.start)
        seconds = int(skew.total_seconds())
        raise PingRejected(
            422,
            f"partition {partition!r} starts at {starts_at}, after now ({_iso(now)}) plus "
            f"the {seconds} s clock-skew allowance: its period has not started. The newest "
            f"partition accepted now is {newest!r}",
            extra={
                "rule": FUTURE_RULE,
                "partition": partition,
                "starts_at": starts_at,
                "newest_accepted_partition": newest,
                "clock_skew_seconds": seconds,
            },
        )
    return partition


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
