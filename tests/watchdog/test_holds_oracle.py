"""Holds against an oracle: a chain of two or three monitors (each reading the one before;
the first is the root), random arrival times of their partitions, whether each upstream's
owner can be paged, and the hold after an upstream's recovery, through the watchdog's real
loop (``loop.run_cycle``: judging, holding, releasing, sending to a local
PagerDuty-compatible receiver) on the real database. The pages sent, and the incident each
held page waits under when it is judged, must be the oracle's, which states the rule in
the simplest code:

- a monitor pages when its partition is late and it has a channel, unless it is held;
- a late monitor is held at its judgement when its direct upstream's incident is open
  then and pages someone (the upstream has a channel: it pages, or is itself held under
  a page); else it pages at once (an independent cause);
- it waits under the furthest late root: its upstream's root when the upstream is held
  itself at that moment, else the upstream;
- a held monitor pages when its partition is still missing once the hold after its
  direct upstream's recovery is over, and never otherwise (when a root recovers and the
  upstream is still missing, the upstream's own page takes over the hold).

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
from tests.watchdog.hold_pair import DOWNSTREAM_KEY, GRACE, UPSTREAM_KEY, monitor
from tests.watchdog.test_holds import (
    DOWNSTREAM_DEADLINE,
    DUE,
    LAST_DEADLINE,
    LAST_KEY,
    UPSTREAM_DEADLINE,
    cycle,
)
from watchdog import db
from watchdog.models import Incident

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

# Root first: (name, cron, channel key, judged at).
LEVELS = (
    ("orders data", "0 4 * * *", UPSTREAM_KEY, UPSTREAM_DEADLINE + GRACE),
    ("revenue data", "30 5 * * *", DOWNSTREAM_KEY, DOWNSTREAM_DEADLINE + GRACE),
    ("margins data", "0 7 * * *", LAST_KEY, LAST_DEADLINE + GRACE),
)
# Arrivals are whole minutes from the root's deadline plus these seconds, so no arrival
# ever ties with a judgement, a release or another arrival.
SECONDS = (7, 23, 41)
END = LEVELS[-1][3] + timedelta(hours=8)


def arrivals(seconds: int):
    """Minutes after the root's deadline (up to 7 h), or None: never within the run."""
    return st.one_of(
        st.none(),
        st.integers(min_value=-60, max_value=420).map(
            lambda m: UPSTREAM_DEADLINE + timedelta(minutes=m, seconds=seconds)
        ),
    )


@st.composite
def scenarios(draw):
    count = draw(st.sampled_from([2, 3]))
    return {
        # (arrival or None, has a channel); the last one always has one.
        "levels": [
            (draw(arrivals(SECONDS[i])), True if i == count - 1 else draw(st.booleans()))
            for i in range(count)
        ],
        "settle": draw(st.sampled_from([0, 300, 1800, 3600]).map(lambda s: timedelta(seconds=s))),
    }


def expected(levels, settle) -> list[tuple[bool, int | None]]:
    """Per monitor, root first: (it pages, the monitor it waits under when judged or
    None), by the rule."""
    result: list[tuple[bool, int | None]] = []
    released: list = []  # per monitor: when its hold ends (None: never, or not held)
    for i, (arrival, channel) in enumerate(levels):
        judged = LEVELS[i][3]
        late = arrival is None or arrival > judged
        up_arrival, up_channel = levels[i - 1] if i else (None, False)
        up_open = up_arrival is None or up_arrival > judged
        held = late and channel and i > 0 and up_channel and up_open
        if not held:
            result.append((late and channel, None))
            released.append(None)
            continue
        release = None if up_arrival is None else up_arrival + settle
        pages = release is not None and release < END and (arrival is None or arrival > release)
        up_held_then = result[i - 1][1] is not None and (
            released[i - 1] is None or released[i - 1] > judged
        )
        result.append((pages, result[i - 1][1] if up_held_then else i - 1))
        released.append(release)
    return result


def drive(levels, settle, pagerduty) -> list[tuple[bool, int | None]]:
    monitors = []
    for i, (_arrival, channel) in enumerate(levels):
        name, cron, key, _judged = LEVELS[i]
        monitors.append(
            monitor(
                name,
                cron=cron,
                key=key if channel else "",
                external_id=f"tidemark:dataset:{i + 1}:data",
                depends_on=[f"tidemark:dataset:{i}:data"] if i else [],
            )
        )
    pings = sorted((at, i) for i, (at, _) in enumerate(levels) if at is not None)
    judgements = {LEVELS[i][3]: i for i in range(len(levels))}
    instants = set(judgements) | {END}
    instants |= {at + timedelta(seconds=1) for at, _ in pings}
    instants |= {at + settle for at, _ in pings} | {
        at + settle + timedelta(seconds=1) for at, _ in pings
    }
    waited_under: dict[int, int | None] = {}
    for at in sorted(t for t in instants if t <= END):
        while pings and pings[0][0] <= at:
            ping_at, pinged = pings.pop(0)
            _ping(monitors[pinged], ping_at)
        cycle(at)
        if at in judgements:
            i = judgements[at]
            incident = Incident.objects.filter(monitor=monitors[i]).first()
            root = incident.held_under if incident is not None else None
            waited_under[i] = None if root is None else monitors.index(root.monitor)
    triggers = {e["routing_key"] for e in pagerduty if e["event_action"] == "trigger"}
    return [(LEVELS[i][2] in triggers, waited_under[i]) for i in range(len(levels))]


def _ping(monitor, at):
    import time_machine

    with time_machine.travel(at, tick=False):
        response = Client().get(f"/ping/{monitor.ping_key}", {"partition": DUE})
    assert response.status_code == 200


def minutes(m: int, level: int):
    return UPSTREAM_DEADLINE + timedelta(minutes=m, seconds=SECONDS[level])


@settings(
    max_examples=oracle_examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
# Held, then released: the upstream lands after the downstream's judgement, the downstream
# is still missing when the hold after that ends.
@example(
    scenario={
        "levels": [(minutes(120, 0), True), (minutes(200, 1), True)],
        "settle": timedelta(seconds=1800),
    }
)
# Held, then resolved silently: the downstream catches up within the hold.
@example(
    scenario={
        "levels": [(minutes(120, 0), True), (minutes(130, 1), True)],
        "settle": timedelta(seconds=1800),
    }
)
# A chain: the last waits under the root; the root recovers, the middle is still missing
# after the hold and pages, and the last catches up within the hold after the middle.
@example(
    scenario={
        "levels": [(minutes(200, 0), True), (minutes(260, 1), True), (minutes(280, 2), True)],
        "settle": timedelta(seconds=1800),
    }
)
# A chain whose middle lands first: the last pages the hold's time after it, while the
# root is still missing.
@example(
    scenario={
        "levels": [(None, True), (minutes(200, 1), True), (None, True)],
        "settle": timedelta(seconds=1800),
    }
)
# A middle nobody is paged for holds nothing, even under a late root.
@example(
    scenario={
        "levels": [(None, True), (None, False), (None, True)],
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
    hypothesis.event(f"{len(want)} levels, pages {[p for p, _ in want]}")
    hypothesis.event(f"waits under {[u for _, u in want]}")
