"""Need-by judging proven against the brute-force oracle's clocks (DESIGN.md, principle
10): over random need-by crons and zones (with a DST change in the window), with or
without an SLA (and its grace), partition zones, arrival times and evaluation delays, the
``dataset.late`` notices a subscriber with a need-by receives are exactly the rule's, each
once:

- a period's need-by is the first need-by firing at or after its end (``firings``, by
  walking wall clocks minute by minute), judged only when it fires after the subscription
  was made; the SLA's deadline likewise, judged at deadline plus grace;
- at the first evaluation at or after its need-by, a period not ready is told to the
  subscriber (``judged_at: need_by``), unless the SLA judged it late at an evaluation at
  or before that one (the SLA goes first in a pass): every subscriber was told then;
- at the first evaluation at or after the SLA's deadline plus grace, a period not ready
  is told to the subscriber (``judged_at: sla``) unless it was told at its need-by first.

Driven through the real entry points on PostgreSQL (the subscription and publish
services, and the ``evaluate_freshness`` task under time-machine); each example runs in a
transaction rolled back at its end.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import transaction
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from catalog import tasks
from catalog.actors import Actor
from catalog.models import Delivery
from catalog.services.datasets import dataset_register
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog import freshness_oracle as oracle
from tests.catalog.factories import TeamFactory
from tests.schedules.strategies import oracle_examples

EXAMPLES = oracle_examples(12)
pytestmark = [pytest.mark.django_db, pytest.mark.timeout(max(300, 20 * EXAMPLES))]

# Europe/Berlin springs forward on 29 March 2026 (02:00 -> 03:00).
START = datetime(2026, 3, 27, 10, 0, tzinfo=UTC)
END = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)
NEED_BY_CRONS = ["0 6 * * *", "30 2 * * *", "0 */8 * * *", "45 7 * * 1-5", "0 10 * * *"]
SLA_CRONS = [None, "0 8 * * *", "30 6 * * *", "0 3 * * *"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York"]


def _first_firing(cron: str, zone: str, at_or_after: datetime) -> datetime | None:
    found = oracle.firings(
        oracle.parse_cron(cron), zone, at_or_after - timedelta(seconds=1), END + timedelta(days=2)
    )
    return found[0] if found else None


def _first_at_or_after(instants: list[datetime], at: datetime | None) -> datetime | None:
    return next((e for e in instants if at is not None and e >= at), None)


@st.composite
def worlds(draw):
    need_by = (draw(st.sampled_from(NEED_BY_CRONS)), draw(st.sampled_from(ZONES)))
    sla = draw(st.sampled_from(SLA_CRONS))
    grace = draw(st.sampled_from([0, 1800, 7200]))
    partition_zone = draw(st.sampled_from(["UTC", "Europe/Berlin"]))
    periods = [
        p
        # Periods that ended before the subscription too: their need-by may come after it.
        for p in oracle.periods(partition_zone, "daily", START - timedelta(days=3), END)
        if START - timedelta(days=2) < p.end <= END - timedelta(hours=12)
    ]
    # Minutes after the period's end it is ready (None: never), at half a minute past so
    # no arrival ties with an evaluation.
    arrivals = {p.key: draw(st.one_of(st.none(), st.integers(0, 36 * 60))) for p in periods}
    delay = draw(st.sampled_from([0, 1, 17, 90]))  # minutes an evaluation runs late
    return need_by, sla, grace, partition_zone, periods, arrivals, delay


def _expected(world) -> dict[str, list[str]]:
    (cron, zone), sla, grace, _, periods, arrivals, delay = world
    need_bys = {p.key: _first_firing(cron, zone, p.end) for p in periods}
    slas = {p.key: _first_firing(sla, "Europe/Berlin", p.end) if sla else None for p in periods}
    # Deadlines that fired before the subscription (and the SLA) were set are not judged.
    need_bys = {k: at if at and at > START else None for k, at in need_bys.items()}
    lates = {
        k: at + timedelta(seconds=grace) if at and at > START else None for k, at in slas.items()
    }
    evaluations = sorted(
        {at + timedelta(minutes=delay) for at in [*need_bys.values(), *lates.values()] if at}
    )
    evaluations = [e for e in evaluations if e <= END]
    told: dict[str, list[str]] = {}
    for p in periods:
        ready_at = (
            None
            if arrivals[p.key] is None
            else p.end + timedelta(minutes=arrivals[p.key], seconds=30)
        )

        def missing(at, ready_at=ready_at):
            return at is not None and (ready_at is None or ready_at > at)

        at_need_by = _first_at_or_after(evaluations, need_bys[p.key])
        at_sla = _first_at_or_after(evaluations, lates[p.key])
        sla_late = missing(at_sla)
        if missing(at_need_by) and not (sla_late and at_sla <= at_need_by):
            told.setdefault(p.key, []).append("need_by")
        if sla_late and not ("need_by" in told.get(p.key, []) and at_need_by < at_sla):
            told.setdefault(p.key, []).append("sla")
    return told, evaluations


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=worlds())
def test_a_subscriber_is_told_late_as_the_need_by_rule_says(world):
    (cron, zone), sla, grace, partition_zone, periods, arrivals, _ = world
    expected, evaluations = _expected(world)
    note(
        f"world: {world[:4]} arrivals {world[5]} delay {world[6]}\n"
        f"expected {expected}\nevaluations: {evaluations}"
    )
    with transaction.atomic():
        owner = TeamFactory(slug="producers")
        with time_machine.travel(START, tick=False):
            dataset = dataset_register(
                actor=Actor(team=owner, username="t"),
                namespace="s3://lake",
                name="raw/orders",
                partition_timezone=partition_zone,
                sla_cron=sla or "",
                sla_timezone="Europe/Berlin",
                sla_grace_seconds=grace,
            )
            subscription = subscription_create(
                actor=Actor(team=TeamFactory(slug="consumers")),
                dataset=dataset,
                endpoint_url="https://hooks.example.com/consumers",
                need_by_cron=cron,
                need_by_timezone=zone,
                now=START,
            ).subscription
        publishes = sorted(
            (p.end + timedelta(minutes=arrivals[p.key], seconds=30), p.key)
            for p in periods
            if arrivals[p.key] is not None
        )
        steps = sorted(
            [
                *((at, "publish", key) for at, key in publishes),
                *((e, "evaluate", "") for e in evaluations),
            ]
        )
        for at, step, key in steps:
            if at > END:
                break
            if step == "publish":
                readiness_publish(
                    actor=Actor(team=owner),
                    namespace="s3://lake",
                    name="raw/orders",
                    partition=key,
                    now=at,
                )
            else:
                with time_machine.travel(at, tick=False):
                    tasks.evaluate_freshness()
        told: dict[str, list[str]] = {}
        for delivery in (
            Delivery.objects.filter(
                endpoint_id=subscription.endpoint_id, notification__type="dataset.late"
            )
            .select_related("notification")
            .order_by("notification__created_at", "id")
        ):
            data = delivery.notification.payload["data"]
            told.setdefault(data["partition"], []).append(data["judged_at"])
        transaction.set_rollback(True)
    assert told == expected
