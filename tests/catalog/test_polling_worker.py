"""Recovery after downtime through a real Celery worker process: partitions that landed
while no worker ran are found by the full sweep a worker queues when it starts
(``catalog.tasks._sweep_after_boot`` on ``worker_ready``), with nothing else rung.

The worker is a ``celery worker -P solo`` subprocess consuming the ``poll`` queue, on this
test's PostgreSQL database (hence ``transaction=True``) and a private redis-server. Beat is
not running, and the group's regular sweep is pushed a day ahead, so only the start-up
sweep can find anything. The store is a ``file://`` temp dir, handed to the worker through
``TIDEMARK_STORAGE_SOURCES`` (JSON) in its environment.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog import polling
from catalog.models import (
    Partition,
    PartitionRevision,
    ReadinessEvent,
    StorageGroup,
    StorageSweep,
)
from tests.catalog.polling_helpers import register
from tests.catalog.worker_helpers import (
    Worker,
    wait_until,
    worker_environment,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the worker sees committed rows only
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(120),
]

FOUND_WITHIN = 60.0  # seconds from the worker's start to every partition found


@pytest.fixture
def start_poll_worker(transactional_db, broker, lake, tmp_path, settings):
    """``start_poll_worker(name) -> Worker`` sharing this test's database, broker and
    storage sources; every worker is SIGKILLed (with its process group) at teardown,
    before the database is flushed and Redis goes away."""
    workers: list[Worker] = []

    def start(name: str) -> Worker:
        env = worker_environment(
            broker_url=broker.url,
            lease_seconds=30,
            TIDEMARK_STORAGE_SOURCES=json.dumps(settings.TIDEMARK_STORAGE_SOURCES),
        )
        worker = Worker(name=name, log_path=tmp_path / f"{name}.log", env=env, queues="poll")
        workers.append(worker)
        return worker.start()

    try:
        yield start
    finally:
        for worker in workers:
            worker.kill()


def land(root, key: str) -> None:
    directory = root / "sales" / "orders" / f"dt={key}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "part-0.parquet").write_bytes(b"x")
    (directory / "_SUCCESS").write_bytes(b"")


def test_partitions_that_landed_during_downtime_are_found_by_the_start_up_sweep(
    start_poll_worker, lake, producer
):
    dataset = register(producer)
    today = timezone.now().date()
    keys = [(today - timedelta(days=n)).isoformat() for n in range(1, 8)]
    land(lake, keys[-1])  # before the downtime; Tidemark's last sweep finds it
    [before] = polling.sweep_due(now=timezone.now())
    assert (before.error, before.partitions_found) == ("", 1)

    # Downtime: no worker, no beat. Six partitions land; their events never come.
    downtime = keys[:-1]
    for key in downtime:
        land(lake, key)
    # Only the start-up sweep may find them: the regular one is a day away.
    StorageGroup.objects.filter(pk=dataset.poll_group_id).update(
        next_sweep_at=timezone.now() + timedelta(days=1)
    )
    started_at = timezone.now()

    worker = start_poll_worker("poll")

    def found_and_recorded() -> bool:
        assert worker.alive, f"the worker exited:\n{worker.log()[-3000:]}"
        ready = Partition.objects.filter(
            dataset=dataset, key__in=downtime, current_revision__state=PartitionRevision.State.READY
        ).count()
        # Each partition commits as it is found; the sweep's own row commits last.
        swept = StorageSweep.objects.filter(
            group_id=dataset.poll_group_id, started_at__gt=started_at
        ).exists()
        return ready == len(downtime) and swept

    wait_until(found_and_recorded, FOUND_WITHIN, "the start-up sweep to find and record them")
    worker.kill()

    for key in downtime:
        revision = Partition.objects.get(dataset=dataset, key=key).current_revision
        assert revision.detected_by == PartitionRevision.DetectedBy.POLL
        assert ReadinessEvent.objects.get(revision=revision).source == ReadinessEvent.Source.POLL
    # One sweep after the start, a recovery sweep (the last full one was before the
    # downtime), that found exactly the six (the seventh was known).
    [boot] = StorageSweep.objects.filter(group_id=dataset.poll_group_id, started_at__gt=started_at)
    assert (boot.full, boot.error, boot.partitions_found, boot.partitions_checked) == (
        False,
        "",
        len(downtime),
        len(downtime),
    )
    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.last_swept_at == boot.started_at
    assert "catalog.tasks.poll_storage" in worker.log()
