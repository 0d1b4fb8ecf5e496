"""The watchdog as real processes in tests: the environment of one deployed alone, the
address of the suite's test watchdog database, and its web server under gunicorn."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
from django.db import connections

from tests.catalog.worker_helpers import LoggedProcess, wait_until

GUNICORN = Path(sys.executable).with_name("gunicorn")


def standalone_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a standalone watchdog (``config.settings.watchdog``): nothing of
    the suite's configuration, files under ``tmp_path/var``, then ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_", "WATCHDOG_", "TIDEMARK_", "CELERY_", "DJANGO_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.watchdog",
        TIDEMARK_IGNORE_DOTENV="1",
        TIDEMARK_VAR_DIR=str(tmp_path / "var"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def watchdog_database_url(*, port: int | None = None, application_name: str = "") -> str:
    """pytest-django's test watchdog database (read inside a test), on ``port`` if given
    (a relay's), tagged with ``application_name`` for ``pg_stat_activity`` if given."""
    config = connections["watchdog"].settings_dict
    user = quote(config["USER"] or "", safe="")
    password = config.get("PASSWORD") or ""
    auth = f"{user}:{quote(password, safe='')}" if password else user
    host = "127.0.0.1" if port else config["HOST"] or "127.0.0.1"
    port = port or config["PORT"] or 5432
    url = f"postgres://{auth}@{host}:{port}/{config['NAME']}"
    return f"{url}?application_name={application_name}" if application_name else url


@dataclass
class WatchdogServer(LoggedProcess):
    """The watchdog's web server alone, as the Procfile runs it (gunicorn,
    ``config.wsgi_watchdog``, one worker with four threads)."""

    port: int = 0

    def argv(self) -> list[str]:
        return [
            *(str(GUNICORN), "config.wsgi_watchdog:application"),
            *("--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4"),
            "--no-control-socket",
        ]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until(lambda: not self.alive or self.answers(), timeout, "the watchdog server")
        assert self.alive, f"the watchdog server exited:\n{self.log()[-3000:]}"
