"""The ``tidemark`` command line run as a real process (``python -m tidemark_client``, the
same entry as the console script) against a live Tidemark: the catalog and the watchdog's
ping URLs in one server on 127.0.0.1 (``tests.urls_catalog_and_watchdog``)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest


@dataclass
class Tidemark:
    """A live server and an API key of team ``orders`` (every scope)."""

    url: str
    key: str
    team: object

    def cli(self, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
        """Run ``tidemark ARGS`` with TIDEMARK_URL and TIDEMARK_API_KEY set (``env``
        overrides them; an empty value unsets one)."""
        environment = {
            **os.environ,
            "TIDEMARK_URL": self.url,
            "TIDEMARK_API_KEY": self.key,
            **env,
        }
        environment = {k: v for k, v in environment.items() if v}
        return run_cli(*args, env=environment, timeout=timeout)


def run_cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tidemark_client", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def tidemark(live_server, settings, team, make_key) -> Tidemark:
    settings.ROOT_URLCONF = "tests.urls_catalog_and_watchdog"
    return Tidemark(url=live_server.url, key=make_key(team), team=team)
