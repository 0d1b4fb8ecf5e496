"""One cause, one page, with two loops: each judges one of a dataset's two monitors at the
same instant, on its own connection, and one page goes out."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from watchdog import evaluation, incidents, monitors
from watchdog.models import Incident, Monitor, Page

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])

DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)


def race(works):
    """Run each callable in its own thread, released together; re-raise what one raised."""
    barrier = threading.Barrier(len(works))
    failures = []

    def run(work):
        try:
            barrier.wait(timeout=30)
            work()
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(work,), daemon=True) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a loop hung"
    assert not failures, failures


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
