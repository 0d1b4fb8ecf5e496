"""The catalog's web server as a real process in tests, as the Procfile starts it."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from tests.catalog.worker_helpers import LoggedProcess, wait_until
from tests.watchdog.processes import GUNICORN


@dataclass
class CatalogServer(LoggedProcess):
    """The catalog's web server, as the Procfile starts it (gunicorn, two workers)."""

    port: int = 0
    # How each of the two workers serves: threads by default; ("--worker-class", "sync")
    # for one request at a time per worker.
    worker_args: tuple[str, ...] = ("--threads", "2")

    def argv(self) -> list[str]:
        return [
            *(str(GUNICORN), "config.wsgi:application", "-c", "config/gunicorn.py"),
            *("--bind", f"127.0.0.1:{self.port}", "--workers", "2", *self.worker_args),
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
        wait_until(lambda: not self.alive or self.answers(), timeout, "the catalog server")
        assert self.alive, f"the catalog server exited:\n{self.log()[-3000:]}"
