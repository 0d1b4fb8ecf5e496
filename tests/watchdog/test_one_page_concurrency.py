"""One cause, one page, under concurrency: two loops judging a dataset's two monitors at
the same instant open one page, and two pings resolving its two incidents at the same
instant resolve it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.concurrency import race
from watchdog import evaluation, incidents, monitors
from watchdog.models import Incident, Monitor, Page
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
