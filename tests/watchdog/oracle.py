"""A brute-force oracle for the watchdog's judgement: which incidents open, which of them
page together, and when each resolves, for monitors fed a sequence of pings, pauses and
definition updates.

It states the rules in the simplest terms, event by event, and shares no code with the
watchdog: cron firings and logical periods come from minute-by-minute walks of the wall
clock (``tests/schedules/firings_oracle``), and slots are filled by a plain greedy
matching. Moments that fall at the same instant are taken in this order: pings, then
the judging of whatever is due (the loop runs at every instant something comes due),
then pauses, resumes and definition updates.

The rules:

- **Slots.** A deadline monitor expects one run per firing of its cron (in its zone,
  after it was created or last resumed); a firing is judged at firing + grace, unless the
  monitor is paused by then. A period monitor's deadline is its last success + period
  (from its first success, or from a resume), judged at deadline + grace.
- **One ping fills one slot.** Without a partition rule, a success ping may fill a
  judged slot whose window holds it: after the previous firing less 60 s of tolerance,
  up to the end of the grace. Taken in the order received, each ping fills the earliest
  such slot no earlier ping filled. With a partition rule, a slot expects every period
  that closed after the previous firing and by its own (none may be due) and is met when
  each has a success ping naming it by the end of the grace.
- **Missed.** A slot not filled is a ``missed`` incident (partition: the first period
  missing). A period monitor then waits for its next success before it expects another.
- **No pings from the future.** A ping naming a partition whose period has not started
  (the wall clock in the partition's zone, at the ping plus the 300 s clock-skew
  allowance, shows an earlier key) is refused: it changes nothing at all.
- **Failed.** A failure ping (``/fail``, non-zero exit status) of a monitor not paused
  is a ``failed`` incident at its instant.
- **Partitions named.** Every incident of a monitor with a partition rule names a
  partition: a missed slot its first missing period, a failure the partition its ping
  named; any other (a failure naming none, a late start, an overdue run) the first
  period without a success ping among those expected by the first firing whose grace
  has not passed by its instant and that expects any (else the last of them).
- **Starts.** With a start limit, each start-cron firing (or one period after the last
  ``/start``) expects a ``/start`` from halfway since the previous firing until its start
  grace ends; a ``/start`` counts for the earliest expected start not yet judged, and
  none that comes while a ``start_late`` incident is open (it resolves them). An expected
  start judged without one is a ``start_late`` incident; a period monitor then waits for
  its next ``/start``.
- **Runs.** A ``/start`` opens a run (by run id); a finish (success or failure) closes
  the newest open run with its run id. A run still open at start + maximum run time, on
  a monitor not paused, is a ``runtime`` incident per start instant, resolved by the
  finish of a run started then.
- **Resolution.** A success resolves the monitor's open incidents other than runtime
  ones; a ``missed`` one with partitions only once every period it expected has a
  success ping and this ping names one of them. A ``/start`` resolves open
  ``start_late`` incidents. A pause resolves everything open.
- **Pauses stick.** ``pause`` (a person) and ``deactivate`` (the managing system's
  definition turning inactive) pause; ``resume`` lifts any pause; ``activate`` lifts only
  a pause the definition made; pings and updates lift none.
- **One cause, one page.** A missed slot is part of the newest open ``failed`` incident
  reported in its window (for a period monitor: from a period before its deadline to the
  end of the grace) by its monitor or by a monitor of the same subject (external ids
  equal up to the last ``:``); else of the open ``missed`` incident of a monitor of its
  subject at the same firing; else it pages itself. Every other incident pages itself.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tests.schedules.firings_oracle import firings

TOLERANCE = timedelta(seconds=60)
LOOKBACK = timedelta(days=40)  # by default, further back than any firing a window needs
MINUTE = timedelta(minutes=1)
KEY_FORMATS = {"hourly": "%Y-%m-%dT%H", "daily": "%Y-%m-%d", "monthly": "%Y-%m"}

PING, JUDGE, CONTROL = 0, 1, 2
CLOCK_SKEW = timedelta(seconds=300)  # WATCHDOG_PARTITION_CLOCK_SKEW's default


@dataclass(frozen=True)
class Spec:
    """One monitor's definition."""

    kind: str  # "period" or "deadline"
    period_seconds: int | None = None
    cron: str = ""
    timezone: str = "UTC"
    partitioning: str = ""
    partition_timezone: str = "UTC"
    grace_seconds: int = 0
    max_runtime_seconds: int | None = None
    start_cron: str = ""
    start_grace_seconds: int | None = None
    external_id: str = ""

    @property
    def subject(self) -> str:
        head, colon, _ = self.external_id.rpartition(":")
        return head if colon else ""

    @property
    def watches_start(self) -> bool:
        return self.start_grace_seconds is not None and (
            self.kind == "period" or bool(self.start_cron)
        )


@dataclass(frozen=True)
class Event:
    """One thing that happens to monitor number ``monitor`` at ``at`` (UTC)."""

    at: datetime
    monitor: int
    action: str  # success start fail exit | pause resume update deactivate activate
    exit_status: int | None = None
    partition: str = ""
    run_id: str = ""

    @property
    def ping(self) -> str | None:
        """``success``, ``start`` or ``fail`` for a ping; None for a control."""
        if self.action == "exit":
            return "success" if self.exit_status == 0 else "fail"
        return self.action if self.action in ("success", "start", "fail") else None


@dataclass(eq=False)
class Incident:
    monitor: int
    reason: str
    deadline: datetime
    partition: str = ""
    resolved: datetime | None = None
    part_of: Incident | None = None

    @property
    def key(self) -> tuple:
        return (self.monitor, self.reason, self.deadline)


def wall_periods(partitioning: str, time_zone: str, start: datetime, end: datetime):
    """Each period (key) whose end lies in (start, end], with that end: walking the wall
    clock minute by minute, a period ends when the clock first shows a later key."""
    zone, fmt = ZoneInfo(time_zone), KEY_FORMATS[partitioning]
    walk = start.replace(second=0, microsecond=0) - timedelta(days=1)
    shown = walk.astimezone(zone).strftime(fmt)
    ends = []
    while walk < end:
        walk += MINUTE
        key = walk.astimezone(zone).strftime(fmt)
        if key > shown:
            if walk > start:
                ends.append((shown, walk))
            shown = key
    return ends


@dataclass
class _Monitor:
    spec: Spec
    index: int
    firings: list[datetime] = field(default_factory=list)
    start_firings: list[datetime] = field(default_factory=list)
    period_ends: list[tuple[str, datetime]] = field(default_factory=list)
    paused: bool = False
    paused_by_definition: bool = False
    watching_since: datetime | None = None
    last_success: datetime | None = None
    last_start: datetime | None = None
    deadline: datetime | None = None  # a period monitor's
    expected_start: datetime | None = None  # a period monitor's
    start_filled: set[datetime] = field(default_factory=set)
    runs: list[dict] = field(default_factory=list)
    partitions_pinged: dict[str, datetime] = field(default_factory=dict)
    walked_from: datetime | None = None  # firings and periods are walked from here on

    def previous(self, instants: list[datetime], at: datetime) -> datetime | None:
        i = bisect.bisect_left(instants, at)
        return instants[i - 1] if i else None

    def expected_partitions(self, deadline: datetime) -> list[str]:
        previous = self.previous(self.firings, deadline)
        return [
            key
            for key, end in self.period_ends
            if (previous is None or end > previous) and end <= deadline
        ]

    def window(self, deadline: datetime) -> tuple[datetime | None, datetime]:
        previous = self.previous(self.firings, deadline)
        grace = timedelta(seconds=self.spec.grace_seconds)
        return (previous - TOLERANCE if previous else None), deadline + grace

    def start_window_opens(self, expected: datetime) -> datetime:
        previous = self.previous(self.start_firings, expected)
        return expected - (expected - previous) / 2 if previous else expected - LOOKBACK


def judge(
    specs: list[Spec],
    events: list[Event],
    *,
    start: datetime,
    end: datetime,
    lookback: timedelta = LOOKBACK,
) -> list[Incident]:
    """The incidents the watchdog should have opened by ``end`` for ``specs`` (all created
    at ``start``) and ``events`` (in the order received), each with its resolution and
    the incident it is part of.

    Args:
        lookback: how far before ``start`` firings and periods are walked: past the
            firing before each monitor's first deadline (a shorter walk can only make the
            oracle disagree, never agree by accident).
    """
    return _World(specs, events, start=start, end=end, lookback=lookback).run()


class _World:
    def __init__(self, specs, events, *, start, end, lookback):
        self.start, self.end, self.events = start, end, events
        self.monitors = [_Monitor(spec, i) for i, spec in enumerate(specs)]
        self.incidents: list[Incident] = []
        self.queue: list[tuple] = []
        self.order = itertools.count()
        for m in self.monitors:
            m.watching_since = start
            m.walked_from = start - lookback
            if m.spec.cron:
                m.firings = firings(m.spec.cron, m.spec.timezone, start - lookback, end)
            if m.spec.start_cron:
                m.start_firings = firings(m.spec.start_cron, m.spec.timezone, start - lookback, end)
            if m.spec.partitioning:
                m.period_ends = wall_periods(
                    m.spec.partitioning, m.spec.partition_timezone, start - lookback, end
                )

    def at(self, when, phase, what, *args):
        heapq.heappush(self.queue, (when, phase, next(self.order), what, args))

    # --- what is judged when -------------------------------------------------------------

    def active_spans(self, m: _Monitor) -> list[tuple[datetime, datetime]]:
        """When ``m`` is watched: [from, until) spans between pauses (controls only)."""
        spans, since, paused, by_definition = [], self.start, False, False
        for event in self.events:
            if event.monitor != m.index or event.ping:
                continue
            pauses = event.action == "pause" or event.action == "deactivate"
            if pauses:
                if not paused:
                    spans.append((since, event.at))
                    paused, by_definition = True, event.action == "deactivate"
                elif by_definition and event.action == "pause":
                    by_definition = False  # a person's pause now
            elif paused and (
                event.action == "resume" or (event.action == "activate" and by_definition)
            ):
                paused, since = False, event.at
        if not paused:
            spans.append((since, self.end))
        return spans

    def watched(self, instants, span, grace):
        """The firings after a span opens whose judgement falls within it."""
        since, until = span
        return [i for i in instants if i > since and i + grace <= until and i + grace <= self.end]

    # --- one ping fills one slot ----------------------------------------------------------

    def fill(self, m: _Monitor, slots: list[datetime]) -> set[datetime]:
        """Greedy: each success ping, in the order received, fills the earliest slot whose
        window holds it and that no earlier ping filled."""
        filled: set[datetime] = set()
        for event in self.events:
            if event.monitor != m.index or event.ping != "success":
                continue
            for deadline in slots:
                opens, closes = m.window(deadline)
                held = (opens is None or event.at > opens) and event.at <= closes
                if held and deadline not in filled:
                    filled.add(deadline)
                    break
        return filled

    # --- the run --------------------------------------------------------------------------

    def run(self) -> list[Incident]:
        for m in self.monitors:
            if m.spec.kind == "deadline":
                grace = timedelta(seconds=m.spec.grace_seconds)
                slots = [
                    d for span in self.active_spans(m) for d in self.watched(m.firings, span, grace)
                ]
                filled = set() if m.spec.partitioning else self.fill(m, slots)
                for deadline in slots:
                    self.at(deadline + grace, JUDGE, "slot", m, deadline, deadline in filled)
                if m.spec.watches_start:
                    grace = timedelta(seconds=m.spec.start_grace_seconds)
                    for span in self.active_spans(m):
                        for expected in self.watched(m.start_firings, span, grace):
                            self.at(expected + grace, JUDGE, "start", m, expected)
        for event in self.events:
            self.at(event.at, PING if event.ping else CONTROL, "event", event)
        while self.queue:
            when, _, _, what, args = heapq.heappop(self.queue)
            if when > self.end:
                break
            getattr(self, f"on_{what}")(when, *args)
        return self.incidents

    def on_slot(self, when, m: _Monitor, deadline, filled):
        if m.spec.partitioning:
            missing = [
                key
                for key in m.expected_partitions(deadline)
                if key not in m.partitions_pinged or m.partitions_pinged[key] > when
            ]
            if missing:
                self.open_missed(m, deadline, missing[0])
        elif not filled:
            self.open_missed(m, deadline, "")

    def on_period(self, when, m: _Monitor, deadline):
        if not m.paused and m.deadline == deadline:
            self.open_missed(m, deadline, "")
            m.deadline = None  # wait for the next success

    def on_start(self, when, m: _Monitor, expected):
        if expected not in m.start_filled:
            self.open(m, "start_late", expected)

    def on_period_start(self, when, m: _Monitor, expected):
        if not m.paused and m.expected_start == expected:
            self.open(m, "start_late", expected)
            m.expected_start = None  # wait for the next start

    def on_overdue(self, when, m: _Monitor, run):
        if run["finished"] is None and not m.paused:
            self.open(m, "runtime", run["started"])

    def on_event(self, when, event: Event):
        m = self.monitors[event.monitor]
        if event.ping:
            self.ping(m, event)
        else:
            self.control(m, event)

    # --- incidents ------------------------------------------------------------------------

    def open_now(self, m: _Monitor) -> list[Incident]:
        return [i for i in self.incidents if i.monitor == m.index and i.resolved is None]

    def open(self, m: _Monitor, reason, deadline, partition="", part_of=None) -> None:
        if any(i.key == (m.index, reason, deadline) for i in self.incidents):
            return  # one incident per monitor, deadline and reason
        if m.spec.partitioning and not partition:
            partition = self.partition_about(m, deadline)
        self.incidents.append(Incident(m.index, reason, deadline, partition, part_of=part_of))

    def partition_about(self, m: _Monitor, at: datetime) -> str:
        """The partition an incident of ``m`` at ``at`` names (see the rules), walking
        firings and periods on past the end of the run when it must."""
        grace = timedelta(seconds=m.spec.grace_seconds)
        # The firing before the first one named may precede the walk (a long grace).
        for _ in range(20):
            if m.firings and m.firings[0] <= at - grace:
                break
            walked = m.walked_from
            m.walked_from -= LOOKBACK
            m.firings[:0] = firings(m.spec.cron, m.spec.timezone, m.walked_from, walked)
            m.period_ends[:0] = wall_periods(
                m.spec.partitioning, m.spec.partition_timezone, m.walked_from, walked
            )
        for _ in range(20):
            for firing in m.firings:
                if firing <= at - grace:  # its grace has passed by ``at``
                    continue
                expected = m.expected_partitions(firing)
                if expected:
                    missing = [k for k in expected if k not in m.partitions_pinged]
                    return missing[0] if missing else expected[-1]
            # Firings and periods are walked up to the same instant: walk both further.
            walked = m.firings[-1] if m.firings else at - grace - LOOKBACK
            walked = max([walked, *(end for _, end in m.period_ends[-1:])])
            until = walked + LOOKBACK
            m.firings += firings(m.spec.cron, m.spec.timezone, walked, until)
            ends_from = m.period_ends[-1][1] if m.period_ends else walked
            m.period_ends += wall_periods(
                m.spec.partitioning, m.spec.partition_timezone, ends_from, until
            )
        return ""

    def open_missed(self, m: _Monitor, deadline, partition) -> None:
        subject = m.spec.subject
        mates = {m.index} | {
            o.index for o in self.monitors if subject and o.spec.subject == subject
        }
        open_incidents = [i for i in self.incidents if i.resolved is None and i.monitor in mates]
        if m.spec.kind == "period":
            opens = deadline - timedelta(seconds=m.spec.period_seconds)
        else:
            opens = m.window(deadline)[0]
        closes = deadline + timedelta(seconds=m.spec.grace_seconds)
        failures = [
            i
            for i in open_incidents
            if i.reason == "failed"
            and (opens is None or opens < i.deadline)
            and i.deadline <= closes
        ]
        same = [
            i
            for i in open_incidents
            if i.reason == "missed" and i.deadline == deadline and i.monitor != m.index
        ]
        if failures:
            cause = failures[-1]  # the newest: incidents are kept in the order opened
        elif same:
            cause = same[0].part_of or same[0]
        else:
            cause = None
        self.open(m, "missed", deadline, partition, part_of=cause)

    def resolve(self, found: list[Incident], when) -> None:
        for incident in found:
            incident.resolved = when

    # --- pings ----------------------------------------------------------------------------

    def ping(self, m: _Monitor, event: Event) -> None:
        kind, when, spec = event.ping, event.at, m.spec
        if event.partition and spec.partitioning:
            zone = ZoneInfo(spec.partition_timezone)
            shown = (when + CLOCK_SKEW).astimezone(zone).strftime(KEY_FORMATS[spec.partitioning])
            if event.partition > shown:
                return  # from the future: refused
        if kind == "start" or m.last_start is not None:
            self.track_run(m, event)
        if kind == "start":
            m.last_start = when
            if m.paused or not spec.watches_start:
                return
            late = [i for i in self.open_now(m) if i.reason == "start_late"]
            self.resolve(late, when)
            grace = timedelta(seconds=spec.start_grace_seconds)
            if spec.kind == "period":
                m.expected_start = when + timedelta(seconds=spec.period_seconds)
                self.at(m.expected_start + grace, JUDGE, "period_start", m, m.expected_start)
            elif not late:
                pending = [
                    e
                    for e in m.start_firings
                    if e > m.watching_since and e not in m.start_filled and e + grace >= when
                ]
                if pending and when >= m.start_window_opens(pending[0]):
                    m.start_filled.add(pending[0])
        elif kind == "success":
            m.last_success = when
            if event.partition:
                m.partitions_pinged.setdefault(event.partition, when)
            if spec.kind == "period" and not m.paused:
                self.plan_period(m, when)
            self.resolve([i for i in self.open_now(m) if self.satisfies(m, i, event)], when)
        elif not m.paused:
            self.open(m, "failed", when, event.partition if spec.partitioning else "")

    def satisfies(self, m: _Monitor, incident: Incident, event: Event) -> bool:
        if incident.reason == "runtime":
            return False
        if incident.reason == "missed" and m.spec.partitioning:
            expected = m.expected_partitions(incident.deadline)
            return event.partition in expected and all(k in m.partitions_pinged for k in expected)
        return True

    def plan_period(self, m: _Monitor, since) -> None:
        m.deadline = since + timedelta(seconds=m.spec.period_seconds)
        grace = timedelta(seconds=m.spec.grace_seconds)
        self.at(m.deadline + grace, JUDGE, "period", m, m.deadline)

    def track_run(self, m: _Monitor, event: Event) -> None:
        if event.ping == "start":
            run = {"id": event.run_id, "started": event.at, "finished": None}
            m.runs.append(run)
            if m.spec.max_runtime_seconds:
                limit = timedelta(seconds=m.spec.max_runtime_seconds)
                self.at(event.at + limit, JUDGE, "overdue", m, run)
            return
        mine = [r for r in m.runs if r["id"] == event.run_id and r["finished"] is None]
        if mine:
            run = max(mine, key=lambda r: r["started"])
            run["finished"] = event.at
            self.resolve(
                [
                    i
                    for i in self.open_now(m)
                    if i.reason == "runtime" and i.deadline == run["started"]
                ],
                event.at,
            )

    # --- pauses, resumes, updates ---------------------------------------------------------

    def control(self, m: _Monitor, event: Event) -> None:
        when, action = event.at, event.action
        if action in ("pause", "deactivate"):
            if not m.paused:
                m.paused, m.paused_by_definition = True, action == "deactivate"
                m.deadline = m.expected_start = None
                self.resolve(self.open_now(m), when)
            elif action == "pause":
                m.paused_by_definition = False
        elif m.paused and (action == "resume" or (action == "activate" and m.paused_by_definition)):
            m.paused = m.paused_by_definition = False
            m.watching_since = when
            if m.spec.kind == "period":
                if m.last_success is not None:
                    self.plan_period(m, max(m.last_success, when))
                if m.last_start is not None and m.spec.watches_start:
                    m.expected_start = max(m.last_start, when) + timedelta(
                        seconds=m.spec.period_seconds
                    )
                    grace = timedelta(seconds=m.spec.start_grace_seconds)
                    self.at(m.expected_start + grace, JUDGE, "period_start", m, m.expected_start)
        # "update" (the same schedule, another name) changes nothing judged.
