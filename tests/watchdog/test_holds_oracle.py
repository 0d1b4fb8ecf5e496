"""Holds against an oracle: random arrival times of an upstream and a downstream partition,
whether the upstream's owner can be paged, and the hold after the upstream's recovery,
through the watchdog's real loop (``loop.run_cycle``: judging, holding, releasing,
sending to a local PagerDuty-compatible receiver) on the real database. The pages sent
must be the oracle's, which states the rule in the simplest code:

- the upstream pages when its partition is late and it has a channel;
- the downstream, late, is held when the upstream's incident is open at the downstream's
  judgement and pages someone; else it pages at once (an independent cause);
- a held downstream pages when it is still missing once the hold after the upstream's
  recovery is over, and never otherwise.

``TIDEMARK_ORACLE_EXAMPLES`` sets the number of examples.
"""

from __future__ import annotations

from datetime import timedelta

import hypothesis
import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.schedules.strategies import oracle_examples
from tests.watchdog.test_holds import (
    DOWNSTREAM_DEADLINE,
    DOWNSTREAM_KEY,
    DUE,
    GRACE,
    UPSTREAM_DEADLINE,
    UPSTREAM_KEY,
    cycle,
    monitor,
)
from watchdog import db

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

JUDGED_UP, JUDGED_DOWN = UPSTREAM_DEADLINE + GRACE, DOWNSTREAM_DEADLINE + GRACE
# Arrivals are whole minutes from the upstream's deadline plus these seconds, so no
# arrival ever ties with a judgement, a release or the other arrival.
UP_SECONDS, DOWN_SECONDS = 7, 23
END = JUDGED_DOWN + timedelta(hours=8)


def arrivals(seconds: int):
    """Minutes after the upstream's deadline (up to 6 h), or None: never within the run."""
    return st.one_of(
        st.none(),
        st.integers(min_value=-60, max_value=360).map(
            lambda m: UPSTREAM_DEADLINE + timedelta(minutes=m, seconds=seconds)
        ),
    )


scenarios = st.fixed_dictionaries(
    {
        "up_at": arrivals(UP_SECONDS),
        "down_at": arrivals(DOWN_SECONDS),
        "up_paged": st.booleans(),
        "settle": st.sampled_from([0, 300, 1800, 3600]).map(lambda s: timedelta(seconds=s)),
    }
)


def expected(up_at, down_at, up_paged, settle) -> tuple[bool, bool]:
    """(the upstream pages, the downstream pages), by the rule."""
    up_late = up_at is None or up_at > JUDGED_UP
    down_late = down_at is None or down_at > JUDGED_DOWN
    up_pages = up_late and up_paged
    if not down_late:
        return up_pages, False
    held = up_pages and (up_at is None or up_at > JUDGED_DOWN)
    if not held:
        return up_pages, True
    if up_at is None or up_at + settle >= END:
        return up_pages, False  # held for the whole run
    release = up_at + settle
    return up_pages, down_at is None or down_at > release


def drive(up_at, down_at, up_paged, settle, pagerduty) -> tuple[bool, bool]:
    upstream = monitor(
        "orders data",
        cron="0 4 * * *",
        key=UPSTREAM_KEY if up_paged else "",
        external_id="tidemark:dataset:1:data",
    )
    downstream = monitor(
        "revenue data",
        cron="30 5 * * *",
        key=DOWNSTREAM_KEY,
        external_id="tidemark:dataset:2:data",
        depends_on=["tidemark:dataset:1:data"],
    )
    pings = sorted(
        (at, m) for at, m in ((up_at, upstream), (down_at, downstream)) if at is not None
    )
    instants = {JUDGED_UP, JUDGED_DOWN, END}
    instants |= {at + timedelta(seconds=1) for at, _ in pings}
    if up_at is not None:
        instants |= {up_at + settle, up_at + settle + timedelta(seconds=1)}
    instants = sorted(t for t in instants if t <= END)
    for at in instants:
        while pings and pings[0][0] <= at:
            ping_at, pinged = pings.pop(0)
            _ping(pinged, ping_at)
        cycle(at)
    triggers = {e["routing_key"] for e in pagerduty if e["event_action"] == "trigger"}
    return UPSTREAM_KEY in triggers, DOWNSTREAM_KEY in triggers


def _ping(monitor, at):
    import time_machine

    with time_machine.travel(at, tick=False):
        response = Client().get(f"/ping/{monitor.ping_key}", {"partition": DUE})
    assert response.status_code == 200


@settings(
    max_examples=oracle_examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios)
# Held, then released: the upstream lands after the downstream's judgement, the downstream
# is still missing when the hold after that ends.
@example(
    scenario={
        "up_at": UPSTREAM_DEADLINE + timedelta(minutes=120, seconds=UP_SECONDS),
        "down_at": UPSTREAM_DEADLINE + timedelta(minutes=200, seconds=DOWN_SECONDS),
        "up_paged": True,
        "settle": timedelta(seconds=1800),
    }
)
# Held, then resolved silently: the downstream catches up within the hold.
@example(
    scenario={
        "up_at": UPSTREAM_DEADLINE + timedelta(minutes=120, seconds=UP_SECONDS),
        "down_at": UPSTREAM_DEADLINE + timedelta(minutes=130, seconds=DOWN_SECONDS),
        "up_paged": True,
        "settle": timedelta(seconds=1800),
    }
)
def test_pages_sent_with_holds_are_the_oracles(scenario, pagerduty, settings):
    settings.WATCHDOG_PAGING = {
        **settings.WATCHDOG_PAGING,
        "hold_after_upstream_seconds": int(scenario["settle"].total_seconds()),
    }
    pagerduty.clear()
    with transaction.atomic(using=db.alias()):
        got = drive(**scenario, pagerduty=pagerduty)
        transaction.set_rollback(True, using=db.alias())
    want = expected(**scenario)
    assert got == want, scenario
    hypothesis.event(f"upstream pages {want[0]}, downstream pages {want[1]}")
