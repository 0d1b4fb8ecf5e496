"""gunicorn as the Procfile starts it (``-c config/gunicorn.py``, no ``--access-logfile``),
with ``TIDEMARK_LOG_FORMAT=json``: every line it writes is a JSON object, gunicorn's own
included, and each request is logged once, by ``httpkit.access``, not by gunicorn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.catalog.worker_helpers import free_port, wait_until

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
GUNICORN = Path(sys.executable).with_name("gunicorn")
KEY = "6f9619ff-8b86-d011-b42d-00cf4fc964ff"

pytestmark = pytest.mark.timeout(90)


def test_gunicorn_writes_json_and_one_access_line_per_request(tmp_path):
    port = free_port()
    log_path = tmp_path / "gunicorn.log"
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="config.settings.test",
        TIDEMARK_IGNORE_DOTENV="1",
        TIDEMARK_LOG_FORMAT="json",
    )
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [
                *(str(GUNICORN), "config.wsgi:application", "-c", "config/gunicorn.py"),
                *("--bind", f"127.0.0.1:{port}", "--workers", "1", "--no-control-socket"),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: "Booting worker" in log_path.read_text(), 30, "gunicorn to start")
        base = f"http://127.0.0.1:{port}"
        wait_until(_answers(f"{base}/healthz"), 30, "the worker to answer")
        response = httpx.get(f"{base}/healthz", headers={"X-Request-ID": "edge-1"}, timeout=10)
        assert response.headers["X-Request-ID"] == "edge-1"
        assert httpx.get(f"{base}/ping/{KEY}", timeout=10).status_code == 404
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)

    text = log_path.read_text()
    records = [json.loads(line) for line in text.splitlines()]  # every line is JSON
    booting = [r for r in records if r["event"].startswith("Booting worker")]
    assert [r["logger"] for r in booting] == ["gunicorn.error"]
    assert not any(r["logger"] == "gunicorn.access" for r in records)
    access = [r for r in records if r["logger"] == "tidemark.access"]
    edge = [r for r in access if r["request_id"] == "edge-1"]
    assert [(r["route"], r["status"]) for r in edge] == [("healthz", 200)]
    assert [r["status"] for r in access if r.get("path")] == [404]
    assert KEY not in text


def _answers(url: str):
    def check() -> bool:
        try:
            return httpx.get(url, timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    return check
