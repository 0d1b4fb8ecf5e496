"""``manage.py serve_metrics``: ``/metrics`` for a host with Celery workers and no web
server, as real processes. What a worker recorded in the host's metrics folder (and kept
after it exited) is served, under the same access rule as the web server's."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import httpx
import pytest
from django.conf import settings

from tests.catalog.worker_helpers import LoggedProcess, free_port, wait_until, worker_environment
from tests.metrics_helpers import family_names, parse, value

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

MANAGE = str(settings.BASE_DIR / "manage.py")


@dataclass
class MetricsServer(LoggedProcess):
    port: int = 0

    def argv(self) -> list[str]:
        return [sys.executable, MANAGE, "serve_metrics", "--port", str(self.port)]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"


def _environment(folder, **extra):
    return worker_environment(
        broker_url=settings.CELERY_BROKER_URL,
        lease_seconds=60,
        PROMETHEUS_MULTIPROC_DIR=str(folder),
        **extra,
    )


def _record_list_calls(env, calls: int) -> None:
    """A process of the host's that counts ``calls`` List calls, as the poll does, and
    exits."""
    script = (
        "import django; django.setup(); from catalog import metrics; "
        f"metrics.POLL_LIST_CALLS.inc({calls})"
    )
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)


def _serve(tmp_path, env) -> MetricsServer:
    server = MetricsServer(name="metrics", log_path=tmp_path / "metrics.log", env=env)
    server.port = free_port()
    server.start()
    wait_until(lambda: "serving /metrics" in server.log(), 30, "serve_metrics to start")
    return server


def test_a_worker_only_host_exposes_what_its_workers_recorded(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = _environment(folder, TIDEMARK_METRICS="open")
    _record_list_calls(env, 7)
    _record_list_calls(env, 5)
    server = _serve(tmp_path, env)
    try:
        response = httpx.get(server.url, timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        assert value(parse(response.text), "tidemark_poll_list_calls_total") == 12
        # The state gauges are the web servers' to expose, never twice.
        assert "tidemark_database_up" not in family_names(response.text)
        assert httpx.get(server.url.replace("/metrics", "/"), timeout=10).status_code == 404
    finally:
        server.kill()


def test_token_mode_asks_for_the_metrics_token(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = _environment(folder, TIDEMARK_METRICS="token", TIDEMARK_METRICS_TOKEN="s3cret-token")
    server = _serve(tmp_path, env)
    try:
        refused = httpx.get(server.url, timeout=10)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="metrics"'
        assert refused.json()["status"] == 401
        wrong = httpx.get(server.url, headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401
        ok = httpx.get(server.url, headers={"Authorization": "Bearer s3cret-token"}, timeout=10)
        assert ok.status_code == 200
    finally:
        server.kill()


def test_without_a_metrics_folder_it_refuses_to_start(tmp_path):
    env = _environment(tmp_path)
    del env["PROMETHEUS_MULTIPROC_DIR"]
    done = subprocess.run(
        [sys.executable, MANAGE, "serve_metrics", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "PROMETHEUS_MULTIPROC_DIR is not set" in done.stderr
