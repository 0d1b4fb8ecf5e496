"""Holding, releasing, claiming and resolving pages at once, each on its own connection.

A loop's hold pass (``holds.hold_and_release``) decides from what it read at its start;
meanwhile another loop may claim the same trigger and send it, group it into a flood
page, or a ping (or a pause) may resolve the incident. Whatever the order, a page is
never both held and sent, a held trigger keeps no sender's claim (so it is cancelled when
its data lands, and never sent by a slow claimer), a resolved incident is never marked
released, and no transaction is killed as a deadlock victim (a ping or a pause that
PostgreSQL kills has lost its effect).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from tests.concurrency import elsewhere, race
from tests.watchdog.hold_pair import GRACE
from watchdog import db, holds, incidents, monitors, paging
from watchdog.models import Incident, Monitor, Page, PageGroup
from watchdog.pings import recording
from watchdog.pings.inputs import PingInput

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])

DUE, DAY_BEFORE = "2026-11-28", "2026-11-27"
NOW = datetime(2026, 11, 29, 5, 41, tzinfo=UTC)  # the downstream's deadline is judged


def missed(monitor_, partition, *, deadline_at, sent=False):
    """``monitor_``'s open incident for ``partition``, its trigger queued (or sent)."""
    incident = incidents.open_incident(
        monitor_,
        reason=Incident.Reason.MISSED,
        deadline_at=deadline_at,
        partition=partition,
        summary=f"{monitor_.name}: no ping for partition {partition}",
        now=deadline_at + GRACE,
    )
    if sent:
        Page.objects.filter(incident=incident).update(
            state=Page.State.SENT, attempts=1, sent_at=deadline_at + GRACE
        )
    return incident


def another_loop_sends(now):
    """A loop whose own hold pass ran a moment earlier (before the upstream's incident
    was there to hold under) claims the due pages and sends them."""
    claimed = paging._claim(now=now, limit=10, hold=False)
    for page, token in claimed:
        if paging._renew(page, token, at=now):
            paging._record(
                page,
                token,
                paging._send(page, sender=paging.sender_from_settings(), now=now),
                now=now,
            )


def pages(events):
    return [(e["routing_key"][0], e["event_action"]) for e in events]


def while_deciding(monkeypatch, meanwhile):
    """Run ``meanwhile`` to its commit once, right after the hold pass read its
    candidates (inside its transaction, before it holds any of them)."""
    found = holds._candidates
    done = []

    def then_meanwhile(now):
        candidates = found(now)
        if candidates and not done:
            done.append(True)
            elsewhere(meanwhile)
        return candidates

    monkeypatch.setattr(holds, "_candidates", then_meanwhile)
    return done


def test_a_trigger_another_loop_sends_while_this_one_holds_it_is_not_held(
    pagerduty, pair, monkeypatch
):
    """Sent while being held would page on-call for a downstream effect of a known
    incident and leave its incident saying it was held: the first to take the trigger
    wins, the other leaves it alone."""
    upstream, downstream = pair
    missed(upstream, DUE, deadline_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC), sent=True)
    held = missed(downstream, DUE, deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC))
    done = while_deciding(monkeypatch, lambda: another_loop_sends(NOW))

    holds.hold_and_release(now=NOW)

    assert done and pages(pagerduty) == [("D", "trigger")]
    held.refresh_from_db()
    assert held.held_under is None
    assert list(Page.objects.filter(incident=held).values_list("state", flat=True)) == ["sent"]


def test_a_trigger_grouped_while_this_loop_holds_it_is_not_held(
    pagerduty, pair, monkeypatch, settings
):
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "group_threshold": 0}
    upstream, downstream = pair
    missed(upstream, DUE, deadline_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC), sent=True)
    held = missed(downstream, DUE, deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC))
    done = while_deciding(monkeypatch, lambda: paging.group_floods(now=NOW))

    holds.hold_and_release(now=NOW)

    assert done and PageGroup.objects.count() == 1
    held.refresh_from_db()
    # Its trigger goes out in the group page: holding it now would hold nothing.
    assert held.held_under is None
    assert list(Page.objects.filter(incident=held).values_list("state", flat=True)) == ["grouped"]


def test_an_incident_resolving_while_its_hold_is_released_stays_unreleased(
    pagerduty, pair, monkeypatch, settings
):
    """The data lands (the monitor is paused here, the same resolve) while the loop
    decides that the hold is over: the incident resolved while held, and its page was
    never released."""
    upstream, downstream = pair
    root = missed(upstream, DUE, deadline_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC), sent=True)
    held = missed(downstream, DUE, deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC))
    settle = timedelta(seconds=settings.WATCHDOG_PAGING["hold_after_upstream_seconds"])
    Incident.objects.filter(pk=held.pk).update(held_under=root, held_via=root, held_at=NOW)
    Incident.objects.filter(pk=root.pk).update(resolved_at=NOW)
    later = NOW + settle
    over = holds.hold_over
    done = []

    def then_resolved(incident, *, now):
        if not done:
            done.append(True)
            elsewhere(lambda: monitors.monitor_pause(downstream, now=later))
        return over(incident, now=now)

    monkeypatch.setattr(holds, "hold_over", then_resolved)

    holds.hold_and_release(now=later)

    held.refresh_from_db()
    assert done and (held.resolved_at, held.released_at) == (later, None)
    assert list(Page.objects.filter(incident=held).values_list("state", flat=True)) == ["cancelled"]
    paging.send_due(sender=paging.sender_from_settings(), now=later + timedelta(minutes=1))
    assert pages(pagerduty) == []


def test_the_upstream_resolving_while_the_loop_holds_under_it_blocks_neither(
    pagerduty, pair, monkeypatch, settings
):
    """The upstream's data lands (its incident resolving, its pages locked) while a loop
    holds the downstream's trigger under that incident: the two share no row, so neither
    waits for the other. The hold made on the stale view stands, and is released the
    usual time after the upstream's recovery, when the downstream pages if still missing."""
    upstream, downstream = pair
    root = missed(upstream, DUE, deadline_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC), sent=True)
    held = missed(downstream, DUE, deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC))
    Monitor.objects.filter(pk=upstream.pk).update(state=Monitor.State.DOWN)
    resolve_pages = incidents._resolve_pages
    done = []

    def loop():
        with connections[db.alias()].cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")  # waiting for the ping fails the test
        paging.send_due(sender=paging.sender_from_settings(), now=NOW)

    def then_a_loop_cycle(incident_id, *, now):
        resolve_pages(incident_id, now=now)
        if not done:
            done.append(True)
            elsewhere(loop)

    monkeypatch.setattr(incidents, "_resolve_pages", then_a_loop_cycle)
    recording.record(
        ping_key=upstream.ping_key,
        ping=PingInput(kind="success", method="POST", partition=DUE),
        now=NOW,
    )

    assert done and Incident.objects.get(pk=root.pk).resolved_at == NOW
    assert Incident.objects.get(pk=held.pk).held_under_id == root.pk
    settle = timedelta(seconds=settings.WATCHDOG_PAGING["hold_after_upstream_seconds"])
    paging.send_due(sender=paging.sender_from_settings(), now=NOW + timedelta(minutes=1))
    assert pages(pagerduty) == [("U", "resolve")]
    paging.send_due(sender=paging.sender_from_settings(), now=NOW + settle)
    assert pages(pagerduty) == [("U", "resolve"), ("D", "trigger")]
    assert Incident.objects.get(pk=held.pk).released_at == NOW + settle


def blocked_on_a_lock(pid, *, within=10.0):
    """Wait (at most ``within`` seconds) until backend ``pid`` waits for a lock."""
    with connections[db.alias()].cursor() as cursor:
        ends = time.monotonic() + within
        while time.monotonic() < ends:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT cardinality(pg_blocking_pids(%s)) > 0", [pid])
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.01)
    return False


def test_a_pause_while_the_loop_releases_one_incident_and_holds_another_never_deadlocks(
    pagerduty, pair, monkeypatch, settings
):
    """The loop releases the newer incident of a monitor (its hold is over) and then holds
    its older one (its trigger is due again after a failed send, and an upstream incident
    now holds it), while the monitor is paused (its open incidents resolved in order):
    each takes one incident first and then waits for the other's. PostgreSQL kills one
    of them; the pause, killed, would have lost its effect."""
    upstream, downstream = pair
    settle = timedelta(seconds=settings.WATCHDOG_PAGING["hold_after_upstream_seconds"])
    # The day before: orders still missing and paging, revenue's trigger due again.
    older = missed(downstream, DAY_BEFORE, deadline_at=datetime(2026, 11, 28, 5, 30, tzinfo=UTC))
    Page.objects.filter(incident=older).update(attempts=1, next_attempt_at=NOW)
    missed(upstream, DAY_BEFORE, deadline_at=datetime(2026, 11, 28, 4, 0, tzinfo=UTC), sent=True)
    # Today: revenue held under orders' incident, which resolved long enough ago.
    root = missed(upstream, DUE, deadline_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC), sent=True)
    newer = missed(downstream, DUE, deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC))
    Incident.objects.filter(pk=newer.pk).update(held_under=root, held_via=root, held_at=NOW)
    Incident.objects.filter(pk=root.pk).update(resolved_at=NOW - settle)
    assert older.pk < newer.pk

    released = threading.Event()
    pausing: list[int] = []
    release = holds.release

    def then_wait_for_the_pause(*, now):
        count = release(now=now)
        if not released.is_set():
            released.set()
            for _ in range(1000):  # the pause names its connection at once
                if pausing:
                    break
                time.sleep(0.01)
            assert blocked_on_a_lock(pausing[0]), "the pause never waited for the loop"
        return count

    monkeypatch.setattr(holds, "release", then_wait_for_the_pause)

    def pause():
        assert released.wait(timeout=30)
        with connections[db.alias()].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pausing.append(cursor.fetchone()[0])
        monitors.monitor_pause(downstream, now=NOW)

    race([lambda: holds.hold_and_release(now=NOW), pause])

    assert Monitor.objects.get(pk=downstream.pk).state == Monitor.State.PAUSED
    assert not Incident.objects.filter(monitor=downstream, resolved_at__isnull=True).exists()
    assert set(
        Page.objects.filter(incident__monitor=downstream).values_list("state", flat=True)
    ) == {"cancelled"}
    paging.send_due(sender=paging.sender_from_settings(), now=NOW + timedelta(minutes=1))
    assert pages(pagerduty) == []


def test_a_trigger_held_after_its_claim_ran_out_is_not_sent_by_its_slow_claimer(pagerduty, pair):
    """A loop claimed the trigger and is slow to reach it (its batch, its clock from the
    start of its cycle); meanwhile its lease ran out and another loop held the trigger.
    The claimer, still within the lease by its own clock, must not send it."""
    upstream, downstream = pair
    missed(upstream, DUE, deadline_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC), sent=True)
    held = missed(downstream, DUE, deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC))
    lease = timedelta(seconds=paging._config("lease_seconds"))
    [(page, token)] = paging._claim(now=NOW, limit=10, hold=False)

    holds.hold_and_release(now=NOW + lease + timedelta(seconds=1))
    assert Incident.objects.get(pk=held.pk).held_under is not None

    assert not paging._renew(page, token, at=NOW + lease - timedelta(seconds=1))
    assert list(Page.objects.filter(incident=held).values_list("state", "claim_token")) == [
        ("pending", None)
    ]


def test_a_held_trigger_whose_claimer_crashed_is_cancelled_when_its_data_lands(pagerduty, pair):
    """A loop claimed the trigger and died before sending it; the lease ran out and
    another loop held the trigger. When the data lands, the held trigger must be
    cancelled: left claimed, it would wait for a send that a hold forbids, and its
    resolve behind it, for ever."""
    upstream, downstream = pair
    missed(upstream, DUE, deadline_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC), sent=True)
    held = missed(downstream, DUE, deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC))
    lease = timedelta(seconds=paging._config("lease_seconds"))
    paging._claim(now=NOW, limit=10, hold=False)  # and nothing more: the loop died
    later = NOW + lease + timedelta(seconds=1)
    holds.hold_and_release(now=later)
    assert Incident.objects.get(pk=held.pk).held_under is not None

    monitors.monitor_pause(downstream, now=later)  # the same resolve as the data landing
    for minutes in (1, 2, 60):
        paging.send_due(
            sender=paging.sender_from_settings(), now=later + timedelta(minutes=minutes)
        )

    assert pages(pagerduty) == []
    assert list(Page.objects.filter(incident=held).values_list("action", "state")) == [
        ("trigger", "cancelled")
    ]
