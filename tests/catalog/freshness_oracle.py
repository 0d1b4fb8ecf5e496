"""A brute-force oracle for freshness: which (dataset, partition) is late, and when it
recovers, stated in the simplest terms that could be right. It imports nothing from
Tidemark (no ``schedules``, no ``catalog``): a rule written twice the same wrong way
would agree with itself.

The rule, as DESIGN.md (Flows, 3) and README.md (Concepts) state it:

1. **Wall clocks.** A cron expression names wall-clock times in its zone. Walking real
   time minute by minute, the zone's clock shows a time for the first time when it passes
   the highest time it showed so far; each matching wall time fires once, at the first
   minute the clock reaches or passes it. So a time repeated by a fall-back change fires
   at its first occurrence only, and one skipped by a spring-forward change fires at the
   end of the gap.
2. **Periods.** A period starts where the clock of the partition zone first reaches its
   start (:00 of the hour, 00:00 of the day, 00:00 on the 1st) and ends where the next one
   starts; its key is that wall time written in the partitioning's format. A period of no
   length (an hour a spring-forward change skipped) does not exist.
3. **Due.** The SLA's deadlines are its cron's firings after the SLA was set. At each
   deadline, the periods that ended after the previous firing and by this one are due.
4. **Late, once.** A due period is late when its partition is not ready as the first
   evaluation at or after deadline + grace runs: one ``dataset.late``, its
   ``late_seconds`` the evaluation's lateness. When the partition is ready later, one
   ``dataset.recovered``, at the instant it became ready. What readers see does not
   wait for evaluations: from deadline + grace on, a period not ready is late
   (``World.state``), late by the time since deadline + grace.
5. **Ready** means the partition's current revision is ready; ``PartitionModel`` keeps
   the publish rules that decide which revision is current (README, Revisions).
6. **Not from the future.** A publish, poll find or restatement of a period that starts
   more than the clock-skew allowance after now is refused, unless the dataset accepts
   future partitions; the latest ready partition is the one with the newest start among
   those whose period has started.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MINUTE = timedelta(minutes=1)
READY, FAILED, PENDING = "ready", "failed", "pending"
LATE, RECOVERED = "dataset.late", "dataset.recovered"
KEY_FORMATS = {"hourly": "%Y-%m-%dT%H", "daily": "%Y-%m-%d", "monthly": "%Y-%m"}


# --- 1. wall clocks ------------------------------------------------------------------------


@dataclass(frozen=True)
class Cron:
    """A five-field cron expression as sets of matching values (Sunday is 0)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    # Debian cron: when either day field starts with ``*`` both must match, else either.
    days_and: bool

    def matches(self, wall: datetime) -> bool:
        if (
            wall.minute not in self.minutes
            or wall.hour not in self.hours
            or wall.month not in self.months
        ):
            return False
        day, weekday = wall.day in self.days, wall.isoweekday() % 7 in self.weekdays
        return (day and weekday) if self.days_and else (day or weekday)


def parse_cron(expression: str) -> Cron:
    """Read ``minute hour day-of-month month day-of-week``: ``*``, ``n``, ``a-b``, ``*/s``,
    ``a-b/s`` and comma lists of them."""
    minute, hour, day, month, weekday = expression.split()
    return Cron(
        minutes=_values(minute, 0, 59),
        hours=_values(hour, 0, 23),
        days=_values(day, 1, 31),
        months=_values(month, 1, 12),
        weekdays=frozenset(v % 7 for v in _values(weekday, 0, 7)),
        days_and=day.startswith("*") or weekday.startswith("*"),
    )


def _values(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = (int(x) for x in span.split("-"))
        else:
            first = last = int(span)
        values.update(range(first, last + 1, int(step or 1)))
    return frozenset(values)


def first_showings(
    matches: Callable[[datetime], bool], zone: str, after: datetime, until: datetime
) -> list[tuple[datetime, datetime]]:
    """``(instant, wall time)`` of every wall time ``matches`` accepts, at the minute the
    clock of ``zone`` first shows it or passes it, for instants in ``(after, until]``
    (UTC), oldest first. Walks from a day before ``after`` so the highest time shown is
    known (a fall-back repeats at most a few hours)."""
    tz = ZoneInfo(zone)
    instant = after.replace(second=0, microsecond=0) - timedelta(days=1)
    highest = instant.astimezone(tz).replace(tzinfo=None)
    found = []
    while instant < until:
        instant += MINUTE
        wall = instant.astimezone(tz).replace(tzinfo=None)
        while highest < wall:
            highest += MINUTE
            if instant > after and matches(highest):
                found.append((instant, highest))
        highest = max(highest, wall)
    return [(i, w) for i, w in found if after < i <= until]


def firings(cron: Cron, zone: str, after: datetime, until: datetime) -> list[datetime]:
    """The cron's firings in ``(after, until]``: several skipped times fire once."""
    return sorted({instant for instant, _ in first_showings(cron.matches, zone, after, until)})


# --- 2. periods -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Period:
    key: str
    start: datetime
    end: datetime


_STARTS = {
    "hourly": lambda w: w.minute == 0,
    "daily": lambda w: w.minute == 0 and w.hour == 0,
    "monthly": lambda w: w.minute == 0 and w.hour == 0 and w.day == 1,
}


def periods(zone: str, partitioning: str, since: datetime, until: datetime) -> list[Period]:
    """Every period overlapping ``[since, until]``, oldest first."""
    if partitioning == "monthly":
        # A month starts within a day of the UTC month's start (no zone is 24 hours from
        # UTC): walk only those days.
        starts: list[tuple[datetime, datetime]] = []
        month = datetime(since.year, since.month, 1, tzinfo=UTC) - timedelta(days=31)
        while month <= until + timedelta(days=31):
            starts += first_showings(
                _STARTS[partitioning], zone, month - timedelta(days=1), month + timedelta(days=1)
            )
            month = (month + timedelta(days=32)).replace(day=1)
    else:
        step = timedelta(hours=2 if partitioning == "hourly" else 48)
        starts = first_showings(_STARTS[partitioning], zone, since - step, until + step)
    fmt = KEY_FORMATS[partitioning]
    found = [
        Period(wall.strftime(fmt), start, following)
        for (start, wall), (following, _) in itertools.pairwise(starts)
        if start < following
    ]
    return [p for p in found if p.end > since and p.start <= until]


# --- 5. partitions and the publish rules ------------------------------------------------------


@dataclass
class Revision:
    version: str
    state: str
    by_poll: bool = False
    staged: bool = False  # created in a restatement


@dataclass
class PartitionModel:
    """One partition: its revisions in the order they were created, and the current one."""

    revisions: list[Revision] = field(default_factory=list)
    current: int | None = None

    @property
    def ready(self) -> bool:
        return self.current is not None and self.revisions[self.current].state == READY

    def publish(self, version: str | None, state: str, *, by_poll: bool = False) -> int:
        """Apply a publish (``version`` None: the current revision); returns the status:
        201 something changed, 200 nothing did, 409 a ready revision cannot fail."""
        current = self.current
        if version is None or current is None:
            chosen = current
        else:
            chosen = next((i for i, r in enumerate(self.revisions) if r.version == version), None)
        if chosen is not None and current is not None and chosen < current:
            return 200  # a superseded version never rolls the partition back
        promoted = current is not None and self.revisions[current].staged
        if chosen is not None and promoted and chosen != current:
            return 200  # nor undoes a promotion
        now_current = self.revisions[current] if current is not None else None
        if (
            chosen is None
            and now_current is not None
            and now_current.state == READY
            and now_current.by_poll
            and now_current.version == ""
            and state == READY
        ):
            now_current.version = version or ""  # the late event of what the poll found
            return 200
        current_ready = now_current is not None and now_current.state == READY
        becomes_current = (chosen is None or chosen != current) and (
            state == READY or not current_ready
        )
        changed = False
        if chosen is None or self.revisions[chosen].state != state:
            if chosen is not None and self.revisions[chosen].state == READY:
                return 409
            if chosen is None:
                self.revisions.append(Revision(version or "", state, by_poll=by_poll))
                chosen = len(self.revisions) - 1
            else:
                self.revisions[chosen].state = state
                self.revisions[chosen].by_poll = by_poll
            changed = True
        if becomes_current:
            self.current = chosen
        return 201 if becomes_current or changed else 200

    def poll_saw_incomplete(self) -> None:
        """The poll saw a partition not complete yet: a pending revision, unless a producer
        (or a completed find) already has one."""
        if self.current is None:
            self.revisions.append(Revision("", PENDING, by_poll=True))
            self.current = len(self.revisions) - 1

    def promote(self, version: str) -> None:
        """A restatement of this partition, staged ready and promoted."""
        self.revisions.append(Revision(version, READY, staged=True))
        self.current = len(self.revisions) - 1


# --- 3, 4, 6: the oracle's world --------------------------------------------------------------


@dataclass(frozen=True)
class Notice:
    """A dataset.late or dataset.recovered notice, as the oracle expects it."""

    type: str
    partition: str
    deadline_at: datetime
    late_at: datetime
    at: datetime  # late: the evaluation's instant; recovered: recovered_at


@dataclass
class Incident:
    deadline_at: datetime
    late_at: datetime
    recovered: bool = False


@dataclass
class World:
    """What the oracle knows of one dataset with an SLA, from its registration at
    ``registered_at`` on: the partitions and what the next evaluation owes."""

    cron: str
    sla_zone: str
    grace: timedelta
    partitioning: str
    partition_zone: str
    accepts_future: bool
    registered_at: datetime
    until: datetime  # the last instant the example reaches
    skew: timedelta = timedelta(seconds=300)
    partitions: dict[str, PartitionModel] = field(default_factory=dict)
    incidents: dict[str, Incident] = field(default_factory=dict)
    notices: list[Notice] = field(default_factory=list)
    judged: int = 0  # deadlines judged so far

    def __post_init__(self) -> None:
        cron = parse_cron(self.cron)
        # Back far enough for two firings before registration: the last one
        # (``previous``: the first deadline's due periods ended after it) and the one
        # before it (what the freshness state judges before the first deadline).
        lookback = timedelta(days=4)
        while True:
            known = firings(cron, self.sla_zone, self.registered_at - lookback, self.until)
            if len([t for t in known if t <= self.registered_at]) >= 2:
                break
            lookback *= 2
        self.previous = max(t for t in known if t <= self.registered_at)
        self.deadlines = [t for t in known if t > self.registered_at]
        self.all_firings = known
        # Room for the backfills and future partitions the steps name.
        margin = {"hourly": 3, "daily": 8, "monthly": 100}[self.partitioning]
        self.periods = periods(
            self.partition_zone,
            self.partitioning,
            min(self.previous, self.registered_at) - timedelta(days=margin),
            self.until + timedelta(days=margin),
        )

    # Which periods are due at the k-th deadline.
    def due(self, k: int) -> list[Period]:
        previous = self.deadlines[k - 1] if k else self.previous
        return [p for p in self.periods if previous < p.end <= self.deadlines[k]]

    def period_at(self, instant: datetime, offset: int = 0) -> Period:
        """The period containing ``instant``, or ``offset`` periods from it."""
        index = next(i for i, p in enumerate(self.periods) if p.start <= instant < p.end)
        return self.periods[index + offset]

    def start_of(self, key: str) -> datetime:
        return next(p.start for p in self.periods if p.key == key)

    def accepted(self, key: str, now: datetime) -> bool:
        return self.accepts_future or self.start_of(key) <= now + self.skew

    def ready(self, key: str) -> bool:
        return key in self.partitions and self.partitions[key].ready

    def _arrived(self, key: str, was_ready: bool, now: datetime) -> None:
        incident = self.incidents.get(key)
        if not was_ready and self.ready(key) and incident and not incident.recovered:
            incident.recovered = True
            self.notices.append(Notice(RECOVERED, key, incident.deadline_at, incident.late_at, now))

    # The steps.
    def publish(self, key: str, version: str | None, state: str, now: datetime) -> int:
        """A producer's publish; returns the status the API answers."""
        if not self.accepted(key, now):
            return 422
        was_ready = self.ready(key)
        status = self.partitions.setdefault(key, PartitionModel()).publish(version, state)
        self._arrived(key, was_ready, now)
        return status

    def poll(self, lake: dict[str, bool], now: datetime) -> None:
        """A sweep of storage holding ``lake`` ({key: complete}), in key order."""
        for key, complete in sorted(lake.items()):
            if not self.accepted(key, now):
                continue
            part = self.partitions.get(key)
            if part is not None and part.current is not None:
                state = part.revisions[part.current].state
                if state in (READY, FAILED):
                    continue  # known ready; a producer's failed stands
            was_ready = self.ready(key)
            part = self.partitions.setdefault(key, PartitionModel())
            if complete:
                part.publish(None, READY, by_poll=True)
            else:
                part.poll_saw_incomplete()
            self._arrived(key, was_ready, now)

    def restate(self, key: str, version: str, now: datetime) -> int:
        """Open a restatement of ``key`` alone, stage it ready and promote it."""
        if key not in self.partitions:
            return 422  # a restatement restates existing partitions
        if not self.accepted(key, now):
            return 422
        was_ready = self.ready(key)
        self.partitions[key].promote(version)
        self._arrived(key, was_ready, now)
        return 201

    def evaluate(self, now: datetime) -> None:
        """An evaluation at ``now``: judge each deadline whose grace has passed, in order;
        then close what is ready after all."""
        while self.judged < len(self.deadlines):
            deadline = self.deadlines[self.judged]
            late_at = deadline + self.grace
            if late_at > now:
                break
            for period in self.due(self.judged):
                if not self.ready(period.key) and period.key not in self.incidents:
                    self.incidents[period.key] = Incident(deadline, late_at)
                    self.notices.append(Notice(LATE, period.key, deadline, late_at, now))
            self.judged += 1
        for key, incident in self.incidents.items():
            if self.ready(key) and not incident.recovered:
                incident.recovered = True
                self.notices.append(
                    Notice(RECOVERED, key, incident.deadline_at, incident.late_at, now)
                )

    # What readers see.
    def latest_ready(self, now: datetime) -> str | None:
        started = [
            (self.start_of(k), k)
            for k in self.partitions
            if self.ready(k) and self.start_of(k) <= now
        ]
        return max(started)[1] if started else None

    def state(self, now: datetime) -> tuple[str, set[str], datetime | None]:
        """The freshness state at ``now``, whether or not evaluations ran, the partitions
        it may name and, when late, since when (deadline plus grace):

        - late: a period due at a deadline after registration whose grace has passed by
          ``now`` is not ready, judged or not (an open incident is one of them); names
          those late the longest;
        - due: none is late; one due at a deadline after registration is not ready and
          its grace runs; names the oldest (earliest deadline, then earliest period);
        - fresh: none late or due, and the last deadline came after registration (so
          everything due at it is ready), or came before and everything due at it is
          ready anyway;
        - awaiting: the last deadline came before registration (never judged) and a
          period due at it is not ready."""
        late: dict[str, datetime] = {
            k: i.late_at for k, i in self.incidents.items() if not i.recovered
        }
        due: list[str] = []
        for k, deadline in enumerate(self.deadlines):
            if deadline > now:
                break
            for period in self.due(k):
                if self.ready(period.key):
                    continue
                if deadline + self.grace <= now:
                    late.setdefault(period.key, deadline + self.grace)
                else:
                    due.append(period.key)
        if late:
            oldest = min(late.values())
            return "late", {k for k, at in late.items() if at == oldest}, oldest
        if due:
            return "due", {due[0]}, None
        last = max(t for t in self.all_firings if t <= now)
        if last > self.registered_at:
            return "fresh", set(), None
        before = max(t for t in self.all_firings if t < last)
        missing = [p.key for p in self.periods if before < p.end <= last and not self.ready(p.key)]
        return ("awaiting" if missing else "fresh"), set(), None
