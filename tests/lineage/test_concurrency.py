"""Two workers processing one run's events at the same time: the run row serialises them,
usage rows are locked in one order, and each run still counts once per edge."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

import pytest
from django.db import connections

from catalog.actors import Actor
from catalog.models import Claim, DatasetUsage
from lineage import runstate
from lineage.models import LineageEvent, LineageRun
from lineage.services import processing, receiving
from tests.catalog.factories import TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db(transaction=True)  # threads see committed rows only

NOW = datetime(2026, 11, 28, 7, 0, tzinfo=UTC)
RUNS = 30
INPUTS = [ev.dataset("s3://lake", f"raw/table_{n}") for n in range(3)]
OUTPUT = ev.dataset("s3://lake", "marts/rollup")


def test_two_workers_processing_the_same_runs_at_once_count_each_run_once(monkeypatch):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])

    def receive(event_type: str, run_id: str, minute: str, **datasets) -> None:
        receiving.lineage_event_receive(
            actor=Actor(team=team),
            payload=ev.run_event(
                event_type, run_id=run_id, event_time=f"2026-11-28T06:{minute}:00Z", **datasets
            ),
            now=NOW,
        )

    run_ids = [str(uuid.uuid4()) for _ in range(RUNS)]
    for run_id in run_ids:
        receive("START", run_id, "00", inputs=INPUTS)
    processing.lineage_events_process_due(now=NOW)  # the runs exist, running
    for run_id in run_ids:
        # Two events of each run, side by side (the end first, as transports may deliver
        # them), naming the same new output edge.
        receive("COMPLETE", run_id, "05", inputs=list(reversed(INPUTS)), outputs=[OUTPUT])
        receive("RUNNING", run_id, "02", inputs=INPUTS, outputs=[OUTPUT])

    # Widen the window between reading a run and writing it back, so that a worker not
    # holding the run's lock would write back what it read before the other committed.
    fold = runstate.apply

    def slow_fold(*args, **kwargs):
        time.sleep(0.02)
        return fold(*args, **kwargs)

    monkeypatch.setattr(runstate, "apply", slow_fold)
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait(10)
            # One event per claim: the two workers take a run's two events at once.
            while processing.lineage_events_process_due(now=NOW, batch_size=1).claimed:
                pass
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert failures == []
    # Each event went through once: no deadlock, no unique violation, nothing retried.
    assert set(LineageEvent.objects.values_list("state", "attempts")) == {("processed", 1)}
    runs = LineageRun.objects.values_list("state", "started_at", "ended_at")
    assert set(runs) == {
        (
            "complete",
            datetime(2026, 11, 28, 6, 0, tzinfo=UTC),
            datetime(2026, 11, 28, 6, 5, tzinfo=UTC),
        )
    }
    usage = DatasetUsage.objects.order_by("direction", "dataset_name")
    assert [(u.direction, u.dataset_name, u.run_count) for u in usage] == [
        *(("read", d["name"], RUNS) for d in INPUTS),
        ("write", OUTPUT["name"], RUNS),
    ]
