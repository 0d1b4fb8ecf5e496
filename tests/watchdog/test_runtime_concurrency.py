"""A run's finish ping arriving while a loop pages that run for running too long, each on
its own connection: neither fails, and the run-time incident ends resolved."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from watchdog import evaluation, incidents, monitors
from watchdog.models import Incident
from watchdog.pings import recording
from watchdog.pings.inputs import PingInput

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])

STARTED = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
RUN = "0a6e4c1e-5d3b-4f7a-9c2e-00000000000a"


def test_a_finish_ping_while_the_loop_pages_the_overdue_run_resolves_it(channel, monkeypatch):
    monitor = monitors.monitor_create(
        channels=[channel],
        now=STARTED - timedelta(hours=1),
        name="job",
        period_seconds=86400,
        max_runtime_seconds=600,
    )
    recording.record(
        ping_key=monitor.ping_key,
        ping=PingInput(kind="start", method="POST", run_id=RUN),
        now=STARTED,
    )
    overdue = STARTED + timedelta(seconds=601)
    paging = threading.Event()
    open_incident = incidents.open_incident

    def slowly(*args, **kwargs):
        # The loop holds the overdue run and takes its time before opening the incident.
        paging.set()
        time.sleep(0.5)
        return open_incident(*args, **kwargs)

    monkeypatch.setattr(incidents, "open_incident", slowly)
    failures = []

    def run(work):
        try:
            work()
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            connections.close_all()

    def finish():
        assert paging.wait(timeout=30)
        recording.record(
            ping_key=monitor.ping_key,
            ping=PingInput(kind="success", method="POST", run_id=RUN),
            now=overdue,
        )

    threads = [
        threading.Thread(target=run, args=(work,), daemon=True)
        for work in (lambda: evaluation.evaluate_due(now=overdue), finish)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a loop hung"
    assert not failures, failures
    assert list(Incident.objects.values_list("reason", "resolved_at")) == [("runtime", overdue)]
