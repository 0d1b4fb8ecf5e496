"""``/metrics`` under gunicorn's several sync workers, as the Procfile runs the catalog's web
server (``-c config/gunicorn.py``, ``PROMETHEUS_MULTIPROC_DIR``): whichever worker answers
a scrape, it counts every worker's requests, and a worker that exits keeps its requests
counted while its live gauge is dropped (gunicorn's ``child_exit`` hook)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
from django.conf import settings

from tests.api.servers import CatalogServer
from tests.catalog.worker_helpers import free_port, wait_until, worker_environment
from tests.metrics_helpers import parse, value

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

REQUESTS = 40


@dataclass
class WebServer(CatalogServer):
    """The catalog's web server with two sync workers, as the Procfile starts it."""

    worker_args: tuple[str, ...] = ("--worker-class", "sync")

    def workers(self) -> set[int]:
        return {child.pid for child in psutil.Process(self.process.pid).children()}


def healthz_count(server: WebServer) -> float:
    """Requests to /healthz counted by one scrape (the scrape itself is the only request
    in flight: the live gauge sums to 1)."""
    response = httpx.get(f"{server.url}/metrics", timeout=10)
    assert response.status_code == 200, response.text[:500]
    samples = parse(response.text)
    assert value(samples, "tidemark_http_requests_in_flight") == 1
    labels = {"route": "healthz", "method": "GET", "status": "200"}
    return value(samples, "tidemark_http_requests_total", **labels)


@pytest.fixture
def server(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = worker_environment(
        broker_url=settings.CELERY_BROKER_URL,
        lease_seconds=60,
        PROMETHEUS_MULTIPROC_DIR=str(folder),
    )
    web = WebServer(name="web", log_path=tmp_path / "web.log", env=env, port=free_port()).start()
    try:
        wait_until(lambda: len(web.workers()) == 2 and web.answers(), 30, "the web server")
        # A readiness probe the client gave up on (its 1 s timeout, on a loaded machine)
        # may still be answered: the test starts once only its own scrape is in flight.
        wait_until(lambda: _in_flight(web) == 1, 30, "earlier requests to finish")
        yield web, folder
    finally:
        web.kill()


def _in_flight(web: WebServer) -> float:
    response = httpx.get(f"{web.url}/metrics", timeout=10)
    return value(parse(response.text), "tidemark_http_requests_in_flight")


def _pids(folder: Path, prefix: str) -> set[int]:
    return {int(p.stem.rsplit("_", 1)[-1]) for p in folder.glob(f"{prefix}_*.db")}


def test_every_scrape_counts_every_workers_requests_and_an_exited_workers_too(server):
    web, folder = server
    before = healthz_count(web)
    for _ in range(REQUESTS):  # a sync worker closes each connection: the two share them
        assert httpx.get(f"{web.url}/healthz", timeout=10).status_code == 200
    workers = web.workers()
    # Both workers answered requests: each has its own counter file.
    assert workers <= _pids(folder, "counter")
    counts = {healthz_count(web) for _ in range(8)}
    assert counts == {before + REQUESTS}

    # A worker that exits: gunicorn starts another; its requests stay counted and its
    # live gauge file is dropped by the child_exit hook.
    gone = min(workers)
    assert gone in _pids(folder, "gauge_livesum")
    os.kill(gone, signal.SIGKILL)
    wait_until(lambda: len(web.workers()) == 2 and gone not in web.workers(), 30, "a new worker")
    wait_until(lambda: gone not in _pids(folder, "gauge_livesum"), 10, "child_exit")
    assert gone in _pids(folder, "counter")
    assert {healthz_count(web) for _ in range(8)} == {before + REQUESTS}
