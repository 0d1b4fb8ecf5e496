"""One cause, one page, under concurrency: two loops judging a dataset's two monitors at
the same instant open one page, and two pings resolving its two incidents at the same
instant resolve it; two monitors resolving incidents of the same page groups at once
resolve each group once, without a deadlock."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from tests.concurrency import race
from watchdog import db, evaluation, incidents, monitors
from watchdog.models import Incident, Monitor, Page, PageGroup
from watchdog.pings import recording
from watchdog.pings.inputs import PingInput

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])

DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)


def test_two_loops_judging_a_datasets_two_monitors_at_once_page_once(channel, monkeypatch):
    for role in ("data", "pipeline"):
        monitors.monitor_create(
            channels=[channel],
            now=DEADLINE - timedelta(hours=12),
            name=f"orders {role}",
            external_id=f"tidemark:dataset:9:{role}",
            kind=Monitor.Kind.DEADLINE,
            cron="30 6 * * *",
            timezone="Europe/Berlin",
        )
    found = incidents.causes_of_missed

    def slowly(*args, **kwargs):
        # Each loop takes its time between looking for the cause and opening: without the
        # subject lock, neither would see the other's incident.
        causes = found(*args, **kwargs)
        time.sleep(0.5)
        return causes

    monkeypatch.setattr(incidents, "causes_of_missed", slowly)

    race([lambda: evaluation.evaluate_due(now=DEADLINE, limit=1)] * 2)

    assert Incident.objects.count() == 2
    [paging] = Incident.objects.filter(part_of=None)
    assert Incident.objects.get(part_of=paging).monitor_id != paging.monitor_id
    assert list(Page.objects.values_list("incident_id", "action")) == [(paging.pk, "trigger")]


def test_two_pings_resolving_a_datasets_two_incidents_at_once_resolve_the_page(
    channel, monkeypatch
):
    """The data and the pipeline ping land together, each on its own connection, each
    resolving its own monitor's incident: the page they share is resolved once, never
    left open because each saw the other's incident still open."""
    made = {
        role: monitors.monitor_create(
            channels=[channel],
            now=DEADLINE - timedelta(hours=12),
            name=f"orders {role}",
            external_id=f"tidemark:dataset:9:{role}",
            kind=Monitor.Kind.DEADLINE,
            cron="30 6 * * *",
            timezone="Europe/Berlin",
        )
        for role in ("data", "pipeline")
    }
    evaluation.evaluate_due(now=DEADLINE, limit=10)
    [paging] = Incident.objects.filter(part_of=None)
    assert Incident.objects.filter(part_of=paging).count() == 1
    Page.objects.filter(incident=paging).update(state=Page.State.SENT)  # on-call was woken

    save = Monitor.save

    def slowly(self, *args, **kwargs):
        # Each ping's transaction stays open a while after resolving its incident: without
        # the subject lock, neither would see the other's resolution.
        save(self, *args, **kwargs)
        time.sleep(0.5)

    monkeypatch.setattr(Monitor, "save", slowly)
    landed = DEADLINE + timedelta(minutes=5)
    race(
        [
            lambda m=m: recording.record(
                ping_key=m.ping_key, ping=PingInput(kind="success", method="POST"), now=landed
            )
            for m in made.values()
        ]
    )

    assert Incident.objects.filter(resolved_at__isnull=True).count() == 0
    assert list(
        Page.objects.filter(incident=paging).order_by("pk").values_list("action", "state")
    ) == [("trigger", "sent"), ("resolve", "pending")]


def test_two_monitors_resolving_incidents_of_the_same_two_page_groups_never_deadlock(
    channel, monkeypatch
):
    """Two monitors each have an incident in each of two flood pages, in opposite orders
    (a trigger grouped late, after a hold or a retry, lands in the newer group). Both are
    paused at once, each resolving its incidents and then their groups: locking the
    groups one incident at a time, each would take one group and wait for the other's."""
    first, second = (
        monitors.monitor_create(
            channels=[channel],
            now=DEADLINE - timedelta(days=3),
            name=f"job {n}",
            kind=Monitor.Kind.DEADLINE,
            cron="30 6 * * *",
            timezone="Europe/Berlin",
        )
        for n in (1, 2)
    )
    made = {
        (m.pk, day): incidents.open_incident(
            m,
            reason=Incident.Reason.MISSED,
            deadline_at=DEADLINE - timedelta(days=day),
            summary=f"{m.name} missed",
            now=DEADLINE,
        )
        for day in (2, 1)
        for m in (first, second)
    }
    older, newer = (
        PageGroup.objects.create(channel=channel, summary=f"group {n}", opened_at=DEADLINE)
        for n in (1, 2)
    )
    for group in (older, newer):
        Page.objects.create(
            group=group,
            channel=channel,
            action=Page.Action.TRIGGER,
            state=Page.State.SENT,
            next_attempt_at=DEADLINE,
        )
    into = {
        (first.pk, 2): newer,
        (first.pk, 1): older,
        (second.pk, 2): older,
        (second.pk, 1): newer,
    }
    for key, incident in made.items():
        Page.objects.filter(incident=incident).update(state=Page.State.GROUPED, group=into[key])

    pids: dict[int, int] = {}
    arrived: set[int] = set()
    resolve_groups = incidents._resolve_groups

    def then_wait_for_the_other(*args, **kwargs):
        # Each pause, once it has locked groups, waits for the other to lock its own (or
        # to wait for this one's): the interleaving that deadlocks.
        resolve_groups(*args, **kwargs)
        me = threading.get_ident()
        if me in arrived:
            return
        arrived.add(me)
        [other] = [pid for thread, pid in pids.items() if thread != me]
        with connections[db.alias()].cursor() as cursor:
            for _ in range(1000):
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute("SELECT cardinality(pg_blocking_pids(%s)) > 0", [other])
                if len(arrived) == 2 or cursor.fetchone()[0]:
                    return
                time.sleep(0.01)
        raise AssertionError("the other pause neither locked its groups nor waited")

    monkeypatch.setattr(incidents, "_resolve_groups", then_wait_for_the_other)

    def pause(monitor):
        with connections[db.alias()].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids[threading.get_ident()] = cursor.fetchone()[0]
        while len(pids) < 2:
            time.sleep(0.01)
        monitors.monitor_pause(monitor, now=DEADLINE + timedelta(hours=1))

    race([lambda: pause(first), lambda: pause(second)])

    assert not Incident.objects.filter(resolved_at__isnull=True).exists()
    for group in (older, newer):
        group.refresh_from_db()
        assert group.resolved_at is not None
        assert list(
            Page.objects.filter(group=group, incident=None).order_by("pk").values_list("action")
        ) == [("trigger",), ("resolve",)]
