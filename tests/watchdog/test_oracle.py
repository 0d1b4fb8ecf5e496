"""The watchdog's judgement against the brute-force oracle (``oracle.py``).

Random monitors (period and deadline, partitions, grace, start and run limits, linked
data and pipeline monitors) in random zones around their DST changes get random pings,
bursts, pings exactly at deadlines and tolerances, pauses, resumes and definition
updates, through the watchdog's real entry points (``pings.record``, the monitor
services, ``evaluation.evaluate_due``) on the real database. The loop is run at every
instant something comes due. The incidents it opens (monitor, reason, deadline,
partition), when each resolves, and which of them page together must be the oracle's.

``TIDEMARK_ORACLE_EXAMPLES`` sets the number of examples (a long run: thousands).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta

import hypothesis
import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from schedules import next_deadline, period_containing, previous_deadline
from tests.schedules.strategies import (
    cron_expressions,
    oracle_examples,
    transitions,
)
from watchdog import db, evaluation, monitors, pings
from watchdog.models import Channel, Incident, Monitor, Page, Run

from . import oracle
from .oracle import Event, Spec

pytestmark = [pytest.mark.django_db(databases=["default", "watchdog"])]

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Australia/Sydney",
    "America/Santiago",
    "Pacific/Chatham",
    "Asia/Kolkata",
]
CRONS = cron_expressions(last_day=28, months=False)
SECOND = timedelta(seconds=1)
PINGS_WITH_RUNS = {"success", "exit", "fail", "start"}
MOST_FIRINGS = 40


def utc(*args):
    return datetime(*args, tzinfo=UTC)


# --- scenarios -------------------------------------------------------------------------


@st.composite
def scenarios(draw):
    """``(specs, events, start, end)``: one or two monitors created at ``start``, and what
    happens to them until ``end``, in the order received."""
    zone = draw(st.sampled_from(ZONES))
    year = draw(st.sampled_from([2026, 2027]))
    changes = transitions(zone, year)
    anchor = (
        draw(st.sampled_from(changes))
        if changes
        else utc(year, 1, 1) + timedelta(days=draw(st.integers(0, 360)))
    )
    shape = draw(st.sampled_from(["deadline", "deadline", "period", "pair"]))
    grace = draw(
        st.one_of(
            st.sampled_from([0, 30, 59, 60, 61, 300, 3600, 7200]),
            st.integers(0, 2 * 86400),
        )
    )
    specs: list[Spec] = []
    if shape == "period":
        period = draw(
            st.one_of(st.sampled_from([60, 90, 300, 3600, 86400]), st.integers(60, 3 * 86400))
        )
        specs.append(Spec(kind="period", period_seconds=period, grace_seconds=grace))
        start = anchor - timedelta(seconds=draw(st.integers(0, 3 * period)))
    else:
        cron = draw(CRONS)
        before = draw(st.integers(0, 3))
        start = anchor
        for _ in range(before + 1):
            start = previous_deadline(cron, zone, start - SECOND)
        start -= timedelta(seconds=draw(st.integers(0, 3600)))
        partitioning = draw(st.sampled_from(["", "", "daily", "hourly", "monthly"]))
        base = Spec(kind="deadline", cron=cron, timezone=zone, grace_seconds=grace)
        if shape == "pair":
            specs.append(
                replace(
                    base,
                    partitioning=partitioning or "daily",
                    partition_timezone=draw(st.sampled_from([zone, "UTC"])),
                    external_id="tidemark:dataset:7:data",
                )
            )
            specs.append(replace(base, external_id="tidemark:dataset:7:pipeline"))
        else:
            specs.append(
                replace(
                    base,
                    partitioning=partitioning,
                    partition_timezone=draw(st.sampled_from([zone, "UTC"])),
                )
            )
    limits = []
    for spec in specs:
        if draw(st.integers(0, 2)) == 0:
            spec = replace(spec, max_runtime_seconds=draw(st.sampled_from([1, 60, 600, 5400])))
        if draw(st.integers(0, 2)) == 0:
            start_grace = draw(st.sampled_from([0, 60, 900, 4 * 3600]))
            if spec.kind == "deadline":
                spec = replace(spec, start_cron=draw(CRONS), start_grace_seconds=start_grace)
            else:
                spec = replace(spec, start_grace_seconds=start_grace)
        limits.append(spec)
    specs = [replace(s, external_id=s.external_id or f"monitor-{i}") for i, s in enumerate(limits)]

    # The horizon: a few deadlines past the DST change.
    spans = []
    for spec in specs:
        if spec.kind == "period":
            spans.append(timedelta(seconds=spec.period_seconds * draw(st.integers(2, 6))))
        else:
            at = start
            for _ in range(draw(st.integers(2, 7))):
                at = next_deadline(spec.cron, spec.timezone, at)
            spans.append(min(at - start, timedelta(days=20)))
    end = start + max(spans) + timedelta(seconds=grace + draw(st.integers(0, 7200)))
    # Bounded work: at most MOST_FIRINGS firings of any cron judged (a long grace on an
    # every-minute schedule would otherwise mean thousands); start limits firing more
    # often than that are dropped.
    for spec in specs:
        if spec.cron:
            end = min(end, _nth_firing(spec.cron, spec.timezone, start, MOST_FIRINGS))
    specs = [
        replace(spec, start_cron="", start_grace_seconds=None)
        if spec.start_cron
        and _nth_firing(spec.start_cron, spec.timezone, start, MOST_FIRINGS) < end
        else spec
        for spec in specs
    ]

    marks = _marks(specs, start, end)
    events = draw(st.lists(_event(specs, marks, start, end), max_size=30))
    events.sort(key=lambda e: (e.at, e.ping is None))  # stable: bursts keep their order
    return specs, events, start, end


def _nth_firing(cron: str, zone: str, start: datetime, n: int) -> datetime:
    at = start
    for _ in range(n):
        at = next_deadline(cron, zone, at)
    return at


def _marks(specs: list[Spec], start: datetime, end: datetime) -> list[datetime]:
    """Instants worth pinging at or near: deadlines, their grace and tolerance ends."""
    marks = [start]
    for spec in specs:
        grace = timedelta(seconds=spec.grace_seconds)
        for cron in (spec.cron, spec.start_cron):
            if not cron:
                continue
            at = start
            for _ in range(12):
                at = next_deadline(cron, spec.timezone, at)
                if at > end:
                    break
                marks += [at, at + grace, at - timedelta(seconds=60)]
    return marks


@st.composite
def _event(draw, specs, marks, start, end):
    monitor = draw(st.integers(0, len(specs) - 1))
    spec = specs[monitor]
    if draw(st.booleans()):
        at = draw(st.sampled_from(marks)) + timedelta(
            seconds=draw(st.sampled_from([-61, -60, -59, -1, 0, 0, 1, 59, 60, 61]))
        )
    elif spec.kind == "period" and draw(st.booleans()):
        at = start + timedelta(
            seconds=spec.period_seconds * draw(st.integers(0, 6))
            + draw(st.sampled_from([-1, 0, 1, spec.grace_seconds, spec.grace_seconds + 1]))
        )
    else:
        at = start + timedelta(seconds=draw(st.integers(0, int((end - start).total_seconds()))))
    at = min(max(at, start), end)
    actions = ["success"] * 6 + ["exit", "exit", "fail", "start", "start"]
    actions += ["pause", "resume", "update", "deactivate", "activate"]
    action = draw(st.sampled_from(actions))
    partition = ""
    if spec.partitioning and action in ("success", "exit"):
        near = draw(st.sampled_from(marks)) - timedelta(seconds=draw(st.integers(1, 3 * 86400)))
        partition = period_containing(near, spec.partitioning, spec.partition_timezone).key
    return Event(
        at=at,
        monitor=monitor,
        action=action,
        exit_status=draw(st.sampled_from([0, 0, 1, 255])) if action == "exit" else None,
        partition=partition,
        run_id=draw(st.sampled_from(["", "", "a", "b"])) if action in PINGS_WITH_RUNS else "",
    )


# --- the real watchdog ---------------------------------------------------------------------


def definition(spec: Spec) -> dict:
    """The monitor fields of ``spec``."""
    return asdict(spec)


def next_due() -> datetime | None:
    """The earliest instant the loop has something to judge."""
    times = [
        *Monitor.objects.exclude(check_at=None).values_list("check_at", flat=True),
        *Monitor.objects.exclude(start_check_at=None).values_list("start_check_at", flat=True),
        *Run.objects.exclude(overdue_at=None).values_list("overdue_at", flat=True),
    ]
    return min(times, default=None)


def run_loop_until(until: datetime, *, inclusive: bool) -> None:
    """Run the loop at every instant something comes due before ``until`` (and at it,
    when ``inclusive``), as a loop that never sleeps would."""
    while (due := next_due()) is not None and (due < until or (inclusive and due == until)):
        evaluation.evaluate_due(now=due)


def drive(specs: list[Spec], events: list[Event], start: datetime, end: datetime):
    """Create the monitors at ``start``, feed ``events``, run the loop until ``end``;
    returns the monitors and the incidents opened."""
    channel = Channel.objects.create(name="on-call", kind=Channel.Kind.PAGERDUTY, target="R" * 32)
    made = [
        monitors.monitor_create(channels=[channel], now=start, name=f"m{i}", **definition(spec))
        for i, spec in enumerate(specs)
    ]
    versions = iter(range(1, 10_000))
    for event in events:
        run_loop_until(event.at, inclusive=event.ping is None)
        monitor = made[event.monitor]
        if event.ping:
            try:
                pings.record(
                    ping_key=monitor.ping_key,
                    ping=pings.PingInput(
                        kind="success" if event.action == "exit" else event.action,
                        method="POST",
                        exit_status=event.exit_status,
                        partition=event.partition,
                        run_id=event.run_id,
                    ),
                    now=event.at,
                )
            except pings.PingRejected as refused:
                if refused.extra.get("rule") != pings.FUTURE_RULE:
                    raise  # the oracle knows only one refusal: a partition from the future
        elif event.action == "pause":
            monitors.monitor_pause(monitor, now=event.at, by="operator")
        elif event.action == "resume":
            monitors.monitor_resume(monitor, now=event.at)
        elif event.action == "update":
            monitors.monitor_update(monitor, now=event.at, name=f"m{event.monitor} renamed")
        else:
            fields = definition(specs[event.monitor])
            monitors.monitor_upsert_external(
                external_id=fields.pop("external_id"),
                version=f"{next(versions):06d}",
                channels=[channel],
                now=event.at,
                active=event.action == "activate",
                by="API token catalog",
                name=f"m{event.monitor}",
                **fields,
            )
    run_loop_until(end, inclusive=True)
    return made


def observed(made: list[Monitor]):
    index = {m.pk: i for i, m in enumerate(made)}
    rows = list(Incident.objects.all())
    keys = {row.pk: (index[row.monitor_id], row.reason, row.deadline_at) for row in rows}
    incidents = {(*keys[row.pk], row.partition, row.resolved_at) for row in rows}
    families: dict = {}
    for row in rows:
        families.setdefault(row.part_of_id or row.pk, set()).add(keys[row.pk])
    # One page per cause: a trigger for each incident paging for itself, none for its parts.
    triggers = {
        keys[row.pk]: Page.objects.filter(incident=row, action="trigger").count() for row in rows
    }
    paging = {keys[row.pk] for row in rows if row.part_of_id is None}
    assert triggers == {key: int(key in paging) for key in keys.values()}
    return incidents, {frozenset(f) for f in families.values()}


def expected(specs, events, start, end):
    found = oracle.judge(specs, events, start=start, end=end, lookback=lookback(specs, start))
    incidents = {(i.monitor, i.reason, i.deadline, i.partition, i.resolved) for i in found}
    families: dict = {}
    for i in found:
        families.setdefault(id(i.part_of or i), set()).add(i.key)
    return incidents, {frozenset(f) for f in families.values()}


def lookback(specs: list[Spec], start: datetime) -> timedelta:
    """Far enough back for the firing before each monitor's first deadline."""
    furthest = timedelta(days=2)
    for spec in specs:
        for cron in (spec.cron, spec.start_cron):
            if cron:
                furthest = max(
                    furthest,
                    start - previous_deadline(cron, spec.timezone, start) + timedelta(days=2),
                )
    return furthest


def check(scenario):
    specs, events, start, end = scenario
    with transaction.atomic(using=db.alias()):
        made = drive(specs, events, start, end)
        got = observed(made)
        transaction.set_rollback(True, using=db.alias())
    want = expected(specs, events, start, end)
    assert got[0] == want[0], (sorted(got[0] - want[0]), sorted(want[0] - got[0]))
    assert got[1] == want[1]
    for reason in sorted({i[1] for i in want[0]}):
        hypothesis.event(f"opens {reason}")
    hypothesis.event(f"{len(want[0])} incidents")
    if any(len(f) > 1 for f in want[1]):
        hypothesis.event("several incidents on one page")


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.WATCHDOG_PING_RATE_PER_MINUTE = 1_000_000


@settings(
    max_examples=oracle_examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
# Found by the oracle: one ping counted for two deadlines. A ping a minute before a
# deadline met it, and the next deadline's window (opening 60 s before this one) took it
# again, so a skipped run was never paged.
@example(
    scenario=(
        [Spec(kind="deadline", cron="* * * * *", max_runtime_seconds=1, external_id="m")],
        [Event(at=utc(2025, 12, 31, 23, 59, 1), monitor=0, action="success")],
        utc(2025, 12, 31, 23, 59),
        utc(2026, 1, 1, 0, 1),
    )
)
# The case: a daily job that pings 30 s before its deadline skips one run.
@example(
    scenario=(
        [Spec(kind="deadline", cron="0 6 * * *", timezone="Europe/Berlin", grace_seconds=600)],
        [
            Event(at=utc(2026, 11, 2, 4, 59, 30), monitor=0, action="success"),
            Event(at=utc(2026, 11, 4, 4, 59, 30), monitor=0, action="success"),
        ],
        utc(2026, 11, 1, 12),
        utc(2026, 11, 4, 6),
    )
)
# A deadline at which no period closes (an hourly schedule on daily
# partitions) expected any ping at all, and paged every hour.
@example(
    scenario=(
        [Spec(kind="deadline", cron="0 * * * *", partitioning="daily", external_id="m")],
        [],
        utc(2026, 3, 1, 10, 30),
        utc(2026, 3, 1, 13, 0),
    )
)
# Found by the oracle: a /start made early for the next expected start, then a pause and
# a resume before that start was due: the resume forgot the start had counted, and paged
# it as late.
@example(
    scenario=(
        [
            Spec(
                kind="deadline",
                cron="0 6 * * *",
                start_cron="*/20 * * * *",
                start_grace_seconds=0,
                external_id="m",
            )
        ],
        [
            Event(at=utc(2025, 12, 28, 22, 13, 4), monitor=0, action="start"),
            Event(at=utc(2025, 12, 28, 22, 16, 1), monitor=0, action="pause"),
            Event(at=utc(2025, 12, 28, 22, 19, 59), monitor=0, action="resume"),
        ],
        utc(2025, 12, 28, 22, 10, 23),
        utc(2025, 12, 28, 22, 33, 21),
    )
)
# Found by the oracle: a ping for a partition whose period had not started.
@example(
    scenario=(
        [Spec(kind="deadline", cron="* * * * *", partitioning="daily", external_id="m")],
        [
            Event(
                at=utc(2025, 12, 31, 23, 59), monitor=0, action="success", partition="2026-01-02"
            ),
            Event(
                at=utc(2025, 12, 31, 23, 59), monitor=0, action="success", partition="2026-01-01"
            ),
        ],
        utc(2025, 12, 31, 23, 59),
        utc(2026, 1, 1, 0, 39),
    )
)
def test_the_watchdog_opens_and_resolves_what_the_oracle_says(scenario):
    check(scenario)
