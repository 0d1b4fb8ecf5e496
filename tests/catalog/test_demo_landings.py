"""catalog.demo.landings: when the demo's partitions landed (no database). The rule: at
the producer's usual time, on time for the dataset's SLA, except the world's exceptions
(late, lost events, incomplete manifests, reruns, a broken pipeline), never before the
dataset was registered and never after ``now``. Checked at a Tuesday afternoon, and over
random instants (``TIDEMARK_DEMO_EXAMPLES`` examples, 25 by default)."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from catalog.demo import landings, world
from catalog.demo.landings import FAILED, INCOMPLETE, LOST_EVENT
from schedules import FreshnessSla

NOW = datetime(2026, 12, 1, 16, 48, tzinfo=UTC)  # a Tuesday afternoon
DAILY_SPECS = [world.RAW_ORDERS, world.RAW_SHIPMENTS, world.ORDERS_ROLLUP, world.DAILY_REVENUE]
EXAMPLES = int(os.environ.get("TIDEMARK_DEMO_EXAMPLES", "25"))


def sla_of(spec: world.DatasetSpec) -> FreshnessSla:
    fields = spec.fields
    return FreshnessSla(
        cron=fields["sla_cron"],
        time_zone=fields.get("sla_timezone", "UTC"),
        grace_seconds=fields.get("sla_grace_seconds", 0),
        partitioning=fields["partitioning"],
    )


def landings_of(spec: world.DatasetSpec, now: datetime, *, seed: int = 17):
    # Registered on a whole minute, as ``history.history_start`` has it.
    registered = (now - timedelta(days=world.HISTORY_DAYS, hours=1)).replace(
        second=0, microsecond=0
    )
    return landings.producer_landings(
        spec.producer,
        sla=sla_of(spec),
        partitioning=spec.fields["partitioning"],
        partition_timezone="UTC",
        registered_at=registered,
        now=now,
        rng=random.Random(seed),
    ), registered


def test_the_broken_pipeline_missed_the_last_judged_deadline_and_nothing_since():
    found, _ = landings_of(world.DAILY_REVENUE, NOW)
    failed = [x.key for x in found if x.kind == FAILED]
    # Tuesday's 08:00 New York deadline (13:00 UTC) was judged at 13:30: Monday's
    # partition is missing; Tuesday's has not closed yet.
    assert failed == ["2026-11-30"]
    assert all(x.ready_at is None for x in found if x.kind == FAILED)


def test_the_broken_pipeline_on_a_monday_inside_the_grace_misses_the_weekend():
    monday = datetime(2026, 11, 30, 13, 10, tzinfo=UTC)  # in Monday's grace
    found, _ = landings_of(world.DAILY_REVENUE, monday)
    # Friday's deadline was the last one judged: Thursday's partition is missing, and
    # so is everything after it.
    assert [x.key for x in found if x.kind == FAILED] == [
        "2026-11-26",
        "2026-11-27",
        "2026-11-28",
        "2026-11-29",
    ]


def test_exceptions_land_as_the_world_says():
    orders, _ = landings_of(world.RAW_ORDERS, NOW)
    by_age = {x.age: x for x in orders}
    sla = sla_of(world.RAW_ORDERS)
    for age, after in world.RAW_ORDERS.producer.late.items():
        assert by_age[age].ready_at == sla.late_after(by_age[age].deadline) + after
    for age in world.RAW_ORDERS.producer.lost_events:
        lost = by_age[age]
        assert lost.kind == LOST_EVENT
        assert lost.ready_at.minute == landings.SAFETY_NET_MINUTE
        assert timedelta(0) < lost.ready_at - lost.lands_at <= timedelta(hours=1)
    ((version, after),) = world.RAW_ORDERS.producer.restated.values()
    assert by_age[7].restated == (version, by_age[7].lands_at + after)
    payments, _ = landings_of(world.RAW_PAYMENTS, NOW)
    (incomplete,) = [x for x in payments if x.kind == INCOMPLETE]
    assert incomplete.key == "2026-12-01T07"  # eight hours back
    assert incomplete.ready_at > sla_of(world.RAW_PAYMENTS).late_after(incomplete.deadline)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    now=st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
    ),
    seed=st.integers(0, 1000),
)
@example(now=NOW, seed=17)
@example(now=datetime(2027, 3, 28, 1, 30, tzinfo=UTC), seed=17)  # Berlin springs forward
@example(now=datetime(2027, 3, 14, 12, 59, tzinfo=UTC), seed=17)  # New York springs forward
@example(now=datetime(2027, 1, 1, 0, 2, tzinfo=UTC), seed=17)  # a month and an hour close
def test_landings_are_on_time_unless_the_world_says_otherwise(now, seed):
    for spec in [*DAILY_SPECS, world.RAW_PAYMENTS, world.MONTHLY_CLOSE]:
        found, registered = landings_of(spec, now, seed=seed)
        sla, producer = sla_of(spec), spec.producer
        for landing in found:
            assert registered < landing.lands_at <= now, (spec.name, landing)
            assert landing.period.end <= landing.lands_at, (spec.name, landing)
            if landing.ready_at is not None:
                assert landing.lands_at <= landing.ready_at <= now, (spec.name, landing)
            late_after = sla.late_after(landing.deadline)
            if landing.kind == FAILED:
                assert producer.broken and landing.ready_at is None
            elif landing.age in producer.late or landing.kind == INCOMPLETE:
                assert landing.ready_at is None or landing.ready_at > late_after
            elif landing.ready_at is not None:
                assert landing.ready_at <= landing.deadline, (spec.name, landing)
        ages = [x.age for x in found]
        assert ages == sorted(ages, reverse=True) and len(set(ages)) == len(ages)
