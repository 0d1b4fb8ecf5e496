"""A deadline shared by thousands of datasets, judged by real Celery worker processes: one
beat tick starts a pass that carries on (``catalog.passes``) until every ``dataset.late``
is written, well inside a minute of deadline plus grace.

Two ``celery worker -P solo -Q freshness`` subprocesses on this test's PostgreSQL database
(hence ``transaction=True``) and a private redis-server; no beat: the test rings
``evaluate_freshness`` twice at deadline plus grace, as two ticks landing together would.
``TIDEMARK_PASS_SECONDS=1`` makes the chain cross several tasks, so the ring-for-the-next-
pass path runs between real processes. Before the pass continued, one tick judged 200
datasets and the rest waited for the following ticks (this test timed out).
"""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Count

from catalog import doorbell, tasks
from catalog.models import Dataset, LatePartition, Notification
from tests.catalog.factories import TeamFactory
from tests.catalog.worker_helpers import Worker, wait_until, worker_environment

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the workers see committed rows only
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(180),
]

DATASETS = 3000
WITHIN = 60.0  # seconds after deadline plus grace by which every late notice is written


@pytest.fixture
def freshness_workers(transactional_db, broker, tmp_path):
    """Two freshness workers sharing this test's database and broker, ready; SIGKILLed
    (with their process groups) at teardown."""
    env = worker_environment(broker_url=broker.url, lease_seconds=30, TIDEMARK_PASS_SECONDS="1")
    workers = [
        Worker(name=f"fresh{n}", log_path=tmp_path / f"fresh{n}.log", env=env, queues="freshness")
        for n in range(2)
    ]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
        yield workers
    finally:
        for worker in workers:
            worker.kill()


def test_every_late_notice_of_a_shared_deadline_is_written_within_a_minute(freshness_workers):
    now = datetime.now(UTC)
    deadline = now.replace(hour=6, minute=0, second=0, microsecond=0)
    if deadline > now:
        deadline -= timedelta(days=1)
    owner = TeamFactory(slug="orders")
    Dataset.objects.bulk_create(
        Dataset(
            namespace="s3://lake",
            name=f"raw/table_{i:05d}",
            owner=owner,
            partitioning=Dataset.Partitioning.DAILY,
            sla_cron="0 6 * * *",
        )
        for i in range(DATASETS)
    )
    # Deadline plus grace falls two seconds from now, for every dataset at once.
    late_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    Dataset.objects.update(
        sla_grace_seconds=int((late_at - deadline).total_seconds()),
        next_deadline_at=deadline,
        next_check_at=late_at,
    )
    time.sleep(max(0.0, (late_at - datetime.now(UTC)).total_seconds()))
    doorbell.ring_now(tasks.EVALUATE_FRESHNESS)
    doorbell.ring_now(tasks.EVALUATE_FRESHNESS)

    def all_late() -> bool:
        for worker in freshness_workers:
            assert worker.alive, f"worker {worker.name} exited:\n{worker.log()[-3000:]}"
        return LatePartition.objects.count() >= DATASETS

    wait_until(all_late, WITHIN + 30, f"{DATASETS} late incidents")

    lags = sorted(
        (created - late_at).total_seconds()
        for created in LatePartition.objects.values_list("created_at", flat=True)
    )
    assert len(lags) == DATASETS
    assert lags[0] >= 0 and lags[-1] < WITHIN, f"last written {lags[-1]:.1f} s after late_at"
    # One incident and one notice each, for the partition due at the shared deadline.
    notices = Notification.objects.filter(type=Notification.Type.DATASET_LATE)
    assert notices.count() == DATASETS
    assert not LatePartition.objects.values("dataset").annotate(n=Count("id")).filter(n__gt=1)
    assert set(LatePartition.objects.values_list("deadline_at", flat=True)) == {deadline}
    # The chain crossed tasks: some pass ran out of its 1 s budget and rang for the next.
    logs = "".join(worker.log() for worker in freshness_workers)
    assert "more due" in logs
    assert not Dataset.objects.filter(next_check_at__lte=late_at).exists()
