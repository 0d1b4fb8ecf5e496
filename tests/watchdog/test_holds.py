"""Holds in process: a downstream monitor's page waits under its upstream's open incident
(one late root, one page), is released when the upstream resolves first, and resolves
silently when its own data lands first; an independent cause always pages. Pages go to a
real local PagerDuty-compatible receiver."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from tests.watchdog.hold_pair import (
    DOWNSTREAM_KEY,
    GRACE,
    UPSTREAM_KEY,
    monitor,
    orders_and_revenue,
)
from watchdog import holds, loop, paging
from watchdog.models import Incident, Page

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

UPSTREAM_DEADLINE = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
DOWNSTREAM_DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)
DUE = "2026-11-28"  # the partition both deadlines expect


def cycle(at):
    with time_machine.travel(at, tick=False):
        return loop.run_cycle(sender=paging.sender_from_settings(), now=at)


def ping(monitor, at, partition=DUE):
    with time_machine.travel(at, tick=False):
        response = Client().get(f"/ping/{monitor.ping_key}", {"partition": partition})
    assert response.status_code == 200


def pages(events, key=None):
    return [
        (e["routing_key"][0], e["event_action"]) for e in events if key in (None, e["routing_key"])
    ]


def test_both_late_pages_only_the_upstream_and_holds_the_downstream(pagerduty, pair):
    upstream, downstream = pair
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=1))

    assert pages(pagerduty) == [("U", "trigger")]
    root = Incident.objects.get(monitor=upstream)
    held = Incident.objects.get(monitor=downstream)
    assert (held.held_under_id, held.held_at, held.released_at) == (
        root.pk,
        DOWNSTREAM_DEADLINE + GRACE,
        None,
    )
    assert list(Page.objects.filter(incident=held).values_list("state", "attempts")) == [
        (Page.State.PENDING, 0)
    ]


def test_the_upstream_resolving_first_releases_the_downstream_page(pagerduty, pair, settings):
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "hold_after_upstream_seconds": 600}
    upstream, downstream = pair
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    recovered_at = DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=5)
    ping(upstream, recovered_at)
    # The downstream's run gets its time to catch up after the upstream recovered...
    cycle(recovered_at + timedelta(minutes=9))
    assert sorted(pages(pagerduty)) == [("U", "resolve"), ("U", "trigger")]
    # ...and pages once that is over and its partition is still missing.
    released_at = recovered_at + timedelta(minutes=10)
    cycle(released_at)

    # The upstream's resolve and the released trigger go out in the same cycle.
    assert sorted(pages(pagerduty)) == [("D", "trigger"), ("U", "resolve"), ("U", "trigger")]
    held = Incident.objects.get(monitor=downstream)
    assert held.released_at == released_at and held.held_under.monitor == upstream
    assert pages(pagerduty, DOWNSTREAM_KEY) == [("D", "trigger")]
    [released] = [e for e in pagerduty if e["routing_key"] == DOWNSTREAM_KEY]
    assert released["dedup_key"] == held.dedup_key
    # The page says what it waited under, and that the lateness outlasted it.
    assert released["payload"]["custom_details"]["held_under"] == {
        "monitor": "orders data",
        "partition": DUE,
        "resolved_at": recovered_at.isoformat(),
        "held_at": (DOWNSTREAM_DEADLINE + GRACE).isoformat(),
        "released_at": released_at.isoformat(),
    }


def test_the_downstream_landing_first_resolves_its_held_page_silently(pagerduty, pair):
    upstream, downstream = pair
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    ping(upstream, DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=5))
    cycle(DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=6))
    # The downstream's run catches up within the hold after the upstream's recovery.
    ping(downstream, DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=20))
    cycle(DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=21))
    cycle(DOWNSTREAM_DEADLINE + GRACE + timedelta(hours=2))

    assert pages(pagerduty) == [("U", "trigger"), ("U", "resolve")]
    held = Incident.objects.get(monitor=downstream)
    assert held.resolved_at is not None and held.released_at is None
    assert list(Page.objects.filter(incident=held).values_list("state", "attempts")) == [
        (Page.State.CANCELLED, 0)
    ]


def test_downstream_lateness_with_the_upstream_on_time_pages_as_before(pagerduty, pair):
    upstream, downstream = pair
    ping(upstream, UPSTREAM_DEADLINE - timedelta(minutes=5))
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)

    assert pages(pagerduty) == [("D", "trigger")]
    assert Incident.objects.get(monitor=downstream).held_under is None


def test_an_upstream_late_for_another_partition_holds_nothing(pagerduty, pair):
    upstream, _downstream = pair
    # The upstream missed the day before and is still open; today's partition landed.
    ping(upstream, UPSTREAM_DEADLINE - timedelta(minutes=5))
    with time_machine.travel(UPSTREAM_DEADLINE, tick=False):
        from watchdog import incidents

        incidents.open_incident(
            upstream,
            reason=Incident.Reason.MISSED,
            deadline_at=UPSTREAM_DEADLINE - timedelta(days=1),
            partition="2026-11-27",
            summary="orders data: no ping partition 2026-11-27",
            now=UPSTREAM_DEADLINE - timedelta(days=1) + GRACE,
        )
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    assert pages(pagerduty, DOWNSTREAM_KEY) == [("D", "trigger")]


def test_an_upstream_nobody_is_paged_for_holds_nothing(pagerduty, db):
    _, downstream = orders_and_revenue(upstream_key="")
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    assert pages(pagerduty) == [("D", "trigger")]
    assert Incident.objects.get(monitor=downstream).held_under is None


def test_an_upstream_page_failing_for_good_releases_the_held_one(pagerduty, pair):
    upstream, downstream = pair
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    Page.objects.filter(incident__monitor=upstream).update(state=Page.State.FAILED)
    cycle(DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=1))
    assert pages(pagerduty) == [("U", "trigger"), ("D", "trigger")]
    assert Incident.objects.get(monitor=downstream).released_at is not None


def test_a_chain_holds_under_the_paging_root_and_a_cycle_never_holds_everyone(pagerduty, db):
    # Hourly upstream inside a daily downstream inside a daily one further down.
    raw = monitor(
        "clicks raw",
        cron="0 1 * * *",
        key="R" * 32,
        external_id="tidemark:dataset:1:data",
        depends_on=["tidemark:dataset:3:data"],  # a cycle in lineage
    )
    middle = monitor(
        "sessions data",
        cron="0 4 * * *",
        key="S" * 32,
        external_id="tidemark:dataset:2:data",
        depends_on=["tidemark:dataset:1:data"],
    )
    last = monitor(
        "revenue data",
        cron="30 5 * * *",
        key=DOWNSTREAM_KEY,
        external_id="tidemark:dataset:3:data",
        depends_on=["tidemark:dataset:2:data"],
    )
    cycle(datetime(2026, 11, 29, 1, 10, tzinfo=UTC))
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    assert pages(pagerduty) == [("R", "trigger")]
    root = Incident.objects.get(monitor=raw)
    assert root.held_under is None  # its upstream (revenue) is held under it: no loop
    assert Incident.objects.get(monitor=middle).held_under == root
    # The last is held under the root of the chain, through its direct upstream.
    held = Incident.objects.get(monitor=last)
    assert (held.held_under, held.held_via.monitor) == (root, middle)
    assert holds.pager(held, avoid=set()) == root


def test_the_pipeline_monitors_failure_holds_the_downstream(pagerduty, pair):
    """The upstream's data monitor's missed deadline is part of its pipeline's reported
    failure: the failure pages, and the downstream waits under the data incident."""
    upstream, downstream = pair
    pipeline = monitor(
        "orders pipeline",
        cron="0 4 * * *",
        key=UPSTREAM_KEY,
        external_id="tidemark:dataset:1:pipeline",
        partitioning="",
    )
    with time_machine.travel(UPSTREAM_DEADLINE - timedelta(minutes=30), tick=False):
        assert Client().get(f"/ping/{pipeline.ping_key}/fail").status_code == 200
    cycle(UPSTREAM_DEADLINE - timedelta(minutes=29))
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    assert pages(pagerduty) == [("U", "trigger")]
    data_incident = Incident.objects.get(monitor=upstream)
    assert data_incident.part_of.monitor == pipeline
    assert Incident.objects.get(monitor=downstream).held_under == data_incident


def test_held_triggers_are_never_claimed_or_grouped(pagerduty, pair, settings):
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "group_threshold": 0}
    _upstream, downstream = pair
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    held = Incident.objects.get(monitor=downstream)
    assert held.held_under is not None
    assert [(p.state, p.group_id) for p in Page.objects.filter(incident=held)] == [
        (Page.State.PENDING, None)
    ]


def test_a_held_page_is_counted_held_and_not_as_a_due_page_waiting(pagerduty, pair):
    from watchdog import metrics

    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    later = DOWNSTREAM_DEADLINE + GRACE + timedelta(hours=3)

    def gauge(name):
        [family] = [f for f in metrics.state(now=later) if f.name == name]
        [sample] = family.samples
        return sample.value

    assert gauge("tidemark_watchdog_held_incidents") == 1
    assert gauge("tidemark_watchdog_pages_pending") == 1  # held, still a page to send
    # Held for hours is not a sender falling behind.
    assert gauge("tidemark_watchdog_oldest_due_page_age_seconds") == 0


REVENUE, MARGINS = (f"tidemark:dataset:{i}:data" for i in (2, 3))
LAST_KEY = "M" * 32
LAST_DEADLINE = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)


@pytest.fixture
def chain(db):
    """Three levels, one team each: orders (due 04:00) <- revenue (05:30) <- margins
    (07:00)."""
    orders, revenue = orders_and_revenue()
    margins = monitor(
        "margins data", cron="0 7 * * *", key=LAST_KEY, external_id=MARGINS, depends_on=[REVENUE]
    )
    return orders, revenue, margins


def test_a_three_level_chain_holds_the_last_page_under_the_root(pagerduty, chain, settings):
    """Orders late, revenue late, margins late: margins' page is held under orders'
    incident, as revenue's is; when orders recovers and revenue is still missing after
    the hold, revenue pages and margins waits under it; margins landing within the hold
    after revenue's recovery is never paged."""
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "hold_after_upstream_seconds": 600}
    orders, revenue, margins = chain
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    cycle(LAST_DEADLINE + GRACE)
    assert pages(pagerduty) == [("U", "trigger")]
    root = Incident.objects.get(monitor=orders)
    middle, last = Incident.objects.get(monitor=revenue), Incident.objects.get(monitor=margins)
    assert (middle.held_under, middle.held_via) == (root, root)
    assert (last.held_under, last.held_via, last.held_at) == (root, middle, LAST_DEADLINE + GRACE)

    # Orders recovers; revenue is still missing when the hold after it ends.
    recovered_at = LAST_DEADLINE + GRACE + timedelta(minutes=5)
    ping(orders, recovered_at)
    cycle(recovered_at + timedelta(minutes=9))
    assert Incident.objects.get(monitor=margins).held_under == root  # the hold stands
    released_at = recovered_at + timedelta(minutes=10)
    cycle(released_at)
    assert sorted(pages(pagerduty)) == [("D", "trigger"), ("U", "resolve"), ("U", "trigger")]
    last = Incident.objects.get(monitor=margins)
    assert (last.held_under.monitor, last.held_via.monitor, last.released_at) == (
        revenue,
        revenue,
        None,
    )

    # Revenue lands; margins catches up within the hold after it: never paged.
    ping(revenue, released_at + timedelta(minutes=20))
    cycle(released_at + timedelta(minutes=21))
    ping(margins, released_at + timedelta(minutes=25))
    cycle(released_at + timedelta(minutes=26))
    cycle(released_at + timedelta(hours=2))
    assert pages(pagerduty, LAST_KEY) == []
    last = Incident.objects.get(monitor=margins)
    assert last.resolved_at is not None and last.released_at is None


def test_a_chain_whose_middle_lands_first_releases_the_last_after_its_own_input(
    pagerduty, chain, settings
):
    """Revenue lands while orders is still missing: margins' hold ends the usual time
    after its own input landed, not when orders recovers, and it pages if still
    missing then."""
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "hold_after_upstream_seconds": 600}
    orders, revenue, margins = chain
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    cycle(LAST_DEADLINE + GRACE)
    landed_at = LAST_DEADLINE + GRACE + timedelta(minutes=5)
    ping(revenue, landed_at)
    cycle(landed_at + timedelta(minutes=9))
    assert pages(pagerduty) == [("U", "trigger")]
    cycle(landed_at + timedelta(minutes=10))
    assert pages(pagerduty) == [("U", "trigger"), ("M", "trigger")]
    last = Incident.objects.get(monitor=margins)
    assert last.held_under == Incident.objects.get(monitor=orders)
    assert last.released_at == landed_at + timedelta(minutes=10)
    assert Incident.objects.get(monitor=orders).resolved_at is None
    # The page says what it waited under, and through which upstream that recovered.
    [released] = [e for e in pagerduty if e["routing_key"] == LAST_KEY]
    assert released["payload"]["custom_details"]["held_under"] == {
        "monitor": "orders data",
        "partition": DUE,
        "resolved_at": None,
        "held_at": (LAST_DEADLINE + GRACE).isoformat(),
        "released_at": (landed_at + timedelta(minutes=10)).isoformat(),
        "via": {"monitor": "revenue data", "partition": DUE, "resolved_at": landed_at.isoformat()},
    }
    # So do its words in an email or Slack message.
    from watchdog import page_words

    _subject, text = page_words.words(Page.objects.get(incident=last))
    assert (
        f"after the incident of revenue data (partition {DUE}), through which it waited, "
        f"resolved at {landed_at.isoformat()}."
    ) in text


def test_a_chains_last_page_shows_its_root_and_the_upstream_it_is_held_through(
    pagerduty, chain, api, make_operator
):
    """The API's incidents give ``held_via`` beside ``held_under``, and the on-call monitor
    page names both: held under orders' incident, through revenue's."""
    from django.test import Client
    from django.utils import timezone

    from tests.watchdog.conftest import OPERATOR_PASSWORD
    from watchdog import operators
    from watchdog.oncall import COOKIE

    orders, revenue, margins = chain
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    cycle(LAST_DEADLINE + GRACE)
    root = Incident.objects.get(monitor=orders)
    middle, last = Incident.objects.get(monitor=revenue), Incident.objects.get(monitor=margins)

    listed = {i["id"]: i for i in api.get("/api/v1/incidents").json()}
    assert (listed[last.pk]["held_under"], listed[last.pk]["held_via"]) == (root.pk, middle.pk)
    assert (listed[middle.pk]["held_under"], listed[middle.pk]["held_via"]) == (root.pk, root.pk)

    operator = make_operator("oncall", all_labels=True)
    client = Client()
    client.cookies[COOKIE] = operators.sign_in(
        username=operator.username,
        password=OPERATOR_PASSWORD,
        remote_addr="127.0.0.1",
        now=timezone.now(),
    ).key
    body = client.get(f"/oncall/monitors/{margins.pk}").content.decode()
    assert "the incident of orders data (partition" in body
    assert "through revenue data (partition" in body
    middle_page = client.get(f"/oncall/monitors/{revenue.pk}").content.decode()
    assert "through" not in middle_page.split("Held under", 1)[1].split("</p>", 1)[0]
