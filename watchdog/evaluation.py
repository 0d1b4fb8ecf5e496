"""Judging deadlines: the first half of each loop cycle.

Only monitors whose ``check_at`` (deadline + grace) has passed are read, through an
index, and locked with SKIP LOCKED so two loops share the work. Each missed deadline opens
one incident (unique per monitor and deadline) and queues a trigger per channel. After
downtime, the first cycle walks every deadline missed meanwhile: one incident each, at
once, rather than one per minute of outage.

Deadline monitors open one incident per missed deadline, since each deadline expects its
own data, and one success ping fills one deadline (``_question``). A period monitor opens
one incident when it goes quiet and then waits for its next ping (a period has no
deadlines of its own once pings stop: counting every period of silence would only repeat
the same page). A missed deadline is part of the incident already paging for its cause
(``incidents.causes_of_missed``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connections, transaction
from django.db.models import Q

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
    """Open the incidents and queue their triggers in bulk, each missed deadline part of
    the incident already paging for its cause, if any (``incidents.causes_of_missed``).
    Should one already exist (a unique conflict, e.g. a judgement repeated after a crash),
    fall back to opening them one by one, where the existing ones are skipped."""
    if not openings:
        return []
    # A partitioned monitor's incident first: when a dataset's data and pipeline monitors
    # miss one deadline, the one that pages names the partition (sorting is stable).
    openings = sorted(openings, key=lambda o: not o.monitor.partitioning)
    incidents.lock_subjects([o.monitor for o in openings])
    causes = incidents.causes_of_missed(
        [
            (o.monitor, o.deadline_at, schedule.run_window(o.monitor, o.deadline_at))
            for o in openings
        ]
    )
    rows = [
        Incident(
            monitor=o.monitor,
            reason=Incident.Reason.MISSED,
            deadline_at=o.deadline_at,
            partition=o.partition,
            summary=o.summary[:1024],
            opened_at=now,
            part_of=cause if isinstance(cause, Incident) else None,
        )
        for o, cause in zip(openings, causes, strict=True)
    ]
    try:
        with transaction.atomic(using=db.alias()):
            # Those paging for themselves first: the parts opened in this batch point at them.
            Incident.objects.bulk_create(
                [r for r, c in zip(rows, causes, strict=True) if not isinstance(c, int)],
                batch_size=500,
            )
            for row, cause in zip(rows, causes, strict=True):
                if isinstance(cause, int):
                    row.part_of = rows[cause]
            Incident.objects.bulk_create(
                [r for r, c in zip(rows, causes, strict=True) if isinstance(c, int)],
                batch_size=500,
            )
        opened = list(zip(openings, rows, strict=True))
    except IntegrityError:
        opened = []
        for o, row, cause in zip(openings, rows, causes, strict=True):
            if isinstance(cause, int):
                cause = rows[cause] if rows[cause].pk else _existing(openings[cause])
            row.pk = None
            incident = incidents.open_incident(
                o.monitor,
                reason=Incident.Reason.MISSED,
                deadline_at=o.deadline_at,
                partition=o.partition,
                summary=o.summary,
                now=now,
                page=False,
                part_of=cause,
            )
            if incident is not None:
                row.pk = incident.pk
                opened.append((o, incident))
    Page.objects.bulk_create(
        [
            Page(
                incident=incident, channel=channel, action=Page.Action.TRIGGER, next_attempt_at=now
            )
            for o, incident in opened
            if o.page and incident.part_of_id is None
            for channel in o.monitor.channels.all()
        ],
        batch_size=500,
    )
    return [Missed(o.monitor.name, o.deadline_at, o.partition) for o, _ in opened]


def _existing(opening: _Opening) -> Incident | None:
    """The incident a repeated judgement of ``opening`` finds already open, paging for
    itself or through the one it is part of."""
    incident = (
        Incident.objects.filter(
            monitor=opening.monitor,
            reason=Incident.Reason.MISSED,
            deadline_at=opening.deadline_at,
        )
        .select_related("part_of")
        .first()
    )
    return incident and (incident.part_of or incident)


def _overdue_runs(*, now: datetime, limit: int) -> list[Missed]:
    """Page every run open past its monitor's maximum run time, once per run.

    The run and its monitor are locked together, skipping those another transaction
    holds: a ping holds its monitor's row and then updates its run (the finish), so
    locking the run alone and then opening the incident (which references the monitor)
    deadlocked with it, and the finish ping failed. A run skipped here is paged next
    cycle, unless its finish landed meanwhile."""
    missed = []
    runs = list(
        Run.objects.select_for_update(skip_locked=True, of=("self", "monitor"))
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

    A partition rule expects the partitions that closed since the previous deadline
    (none, when the schedule fires more often than periods close: then nothing is due).
    Without one, one success ping fills one deadline: the earliest in the deadline's
    window (from ``EARLY_TOLERANCE`` before the previous deadline to the end of the grace)
    that no earlier deadline counted.

    The monitor's newest success (``last_success_at``, ``last_partition``) settles most
    judgements without reading its pings: nothing since the window opened means missed,
    and the expected partition being the newest one pinged means met. Returns
    ``("settled", gap)`` then, or what must be read: ``("partitions", expected keys)``
    or ``("window", opens, closes, counted)`` (``counted``: the time and id of the ping
    the previous deadline counted, or None).
    """
    if monitor.partitioning:
        expected = schedule.expected_partitions(monitor, deadline)
        if not expected:
            return ("settled", None)
        if monitor.last_partition < expected[0]:  # keys sort as their periods do
            return ("settled", expected[0])
        if expected == [monitor.last_partition]:
            return ("settled", None)
        return ("partitions", expected)
    # Bounded on both sides: a ping after this deadline's grace belongs to a later one, so
    # one late ping after downtime does not excuse every deadline missed meanwhile.
    opens, closes = schedule.window_start(monitor, deadline), schedule.check_at(monitor, deadline)
    counted = None
    if monitor.counted_ping_at is not None:
        counted = (monitor.counted_ping_at, monitor.counted_ping_id or 0)
    last = monitor.last_success_at
    # (A ping at the very instant of the counted one may still be free: ids tell.)
    if last is None or last <= opens or (counted and last < counted[0]):
        return ("settled", "")
    return ("window", opens, closes, counted)


def _missing_partition(monitor: Monitor, deadline: datetime, pings: _PingFacts) -> str | None:
    """None when ``deadline`` was met; else the first partition it expected that has no
    success ping ("" for monitors without a partition rule). A deadline met by a window's
    ping moves the monitor's count on to that ping (in memory: the caller saves)."""
    if monitor.kind == Monitor.Kind.PERIOD:
        # A success ping would have moved the deadline: judged means missed.
        return ""
    question = _question(monitor, deadline)
    if question[0] == "settled":
        return question[1]
    if question[0] == "partitions":
        pinged = pings.partitions(monitor, question[1])
        return next((key for key in question[1] if key not in pinged), None)
    found = pings.first_in_window(monitor, question[1:])
    if found is None:
        return ""
    monitor.counted_ping_at, monitor.counted_ping_id = found
    return None


Window = tuple[datetime, datetime, tuple[datetime, int] | None]


class _PingFacts:
    """The pings a batch's judgements must read, read up front in two statements (the
    partitions pinged, the first free success ping of each monitor's next window) rather
    than one per deadline; anything not asked up front is read when asked."""

    def __init__(self, monitors: list[Monitor], *, now: datetime):
        keys: set[tuple[int, str]] = set()
        windows: list[tuple[int, Window]] = []
        for monitor in monitors:
            if monitor.kind != Monitor.Kind.DEADLINE:
                continue
            for deadline in _due_deadlines(monitor, now=now):
                question = _question(monitor, deadline)
                if question[0] == "partitions":
                    keys.update((monitor.pk, key) for key in question[1])
                elif question[0] == "window":
                    # Only the first: where a later window starts depends on its answer.
                    windows.append((monitor.pk, question[1:]))
                    break
        self._asked_keys = keys
        self._pinged = _pinged_partitions(keys)
        self._windows = _first_in_windows(windows)

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

    def first_in_window(self, monitor: Monitor, window: Window) -> tuple[datetime, int] | None:
        """The (time, id) of the earliest success ping of ``monitor`` in (``opens``,
        ``closes``] and after ``counted``; None when there is none."""
        asked = (monitor.pk, window)
        if asked not in self._windows:
            self._windows.update(_first_in_windows([asked]))
        return self._windows[asked]


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


_FIRST_IN_WINDOWS_SQL = """
SELECT v.i, p.received_at, p.id
FROM UNNEST(%s::int[], %s::bigint[], %s::timestamptz[], %s::timestamptz[],
            %s::timestamptz[], %s::bigint[])
    AS v(i, monitor_id, opens, closes, counted_at, counted_id)
CROSS JOIN LATERAL (
    SELECT p.received_at, p.id FROM watchdog_ping p
    WHERE p.monitor_id = v.monitor_id AND p.kind = 'success'
      AND p.received_at > v.opens AND p.received_at <= v.closes
      AND (v.counted_at IS NULL OR (p.received_at, p.id) > (v.counted_at, v.counted_id))
    ORDER BY p.received_at, p.id
    LIMIT 1
) AS p
"""


def _first_in_windows(
    asked: list[tuple[int, Window]],
) -> dict[tuple[int, Window], tuple[datetime, int] | None]:
    """For each (monitor id, window), the earliest free success ping in it (see
    ``_PingFacts.first_in_window``): one statement on PostgreSQL, one per window
    elsewhere."""
    found: dict[tuple[int, Window], tuple[datetime, int] | None] = dict.fromkeys(asked)
    if not asked:
        return found
    connection = connections[db.alias()]
    if connection.vendor != "postgresql":
        for pk, (opens, closes, counted) in asked:
            pings = Ping.objects.filter(
                monitor_id=pk,
                kind=Ping.Kind.SUCCESS,
                received_at__gt=opens,
                received_at__lte=closes,
            )
            if counted is not None:
                pings = pings.filter(
                    Q(received_at__gt=counted[0]) | Q(received_at=counted[0], id__gt=counted[1])
                )
            first = pings.order_by("received_at", "id").values_list("received_at", "id").first()
            found[(pk, (opens, closes, counted))] = first
        return found
    columns: list[list] = [[], [], [], [], [], []]
    for i, (pk, (opens, closes, counted)) in enumerate(asked):
        for column, value in zip(
            columns,
            [
                i,
                pk,
                opens,
                closes,
                counted[0] if counted else None,
                counted[1] if counted else None,
            ],
            strict=True,
        ):
            column.append(value)
    with connection.cursor() as cursor:
        cursor.execute(_FIRST_IN_WINDOWS_SQL, columns)
        for i, received_at, ping_id in cursor.fetchall():
            found[asked[i]] = (received_at, ping_id)
    return found


_JUDGED_FIELDS = [
    "deadline_at",
    "check_at",
    "state",
    "last_success_at",
    "last_partition",
    "counted_ping_at",
    "counted_ping_id",
]
_SAVE_JUDGED_SQL = """
UPDATE watchdog_monitor AS m SET
    deadline_at = v.deadline_at, check_at = v.check_at, state = v.state,
    last_success_at = v.last_success_at, last_partition = v.last_partition,
    counted_ping_at = v.counted_ping_at, counted_ping_id = v.counted_ping_id,
    updated_at = v.updated_at
FROM UNNEST(%s::bigint[], %s::timestamptz[], %s::timestamptz[], %s::varchar[],
            %s::timestamptz[], %s::varchar[], %s::timestamptz[], %s::bigint[],
            %s::timestamptz[])
    AS v(id, deadline_at, check_at, state, last_success_at, last_partition,
         counted_ping_at, counted_ping_id, updated_at)
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
