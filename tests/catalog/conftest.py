"""Fixtures for the catalog tests: moto's S3 server (``tests/conftest.py``) and a
temp-directory source as the fallback poll's ``lake``, a private Redis broker, a loopback
webhook receiver and Celery worker processes for worker tests.
"""

from __future__ import annotations

import pytest
import time_machine

from catalog import delivery
from tests.catalog.polling_helpers import NOW
from tests.storage_helpers import S3Store


@pytest.fixture
def s3(s3_bucket, settings) -> S3Store:
    """An empty moto S3 (reset first) with bucket ``tidemark-lake``, configured as the
    storage source ``lake`` (``s3://tidemark-lake/landing``)."""
    store = s3_bucket("tidemark-lake", "landing")
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": store.source()}
    return store


@pytest.fixture
def frozen_clock():
    """The clock stopped at the fallback-poll tests' ``NOW`` (2026-11-29 08:00 UTC)."""
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def broker(tmp_path, monkeypatch):
    """A private redis-server, and this process's Celery app publishing to it."""
    from tests.catalog.worker_helpers import PrivateRedis, point_celery_at

    server = PrivateRedis.spare(tmp_path)
    restore = point_celery_at(server.url, monkeypatch)
    try:
        yield server
    finally:
        restore()
        server.kill()


@pytest.fixture
def receiver():
    """A threaded HTTP receiver on loopback recording every request
    (``worker_helpers.Receiver``); closing it releases any request a test left blocked."""
    from tests.catalog.worker_helpers import Receiver

    server = Receiver()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def start_worker(transactional_db, broker, receiver, tmp_path):
    """``start_worker(name, lease=8, **env) -> Worker``: a ``celery worker -P solo`` on the
    test's databases and private broker; every worker is SIGKILLed (with its process
    group) at teardown, before the database is flushed and Redis goes away."""
    from tests.catalog.worker_helpers import Worker, worker_environment

    workers = []

    def start(name: str, *, lease: int = 8, **extra_env: str):
        env = worker_environment(broker_url=broker.url, lease_seconds=lease, **extra_env)
        worker = Worker(name=name, log_path=tmp_path / f"{name}.log", env=env)
        workers.append(worker)
        return worker.start()

    try:
        yield start
    finally:
        for worker in workers:
            worker.kill()


@pytest.fixture
def lake(tmp_path, settings):
    """Storage source ``lake``: a temp directory (``file://``)."""
    root = tmp_path / "lake"
    root.mkdir()
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": {"url": f"file://{root}"}}
    return root


@pytest.fixture
def producer(db):
    from tests.catalog.factories import TeamFactory

    return TeamFactory(slug="sales")


@pytest.fixture
def consumer_endpoint(db, producer):
    from tests.catalog.factories import EndpointFactory, TeamFactory

    return EndpointFactory(team=TeamFactory(slug="finance"))


@pytest.fixture
def sender():
    """The webhook sender a worker builds from the settings (``TIDEMARK_DELIVERY``), closed
    after the test."""
    s = delivery.sender_from_settings()
    yield s
    s.close()
