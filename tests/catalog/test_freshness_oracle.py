"""Freshness proven against a brute-force oracle (DESIGN.md, principle 10): over random SLAs
(crons, zones with DST, grace), partitionings and partition zones, and random sequences of
publishes (ready, failed, new versions, backfills, future partitions), poll finds,
restatements and evaluations at chosen instants, the real system's ``dataset.late`` and
``dataset.recovered`` notifications are the oracle's (``freshness_oracle``), each once;
each step answers what the oracle says it answers; after each evaluation the latest
ready partition is the oracle's; and at every step and at instants read between
steps (at deadline plus grace and a second before, before the next step, with beat
stopped for a stretch of steps) the state the API, the badge and the pages read, its
partition and ``late_seconds``, are the oracle's whether or not an evaluation ran.

The system is driven through its real entry points on PostgreSQL: the publish service
(both of its writers), the poll sweeping a real ``file://`` store, the restatement
services and the ``evaluate_freshness`` task with the clock moved by time-machine. Each
example runs in a transaction rolled back at its end.

``TIDEMARK_ORACLE_EXAMPLES`` sets the number of examples (a long run: thousands).
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.db import transaction
from django.test import override_settings
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

from catalog import freshness_state, polling, restatements, selectors, tasks
from catalog.actors import Actor
from catalog.models import Dataset, Notification
from catalog.services import publish_targets
from catalog.services.datasets import dataset_register
from catalog.services.publishing import readiness_publish
from problems import Problem
from schedules import next_deadline
from tests.catalog import freshness_oracle as oracle
from tests.schedules.strategies import oracle_examples

EXAMPLES = oracle_examples(40)
# An example takes about a second; a long run gets the time it needs.
pytestmark = [pytest.mark.django_db, pytest.mark.timeout(max(300, 10 * EXAMPLES))]


DST_ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # shifts by 30 minutes
    "Australia/Sydney",  # southern hemisphere
    "America/Santiago",  # changes at midnight
    "America/Havana",  # changes at midnight
    "Pacific/Chatham",  # +12:45 / +13:45
    "America/St_Johns",  # -03:30 / -02:30
    "Antarctica/Troll",  # shifts by two hours
]
STEADY_ZONES = ["UTC", "Asia/Kolkata", "Asia/Kathmandu", "Pacific/Kiritimati"]
ZONES = DST_ZONES + STEADY_ZONES
SKEW = timedelta(seconds=300)  # the default clock-skew allowance


@functools.cache
def every_cron_shape_follows_the_wall_clock_rule() -> bool:
    """Whether ``schedules`` fires every cron shape by the oracle's one DST rule. cronsim
    fires an expression whose minute or hour field starts with ``*`` at every real
    instant whose wall clock matches (both passes of a repeated hour, none of a skipped
    one); until ``schedules`` reads such crons by the one rule, they are drawn only in
    zones without DST. (Deadlines themselves are proven in tests/schedules.)"""
    after = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, before the fall-back
    return next_deadline("*/30 * * * *", "Europe/Berlin", after) == datetime(
        2026, 10, 25, 2, 0, tzinfo=UTC
    )


# --- strategies -----------------------------------------------------------------------------


def _field(values: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    single = values.map(str)
    span = st.tuples(values, values).map(sorted).map(lambda ab: f"{ab[0]}-{ab[1]}")
    listed = st.lists(values, min_size=2, max_size=3, unique=True).map(
        lambda v: ",".join(map(str, sorted(v)))
    )
    return st.one_of(single, single, listed, span)


@st.composite
def crons(draw, *, steady_zone: bool, daily: bool) -> str:
    """Crons firing at most every 15 minutes (an evaluation judges at most 1,000
    deadlines): fixed times, lists and ranges, weekdays and days of the month (unless
    ``daily``: every day, so a deadline makes at most a day of hourly periods due);
    minute or hour fields starting with ``*`` where the zone (or ``schedules``) allows
    them."""
    stars = steady_zone or every_cron_shape_follows_the_wall_clock_rule()
    minute = draw(
        st.one_of(
            _field(st.integers(0, 59)),
            st.sampled_from(["*/15", "*/20", "*/30", "10-50/20"] if stars else ["0"]),
        )
    )
    if minute.startswith("*") or "/" in minute:
        hour = draw(st.one_of(_field(st.integers(0, 23)), st.sampled_from(["*/6", "*/8"])))
    else:
        hour = draw(
            st.one_of(
                _field(st.integers(0, 23)),
                st.sampled_from(["*", "*/2", "*/3", "*/6"] if stars else ["6"]),
            )
        )
    if daily:
        return f"{minute} {hour} * * *"
    day = draw(st.sampled_from(["*"] * 8 + ["1", "1-7", "*/2", "15", "28", "1,15"]))
    weekday = draw(st.sampled_from(["*"] * 4 + ["1-5", "0,6", "3", "1"]))
    return f"{minute} {hour} {day} * {weekday}"


@functools.cache
def zone_changes(zone: str) -> tuple[datetime, ...]:
    """The instants (UTC, to the minute) at which ``zone``'s UTC offset changed or will
    change in 2025-2027."""
    tz = ZoneInfo(zone)
    found = []
    step = timedelta(hours=6)
    at = datetime(2025, 1, 1, tzinfo=UTC)
    while at.year < 2028:
        if at.astimezone(tz).utcoffset() != (at + step).astimezone(tz).utcoffset():
            low, high = at, at + step
            while high - low > timedelta(minutes=1):
                mid = low + (high - low) / 2
                if mid.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = mid
                else:
                    high = mid
            change = high.replace(second=0, microsecond=0)  # changes fall on whole minutes
            if change.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                change += timedelta(minutes=1)
            found.append(change)
        at += step
    return tuple(found)


@dataclass(frozen=True)
class Publish:
    offset: int  # periods from the one containing the step's instant (negative: a backfill)
    state: str
    version: str | None
    idempotent: bool  # with an Idempotency-Key: the transactional writer


@dataclass(frozen=True)
class PollSees:
    offset: int
    complete: bool


@dataclass(frozen=True)
class Restate:
    offset: int


@dataclass(frozen=True)
class Evaluate:
    pass


BACKFILL = {"hourly": 48, "daily": 6, "monthly": 2}


def actions(partitioning: str) -> st.SearchStrategy:
    offsets = st.one_of(
        st.integers(-3, 0),
        st.integers(-3, 0),
        st.integers(1, 2),
        st.integers(-BACKFILL[partitioning], 0),
    )
    return st.one_of(
        st.builds(
            Publish,
            offset=offsets,
            state=st.sampled_from([oracle.READY, oracle.READY, oracle.READY, oracle.FAILED]),
            version=st.sampled_from([None, None, "v1", "v2", "v3"]),
            idempotent=st.booleans(),
        ),
        st.builds(
            Publish,
            offset=offsets,
            state=st.just(oracle.READY),
            version=st.none(),
            idempotent=st.just(False),
        ),
        st.builds(PollSees, offset=offsets, complete=st.booleans()),
        st.builds(Restate, offset=offsets),
        st.just(Evaluate()),
        st.just(Evaluate()),
    )


GAPS = st.one_of(st.integers(1, 59), st.integers(60, 6 * 60), st.integers(6 * 60, 36 * 60)).map(
    lambda minutes: timedelta(minutes=minutes)
)
MAX_SPAN = timedelta(days=5)


@dataclass(frozen=True)
class Scenario:
    partitioning: str
    partition_zone: str
    cron: str
    sla_zone: str
    grace: timedelta
    accepts_future: bool
    registered_at: datetime
    steps: tuple[tuple[datetime, object], ...]
    until: datetime  # the last evaluation


@st.composite
def scenarios(draw) -> Scenario:
    partitioning = draw(st.sampled_from(["hourly", "daily", "daily", "monthly"]))
    partition_zone = draw(st.sampled_from(ZONES))
    sla_zone = draw(st.one_of(st.just(partition_zone), st.sampled_from(ZONES)))
    cron = draw(crons(steady_zone=sla_zone in STEADY_ZONES, daily=partitioning == "hourly"))
    grace = timedelta(
        seconds=draw(
            st.one_of(st.sampled_from([0, 300, 1800, 7200, 86400]), st.integers(0, 2 * 86400))
        )
    )
    # Start a few days before a DST change of either zone or a month's end.
    anchors = zone_changes(partition_zone) + zone_changes(sla_zone)
    month_end = datetime(draw(st.integers(2025, 2027)), draw(st.integers(1, 12)), 1, tzinfo=UTC)
    anchor = draw(st.sampled_from(anchors)) if anchors and draw(st.booleans()) else month_end
    registered_at = anchor - timedelta(
        minutes=draw(st.integers(0, 4 * 24 * 60)), seconds=draw(st.integers(0, 59))
    )
    steps, at = [], registered_at
    drawn = draw(st.lists(st.tuples(GAPS, actions(partitioning)), min_size=2, max_size=14))
    # Beat (or the worker) stopped for a stretch of the steps: no evaluation in it.
    stopped = draw(st.one_of(st.none(), st.tuples(st.integers(0, 13), st.integers(2, 14))))
    for number, (gap, action) in enumerate(drawn):
        at += gap
        if at - registered_at > MAX_SPAN:
            break
        beat_down = stopped and stopped[0] <= number < stopped[0] + stopped[1]
        if beat_down and isinstance(action, Evaluate):
            continue
        steps.append((at, action))
    until = at + draw(GAPS) + grace
    return Scenario(
        partitioning,
        partition_zone,
        cron,
        sla_zone,
        grace,
        draw(st.booleans()),
        registered_at,
        tuple(steps),
        until,
    )


# --- driving the real system --------------------------------------------------------------


NAMESPACE, NAME = "s3://lake", "raw/orders"


def _status(call) -> int:
    try:
        return call()
    except Problem as problem:
        return problem.status


class Driver:
    """The real system for one scenario: a dataset with the scenario's SLA, registered at
    its instant, polled from ``lake`` (a manifest dataset: what the poll sees may be
    incomplete) and published by ``actor``."""

    def __init__(self, scenario: Scenario, actor: Actor, lake: Path) -> None:
        self.actor, self.lake = actor, lake
        with time_machine.travel(scenario.registered_at, tick=False):
            self.dataset = dataset_register(
                actor=actor,
                namespace=NAMESPACE,
                name=NAME,
                partitioning=scenario.partitioning,
                partition_timezone=scenario.partition_zone,
                sla_cron=scenario.cron,
                sla_timezone=scenario.sla_zone,
                sla_grace_seconds=int(scenario.grace.total_seconds()),
                accepts_future_partitions=scenario.accepts_future,
                completion_signal=Dataset.CompletionSignal.MANIFEST,
                storage_source="lake",
                location_template="orders/dt={partition}/",
            )
        self.restatements = 0

    def publish(self, key: str, step: Publish, now: datetime, number: int) -> int:
        return _status(
            lambda: (
                readiness_publish(
                    actor=self.actor,
                    namespace=NAMESPACE,
                    name=NAME,
                    partition=key,
                    version=step.version,
                    state=step.state,
                    idempotency_key=f"step-{number}" if step.idempotent else None,
                    now=now,
                ).status_code
            )
        )

    def poll(self, key: str, complete: bool, now: datetime) -> None:
        folder = self.lake / "orders" / f"dt={key}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "_manifest.json").write_text(json.dumps({"expected_files": 1}))
        if complete:
            (folder / "part-0.parquet").write_bytes(b"x")
        polling.sweep_dataset(Dataset.objects.get(pk=self.dataset.pk), now=now, full=True)

    def restate(self, key: str, now: datetime) -> int:
        self.restatements += 1
        version = f"r{self.restatements}"

        def restate() -> int:
            opened = restatements.restatement_open(
                actor=self.actor,
                dataset=self.dataset,
                version=version,
                first_partition=key,
                last_partition=key,
                now=now,
            )
            readiness_publish(
                actor=self.actor,
                namespace=NAMESPACE,
                name=NAME,
                partition=key,
                manifest={"expected_files": 1},
                restatement=opened.pk,
                now=now,
            )
            restatements.restatement_promote(actor=self.actor, restatement=opened, now=now)
            return 201

        return _status(restate)

    def evaluate(self) -> None:
        tasks.evaluate_freshness()  # reads the clock time-machine holds

    def latest_ready(self, now: datetime) -> str | None:
        latest = selectors.partition_latest_ready(dataset=self.dataset, now=now)
        return latest.key if latest is not None else None

    def freshness(self, now: datetime) -> freshness_state.Freshness:
        return freshness_state.dataset_freshness(Dataset.objects.get(pk=self.dataset.pk), now=now)

    def notices(self) -> list[oracle.Notice]:
        found = []
        for row in Notification.objects.filter(
            type__in=[oracle.LATE, oracle.RECOVERED], dataset=self.dataset
        ):
            data = row.payload["data"]
            late_at = datetime.fromisoformat(data["late_at"])
            at = (
                late_at + timedelta(seconds=data["late_seconds"])
                if row.type == oracle.LATE
                else datetime.fromisoformat(data["recovered_at"])
            )
            found.append(
                oracle.Notice(
                    row.type,
                    data["partition"],
                    datetime.fromisoformat(data["deadline_at"]),
                    late_at,
                    at,
                )
            )
        return found


READS_BETWEEN_STEPS = 6


def read_instants(world: oracle.World, now: datetime, following: datetime) -> list[datetime]:
    """Instants to read the freshness state at, from step ``now`` until the next step
    ``following`` (nothing changes in between, and no evaluation runs): ``now``, the
    boundaries of the first and last deadlines whose grace ends in between (at deadline
    plus grace, and a second before), the deadline itself, and just before the next
    step. Evaluations skipped for days make these instants the ones where an answer
    that waits for the evaluation is wrong."""
    ends = [d for d in world.deadlines if now < d + world.grace < following]
    found = {now, max(now, following - timedelta(seconds=1))}
    for deadline in {*ends[:1], *ends[-1:]}:
        late_at = deadline + world.grace
        found |= {late_at, late_at - timedelta(seconds=1), max(now, deadline)}
    return sorted(found)[:READS_BETWEEN_STEPS]


def check_state(world: oracle.World, system: Driver, instant: datetime) -> None:
    """The freshness the API and the pages read at ``instant`` is the oracle's: state,
    the partition named, its deadline and how late (``late_seconds``), the latest ready
    partition; and the list pages' batch reader says the same as the API."""
    state, named, late_at = world.state(instant)
    judged = system.freshness(instant)
    note(f"read at {instant.isoformat()}: {judged.state} {judged.partition_due}")
    assert judged.latest_ready == world.latest_ready(instant), instant
    assert judged.state == state, (instant, state, named, judged)
    assert judged.partition_due in (named or {None}), (instant, named, judged)
    if late_at is not None:
        assert judged.deadline_at == late_at - world.grace, (instant, judged)
        assert judged.late_seconds == int((instant - late_at).total_seconds()), instant
    dataset = Dataset.objects.get(pk=system.dataset.pk)
    listed = freshness_state.datasets_freshness(
        [dataset], now=instant, latest={dataset.pk: judged.latest_ready}
    )
    assert listed[dataset.pk] == judged, instant


def run(scenario: Scenario, actor: Actor, lake: Path) -> None:
    """Play ``scenario`` on the oracle and the real system side by side, asserting they
    agree at every step and on every notice."""
    world = oracle.World(
        cron=scenario.cron,
        sla_zone=scenario.sla_zone,
        grace=scenario.grace,
        partitioning=scenario.partitioning,
        partition_zone=scenario.partition_zone,
        accepts_future=scenario.accepts_future,
        registered_at=scenario.registered_at,
        until=scenario.until,
        skew=SKEW,
    )
    system = Driver(scenario, actor, lake)
    seen: dict[str, bool] = {}  # the lake: key -> complete
    steps = [*scenario.steps, (scenario.until, Evaluate())]
    for number, (now, step) in enumerate(steps):
        with time_machine.travel(now, tick=False):
            if isinstance(step, Evaluate):
                world.evaluate(now)
                system.evaluate()
                note(f"{now.isoformat()} evaluate")
                assert system.latest_ready(now) == world.latest_ready(now), step
            else:
                key = world.period_at(now, step.offset).key
                note(f"{now.isoformat()} {step} on {key}")
                if isinstance(step, Publish):
                    expected = world.publish(key, step.version, step.state, now)
                    assert system.publish(key, step, now, number) == expected, (now, step, key)
                elif isinstance(step, PollSees):
                    seen[key] = seen.get(key, False) or step.complete
                    world.poll(seen, now)
                    system.poll(key, seen[key], now)
                else:
                    expected = world.restate(key, f"r{system.restatements + 1}", now)
                    assert system.restate(key, now) == expected, (now, step, key)
        following = steps[number + 1][0] if number + 1 < len(steps) else now
        for instant in read_instants(world, now, following):
            check_state(world, system, instant)
    expected, got = Counter(world.notices), Counter(system.notices())
    for kind in (oracle.LATE, oracle.RECOVERED):
        event(f"{kind}: {min(sum(n.type == kind for n in world.notices), 5)}")
    event(f"steps: {len(steps)}")
    assert got == expected, {"missing": expected - got, "unexpected": got - expected}


@pytest.fixture
def actor(db):
    from tests.catalog.factories import TeamFactory

    return Actor(team=TeamFactory(slug="orders"), username="oracle")


def _next_hour(step) -> Scenario:
    """Hourly Berlin partitions at 00:02 UTC on New Year's Day 2025: ``step`` names the
    next hour's partition, which starts in 58 minutes."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    return Scenario(
        partitioning="hourly",
        partition_zone="Europe/Berlin",
        cron="0 0 * * *",
        sla_zone="Europe/Berlin",
        grace=timedelta(0),
        accepts_future=False,
        registered_at=start,
        steps=(
            (start + timedelta(minutes=1), Evaluate()),
            (start + timedelta(minutes=2), step),
        ),
        until=start + timedelta(minutes=3),
    )


# What the oracle found on the code before partitions from the future were refused, shrunk:
# the publish of a partition that starts in an hour was 201, and the poll's find of one
# became the latest ready partition.
# Found by the oracle: a minute cron after 22 hours without evaluations is more deadlines
# behind than one evaluation judges; the pass stopped there and told the last late
# partition a tick later.
@example(
    scenario=Scenario(
        partitioning="hourly",
        partition_zone="Europe/Berlin",
        cron="0-45 * * * *",
        sla_zone="Europe/Berlin",
        grace=timedelta(0),
        accepts_future=False,
        registered_at=datetime(2025, 1, 1, 0, 0, tzinfo=UTC),
        steps=(
            (
                datetime(2025, 1, 1, 0, 1, tzinfo=UTC),
                Publish(offset=0, state="ready", version=None, idempotent=False),
            ),
            (
                datetime(2025, 1, 1, 0, 59, tzinfo=UTC),
                Publish(offset=0, state="ready", version=None, idempotent=False),
            ),
        ),
        until=datetime(2025, 1, 1, 22, 0, tzinfo=UTC),
    )
)
@example(scenario=_next_hour(Publish(offset=1, state="ready", version=None, idempotent=False)))
@example(scenario=_next_hour(PollSees(offset=1, complete=True)))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_late_and_recovered_notices_are_the_oracles(actor, scenario):
    note(repr(scenario))
    publish_targets._publish_targets.clear()
    with tempfile.TemporaryDirectory(prefix="tidemark-oracle-lake-") as root:
        lake = Path(root)
        with (
            override_settings(TIDEMARK_STORAGE_SOURCES={"lake": {"url": f"file://{lake}"}}),
            transaction.atomic(),
        ):
            run(scenario, actor, lake)
            transaction.set_rollback(True)


# --- the oracle itself, on facts worked out by hand ------------------------------------------


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "zone", "after", "until", "expected"),
    [
        # 02:30 does not occur in Berlin on 2026-03-29: it fires at the end of the gap.
        ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28), utc(2026, 3, 30), [1.5, 25]),
        # 01:30 occurs twice in New York on 2026-11-01: the first one fires.
        ("30 1 * * *", "America/New_York", utc(2026, 10, 31), utc(2026, 11, 2), [5.5, 29.5]),
        # Weekdays only: Friday, then Monday.
        ("0 8 * * 1-5", "UTC", utc(2026, 11, 27), utc(2026, 12, 1), [8, 80]),
    ],
)
def test_the_oracles_cron_fires_by_the_wall_clock(cron, zone, after, until, expected):
    fired = oracle.firings(oracle.parse_cron(cron), zone, after, until)
    assert fired == [after + timedelta(hours=h) for h in expected]


def test_the_oracles_periods_follow_the_wall_clock_across_dst():
    fall_back = oracle.periods(
        "Europe/Berlin", "hourly", utc(2026, 10, 24, 23), utc(2026, 10, 25, 2)
    )
    assert [(p.key, p.start.hour, p.end.hour) for p in fall_back] == [
        ("2026-10-25T01", 23, 0),
        ("2026-10-25T02", 0, 2),  # the repeated hour belongs to one key
        ("2026-10-25T03", 2, 3),
    ]
    spring = oracle.periods("Europe/Berlin", "hourly", utc(2026, 3, 29, 0), utc(2026, 3, 29, 1))
    assert [p.key for p in spring] == ["2026-03-29T01", "2026-03-29T03"]  # no 02
    santiago = oracle.periods("America/Santiago", "daily", utc(2026, 4, 5, 12), utc(2026, 4, 5, 12))
    assert [(p.key, p.start, p.end) for p in santiago] == [
        ("2026-04-05", utc(2026, 4, 5, 4), utc(2026, 4, 6, 4)),  # 25 hours from 00:00 -04
    ]


def test_the_oracle_tells_a_late_partition_once_and_its_recovery_at_arrival():
    world = oracle.World(
        cron="0 6 * * *",
        sla_zone="UTC",
        grace=timedelta(minutes=30),
        partitioning="daily",
        partition_zone="UTC",
        accepts_future=False,
        registered_at=utc(2026, 11, 28, 12),
        until=utc(2026, 12, 1),
    )
    assert world.publish("2026-12-01", None, oracle.READY, utc(2026, 11, 29, 8)) == 422
    world.evaluate(utc(2026, 11, 29, 6, 29))
    assert world.notices == []
    world.evaluate(utc(2026, 11, 29, 7))
    world.evaluate(utc(2026, 11, 29, 8))
    assert world.publish("2026-11-28", None, oracle.READY, utc(2026, 11, 29, 9)) == 201
    deadline, late_at = utc(2026, 11, 29, 6), utc(2026, 11, 29, 6, 30)
    assert world.notices == [
        oracle.Notice(oracle.LATE, "2026-11-28", deadline, late_at, utc(2026, 11, 29, 7)),
        oracle.Notice(oracle.RECOVERED, "2026-11-28", deadline, late_at, utc(2026, 11, 29, 9)),
    ]
