"""Judging deadlines: the first half of each loop cycle.

Only monitors whose ``check_at`` (deadline + grace) has passed are read, through an
index, and locked with SKIP LOCKED so two loops share the work. Each missed deadline opens
one incident (unique per monitor and deadline) and queues a trigger per channel. After
downtime, the first cycle walks every deadline missed meanwhile: one incident each, at
once, rather than one per minute of outage.

Deadline monitors open one incident per missed deadline, since each deadline expects its
own data. A period monitor opens one incident when it goes quiet and then waits for its
next ping (a period has no deadlines of its own once pings stop: counting every period
of silence would only repeat the same page).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connections, transaction

from . import datacheck, db, incidents, schedule
from .models import Incident, Monitor, Page, Ping, Run

MAX_DEADLINES_PER_MONITOR = 500  # a very long outage is caught up over several cycles


@dataclass(frozen=True)
class Missed:
    monitor: str
    deadline_at: datetime
    partition: str


@dataclass
class _Opening:
    """An incident to open for a missed deadline (opened in bulk per batch)."""

    monitor: Monitor
    deadline_at: datetime
    partition: str
    summary: str
    page: bool = True


def evaluate_due(*, now: datetime, limit: int = 1000) -> list[Missed]:
    """Judge every deadline whose grace has passed by ``now`` (aware UTC), for up to
    ``limit`` monitors; returns the deadlines newly found missed.

    One transaction per batch: the due monitors are locked (SKIP LOCKED), judged in
    memory, and their incidents, triggers and new deadlines written in a few statements.
    """
    with transaction.atomic(using=db.alias()):
        monitors = list(
            Monitor.objects.select_for_update(skip_locked=True)
            .filter(check_at__lte=now)
            .exclude(state=Monitor.State.PAUSED)
            .prefetch_related("channels")
            .order_by("check_at")[:limit]
        )
        missed = _judge_all(monitors, now=now) if monitors else []
        missed += _overdue_runs(now=now, limit=limit)
        missed += _late_starts(now=now, limit=limit)
    return missed


def _judge_all(monitors: list[Monitor], *, now: datetime) -> list[Missed]:
    """Judge the locked due ``monitors``, open their incidents and save them."""
    system_down = set(
        Monitor.objects.filter(system=True, state=Monitor.State.DOWN).values_list("pk", flat=True)
    )
    pings = _PingFacts(monitors, now=now)
    openings: list[_Opening] = []
    for monitor in monitors:
        openings += _judge(monitor, now=now, system_down=system_down, pings=pings)
        monitor.updated_at = now
    missed = _open_all(openings, now=now)
    _save_judged(monitors)
    return missed


def _open_all(openings: list[_Opening], *, now: datetime) -> list[Missed]:
    """Open the incidents and queue their triggers in bulk. Should one already exist (a
    unique conflict, e.g. a judgement repeated after a crash), fall back to opening them
    one by one, where the existing ones are skipped."""
    rows = [
        Incident(
            monitor=o.monitor,
            reason=Incident.Reason.MISSED,
            deadline_at=o.deadline_at,
            partition=o.partition,
            summary=o.summary[:1024],
            opened_at=now,
        )
        for o in openings
    ]
    try:
        with transaction.atomic(using=db.alias()):
            Incident.objects.bulk_create(rows, batch_size=500)
        opened = list(zip(openings, rows, strict=True))
    except IntegrityError:
        opened = []
        for o in openings:
            incident = incidents.open_incident(
                o.monitor,
                reason=Incident.Reason.MISSED,
                deadline_at=o.deadline_at,
                partition=o.partition,
                summary=o.summary,
                now=now,
                page=False,
            )
            if incident is not None:
                opened.append((o, incident))
    Page.objects.bulk_create(
        [
            Page(
                incident=incident, channel=channel, action=Page.Action.TRIGGER, next_attempt_at=now
            )
            for o, incident in opened
            if o.page
            for channel in o.monitor.channels.all()
        ],
        batch_size=500,
    )
    return [Missed(o.monitor.name, o.deadline_at, o.partition) for o, _ in opened]


def _overdue_runs(*, now: datetime, limit: int) -> list[Missed]:
    """Page every run open past its monitor's maximum run time, once per run."""
    missed = []
    runs = list(
        Run.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(overdue_at__lte=now)
        .select_related("monitor")
        .order_by("overdue_at")[:limit]
    )
    for run in runs:
        monitor = run.monitor
        if monitor.state != Monitor.State.PAUSED:
            label = f" {run.run_id}" if run.run_id else ""
            incident = incidents.open_incident(
                monitor,
                reason=Incident.Reason.RUNTIME,
                deadline_at=run.started_at,
                summary=(
                    f"{monitor.name}: run{label} started {run.started_at:%Y-%m-%d %H:%M:%S} UTC "
                    f"still running after {monitor.max_runtime_seconds} s"
                ),
                now=now,
            )
            if incident is not None:
                missed.append(Missed(monitor.name, run.overdue_at, ""))
        run.overdue_at = None
        run.save(update_fields=["overdue_at"])
    return missed


def _late_starts(*, now: datetime, limit: int) -> list[Missed]:
    """Page every scheduled start whose start grace passed without a ``/start``: one
    incident per missed start of a deadline monitor (each firing of ``start_cron``); a
    period monitor pages once and waits for its next start."""
    missed = []
    monitors = list(
        Monitor.objects.select_for_update(skip_locked=True)
        .filter(start_check_at__lte=now)
        .exclude(state=Monitor.State.PAUSED)
        .prefetch_related("channels")
        .order_by("start_check_at")[:limit]
    )
    for monitor in monitors:
        expected = monitor.start_expected_at
        for _ in range(MAX_DEADLINES_PER_MONITOR):
            if expected is None or schedule.start_check_at(monitor, expected) > now:
                break
            incident = incidents.open_incident(
                monitor,
                reason=Incident.Reason.START_LATE,
                deadline_at=expected,
                summary=(
                    f"{monitor.name}: no start by {expected:%Y-%m-%d %H:%M} UTC "
                    f"(+{monitor.start_grace_seconds} s grace)"
                ),
                now=now,
            )
            if incident is not None:
                monitor.state = Monitor.State.DOWN
                missed.append(Missed(monitor.name, expected, ""))
            expected = schedule.next_expected_start(monitor, expected)
        monitor.start_expected_at = expected
        monitor.start_check_at = schedule.start_check_at(monitor, expected)
        monitor.save(update_fields=["start_expected_at", "start_check_at", "state"])
    return missed


def _judge(
    monitor: Monitor, *, now: datetime, system_down: set[int], pings: _PingFacts
) -> list[_Opening]:
    """Walk the monitor's deadlines up to ``now``; returns the incidents to open and moves
    its deadline on (in memory: the caller saves)."""
    openings = []
    following = monitor.deadline_at
    for deadline in _due_deadlines(monitor, now=now):
        gap = _missing_partition(monitor, deadline, pings)
        while gap and datacheck.partition_landed(monitor, gap):
            # The data landed without its ping: the storage check records the success.
            datacheck.record_landed(monitor, gap, now=now)
            pings.partition_pinged(monitor, gap)
            gap = _missing_partition(monitor, deadline, pings)
        if gap is not None:
            expected = f" partition {gap}" if gap else ""
            summary = f"{monitor.name}: no ping{expected} by {deadline:%Y-%m-%d %H:%M} UTC"
            page = True
            if monitor.system:
                summary = f"Tidemark is degraded: {summary}"
                # Operators are paged once for a degraded Tidemark, not once per part.
                page = not (system_down - {monitor.pk})
                system_down.add(monitor.pk)
            openings.append(_Opening(monitor, deadline, gap, summary, page))
            monitor.state = Monitor.State.DOWN
            if monitor.kind == Monitor.Kind.PERIOD:
                following = None  # wait for the next ping
                break
        following = schedule.next_deadline(monitor, deadline)
    monitor.deadline_at = following
    monitor.check_at = schedule.check_at(monitor, following) if following else None
    return openings


def _due_deadlines(monitor: Monitor, *, now: datetime) -> Iterator[datetime]:
    """The monitor's deadlines whose grace has passed by ``now``, from ``deadline_at`` on,
    oldest first; at most ``MAX_DEADLINES_PER_MONITOR`` (the rest wait for a later cycle)."""
    deadline = monitor.deadline_at
    for _ in range(MAX_DEADLINES_PER_MONITOR):
        if deadline is None or schedule.check_at(monitor, deadline) > now:
            return
        yield deadline
        deadline = schedule.next_deadline(monitor, deadline)


def _question(monitor: Monitor, deadline: datetime) -> tuple:
    """What judging ``deadline`` of a deadline monitor needs to know.

    The monitor's newest success (``last_success_at``, ``last_partition``) settles most
    judgements without reading its pings: nothing since the window opened means missed,
    and the expected partition being the newest one pinged means met. Returns
    ``("settled", gap)`` then, or what must be read: ``("partitions", expected keys)``
    or ``("window", opens, closes)``.
    """
    expected = schedule.expected_partitions(monitor, deadline)
    if expected:
        if monitor.last_partition < expected[0]:  # keys sort as their periods do
            return ("settled", expected[0])
        if expected == [monitor.last_partition]:
            return ("settled", None)
        return ("partitions", expected)
    # Bounded on both sides: a ping after this deadline's grace belongs to a later one, so
    # one late ping after downtime does not excuse every deadline missed meanwhile.
    opens, closes = schedule.window_start(monitor, deadline), schedule.check_at(monitor, deadline)
    last = monitor.last_success_at
    if last is None or last <= opens:
        return ("settled", "")
    if last <= closes:
        return ("settled", None)
    return ("window", opens, closes)


def _missing_partition(monitor: Monitor, deadline: datetime, pings: _PingFacts) -> str | None:
    """None when ``deadline`` was met; else the first partition it expected that has no
    success ping ("" for monitors without a partition rule)."""
    if monitor.kind == Monitor.Kind.PERIOD:
        # A success ping would have moved the deadline: judged means missed.
        return ""
    question = _question(monitor, deadline)
    if question[0] == "settled":
        return question[1]
    if question[0] == "partitions":
        pinged = pings.partitions(monitor, question[1])
        return next((key for key in question[1] if key not in pinged), None)
    return None if pings.window_met(monitor, question[1], question[2]) else ""


class _PingFacts:
    """The pings a batch's judgements must read, read up front in two statements (the
    partitions pinged, the success windows holding a ping) rather than one per deadline;
    anything not asked up front is read when asked."""

    def __init__(self, monitors: list[Monitor], *, now: datetime):
        keys: set[tuple[int, str]] = set()
        windows: list[tuple[int, datetime, datetime]] = []
        for monitor in monitors:
            if monitor.kind != Monitor.Kind.DEADLINE:
                continue
            for deadline in _due_deadlines(monitor, now=now):
                question = _question(monitor, deadline)
                if question[0] == "partitions":
                    keys.update((monitor.pk, key) for key in question[1])
                elif question[0] == "window":
                    windows.append((monitor.pk, question[1], question[2]))
        self._asked_keys = keys
        self._pinged = _pinged_partitions(keys)
        self._windows = dict.fromkeys(windows, False) | dict.fromkeys(_windows_met(windows), True)

    def partitions(self, monitor: Monitor, keys: list[str]) -> set[str]:
        """Which of ``keys`` have a success ping of ``monitor``."""
        unasked = [key for key in keys if (monitor.pk, key) not in self._asked_keys]
        if unasked:
            pairs = {(monitor.pk, key) for key in unasked}
            self._pinged |= _pinged_partitions(pairs)
            self._asked_keys |= pairs
        return {key for key in keys if (monitor.pk, key) in self._pinged}

    def partition_pinged(self, monitor: Monitor, key: str) -> None:
        """Note a success for ``key`` recorded during the judgement (the storage check)."""
        self._asked_keys.add((monitor.pk, key))
        self._pinged.add((monitor.pk, key))

    def window_met(self, monitor: Monitor, opens: datetime, closes: datetime) -> bool:
        """Whether a success ping of ``monitor`` fell in (``opens``, ``closes``]."""
        window = (monitor.pk, opens, closes)
        if window not in self._windows:
            self._windows[window] = bool(_windows_met([window]))
        return self._windows[window]


def _pinged_partitions(pairs: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """The (monitor id, partition) pairs among ``pairs`` with a success ping."""
    if not pairs:
        return set()
    found = Ping.objects.filter(
        kind=Ping.Kind.SUCCESS,
        monitor_id__in={pk for pk, _ in pairs},
        partition__in={key for _, key in pairs},
    ).values_list("monitor_id", "partition")
    return set(found.distinct()) & pairs


_WINDOWS_MET_SQL = """
SELECT v.monitor_id, v.opens, v.closes
FROM UNNEST(%s::bigint[], %s::timestamptz[], %s::timestamptz[]) AS v(monitor_id, opens, closes)
WHERE EXISTS (
    SELECT 1 FROM watchdog_ping p
    WHERE p.monitor_id = v.monitor_id AND p.kind = 'success'
      AND p.received_at > v.opens AND p.received_at <= v.closes
)
"""


def _windows_met(windows: list[tuple[int, datetime, datetime]]) -> list[tuple]:
    """The (monitor id, opens, closes) windows among ``windows`` holding a success ping:
    one statement on PostgreSQL, one per window elsewhere."""
    if not windows:
        return []
    connection = connections[db.alias()]
    if connection.vendor != "postgresql":
        return [
            (pk, opens, closes)
            for pk, opens, closes in windows
            if Ping.objects.filter(
                monitor_id=pk,
                kind=Ping.Kind.SUCCESS,
                received_at__gt=opens,
                received_at__lte=closes,
            ).exists()
        ]
    with connection.cursor() as cursor:
        cursor.execute(_WINDOWS_MET_SQL, [list(column) for column in zip(*windows, strict=True)])
        return [tuple(row) for row in cursor.fetchall()]


_JUDGED_FIELDS = ["deadline_at", "check_at", "state", "last_success_at", "last_partition"]
_SAVE_JUDGED_SQL = """
UPDATE watchdog_monitor AS m SET
    deadline_at = v.deadline_at, check_at = v.check_at, state = v.state,
    last_success_at = v.last_success_at, last_partition = v.last_partition,
    updated_at = v.updated_at
FROM UNNEST(%s::bigint[], %s::timestamptz[], %s::timestamptz[], %s::varchar[],
            %s::timestamptz[], %s::varchar[], %s::timestamptz[])
    AS v(id, deadline_at, check_at, state, last_success_at, last_partition, updated_at)
WHERE m.id = v.id
"""


def _save_judged(monitors: list[Monitor]) -> None:
    """Write what judging changed on ``monitors``: one statement on PostgreSQL (Django's
    ``bulk_update`` builds a CASE per row and field, most of a 1,000-monitor batch's cost)."""
    if not monitors:
        return
    connection = connections[db.alias()]
    if connection.vendor != "postgresql":
        Monitor.objects.bulk_update(monitors, [*_JUDGED_FIELDS, "updated_at"], batch_size=500)
        return
    columns = [[m.pk for m in monitors]]
    columns += [[getattr(m, name) for m in monitors] for name in [*_JUDGED_FIELDS, "updated_at"]]
    with connection.cursor() as cursor:
        cursor.execute(_SAVE_JUDGED_SQL, columns)
