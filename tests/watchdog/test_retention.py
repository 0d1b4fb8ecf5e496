"""The watchdog's retention rules, its loop's pruning and its /readyz."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from pruning import engine
from watchdog import db, loop, retention
from watchdog.models import Channel, Incident, Monitor, Page, Ping

pytestmark = [pytest.mark.django_db(databases=["default", "watchdog"])]

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)


def _prune(table: str, batch_size: int = 1000) -> engine.Outcome:
    [outcome] = engine.prune(
        [r for r in retention.RULES if r.table == table], now=NOW, batch_size=batch_size
    )
    return outcome


def _ping(monitor: Monitor, at: datetime) -> Ping:
    return Ping.objects.create(monitor=monitor, kind="success", received_at=at, method="GET")


def test_pings_keep_the_newest_per_monitor_and_those_inside_the_days(settings):
    settings.WATCHDOG_RETENTION = {**settings.WATCHDOG_RETENTION, "pings_per_monitor": 3}
    cutoff = NOW - timedelta(days=35)
    busy, quiet = Monitor.objects.create(name="busy"), Monitor.objects.create(name="quiet")
    old = [_ping(busy, cutoff - timedelta(days=10 - i)) for i in range(5)]  # 5 old pings
    at_cutoff = _ping(busy, cutoff)
    recent = [_ping(busy, NOW - timedelta(hours=i)) for i in range(4)]
    quiet_old = [_ping(quiet, cutoff - timedelta(days=100 + i)) for i in range(3)]

    assert _prune("pings", batch_size=2).deleted == 5

    left = set(Ping.objects.values_list("pk", flat=True))
    assert not left & {p.pk for p in old}
    assert {at_cutoff.pk, *(p.pk for p in recent), *(p.pk for p in quiet_old)} <= left


def test_pings_a_judgement_needs_stay(settings):
    settings.WATCHDOG_RETENTION = {**settings.WATCHDOG_RETENTION, "pings_per_monitor": 1}
    counted_monitor = Monitor.objects.create(name="counted")
    counted = _ping(counted_monitor, NOW - timedelta(days=200))
    _ping(counted_monitor, NOW - timedelta(days=1))
    Monitor.objects.filter(pk=counted_monitor.pk).update(
        counted_ping_id=counted.pk, counted_ping_at=counted.received_at
    )
    down = Monitor.objects.create(name="down")
    deadline = NOW - timedelta(days=60)
    near = _ping(down, deadline - timedelta(days=34))  # inside 35 days before the deadline
    far = _ping(down, deadline - timedelta(days=36))
    _ping(down, NOW)
    Incident.objects.create(monitor=down, deadline_at=deadline, summary="x", opened_at=deadline)

    assert _prune("pings").deleted == 1

    left = set(Ping.objects.values_list("pk", flat=True))
    assert {counted.pk, near.pk} <= left
    assert far.pk not in left


def test_resolved_incidents_go_with_their_pages_open_ones_stay():
    monitor = Monitor.objects.create(name="m")
    channel = Channel.objects.create(name="c", kind="pagerduty", target="R" * 32)
    cutoff = NOW - timedelta(days=180)

    def incident(hours: int, resolved_at, page_state="sent"):
        at = cutoff - timedelta(days=30, hours=hours)
        made = Incident.objects.create(
            monitor=monitor, deadline_at=at, summary="x", opened_at=at, resolved_at=resolved_at
        )
        Page.objects.create(
            incident=made, channel=channel, action="trigger", state=page_state, next_attempt_at=at
        )
        return made

    out = incident(1, cutoff - TICK)
    at_boundary = incident(2, cutoff)
    still_open = incident(3, None)
    unsent = incident(4, cutoff - timedelta(days=1), page_state="pending")

    outcome = _prune("incidents")

    assert (outcome.deleted, outcome.cascaded["watchdog.Page"]) == (1, 1)
    left = set(Incident.objects.values_list("pk", flat=True))
    assert left == {at_boundary.pk, still_open.pk, unsent.pk}
    assert out.pk not in left


def test_an_upstream_incident_stays_while_an_open_incident_is_held_under_it():
    upstream_monitor, downstream_monitor = (Monitor.objects.create(name=n) for n in "ud")
    long_ago = NOW - timedelta(days=400)

    def incident(monitor, *, resolved_at, held_under=None, released_at=None):
        return Incident.objects.create(
            monitor=monitor,
            deadline_at=long_ago,
            summary="x",
            opened_at=long_ago,
            resolved_at=resolved_at,
            held_under=held_under,
            held_at=long_ago if held_under else None,
            released_at=released_at,
        )

    holding = incident(upstream_monitor, resolved_at=long_ago)
    held = incident(downstream_monitor, resolved_at=None, held_under=holding)
    other_monitor = Monitor.objects.create(name="o")
    released_under = incident(other_monitor, resolved_at=long_ago)
    incident(
        Monitor.objects.create(name="r"),
        resolved_at=None,
        held_under=released_under,
        released_at=long_ago,
    )

    outcome = _prune("incidents")

    # Only the upstream whose held incident was already released goes.
    assert outcome.deleted == 1
    assert not Incident.objects.filter(pk=released_under.pk).exists()
    held.refresh_from_db()
    assert (held.held_under_id, held.released_at) == (holding.pk, None)


def test_the_loop_prunes_when_asked_and_stays_short(settings):
    settings.WATCHDOG_RETENTION = {**settings.WATCHDOG_RETENTION, "pings_per_monitor": 1}
    monitor = Monitor.objects.create(name="m")
    for days in (400, 300, 1):
        _ping(monitor, NOW - timedelta(days=days))
    report = loop.run_cycle(sender=None, now=NOW, prune=False)
    assert report.pruned is None and Ping.objects.count() == 3
    report = loop.run_cycle(sender=None, now=NOW, prune=True)
    assert report.pruned["pings"] == 2
    assert Ping.objects.count() == 1


@pytest.mark.urls("config.urls_watchdog")
def test_readyz_answers_200_then_503_with_retry_after_when_the_database_is_gone(client):
    assert client.get("/readyz").json() == {"status": "ok", "checks": {"database": "ok"}}
    database = connections[db.alias()]
    real = database.settings_dict["PORT"]
    database.close()
    database.settings_dict["PORT"] = "1"
    try:
        response = client.get("/readyz")
    finally:
        database.close()
        database.settings_dict["PORT"] = real
    assert response.status_code == 503
    assert response["Retry-After"]
    assert response.json()["status"] == "unavailable"
