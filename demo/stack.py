"""The processes the demo runs: Tidemark as ``make run`` starts it (the Procfile under
honcho: web, Celery workers and beat, the watchdog's loop and web server), and moto's S3
server. Whatever is started here is stopped by ``stop()``, also after Ctrl-C or a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import httpx
import psutil

from .progress import DemoFailed, say, wait_for

REPO = Path(__file__).resolve().parent.parent
PYTHON = REPO / ".venv" / "bin" / "python"
SERVER_ENV = ("DATABASE_URL", "WATCHDOG_DATABASE_URL", "CELERY_BROKER_URL")
S3_KEY = S3_SECRET = "demo"  # noqa: S105 (moto accepts any credentials)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class S3Server:
    """moto's S3 server (``python -m moto.server``) on a free loopback port."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        say(f"starting moto's S3 server on {self.url}")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(PYTHON), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        wait_for(self._up, what="moto's S3 server to answer", timeout=60)

    def _up(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise DemoFailed(f"moto's S3 server exited early (see {self.log})")
        try:
            return httpx.get(f"{self.url}/moto-api/", timeout=2).status_code < 500
        except httpx.TransportError:
            return False

    def options(self) -> dict:
        """fsspec (s3fs) options for a storage source on this server."""
        return {"key": S3_KEY, "secret": S3_SECRET, "endpoint_url": self.url}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class Stack:
    """Tidemark's processes under honcho, from the Procfile ``make run`` uses, with the
    demo's own var directory, ports and settings (all documented environment settings)."""

    def __init__(self, var_dir: Path, settings: dict[str, str]) -> None:
        self.var_dir = var_dir
        self.port = free_port()
        self.watchdog_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.watchdog_url = f"http://127.0.0.1:{self.watchdog_port}"
        self.log = var_dir / "stack.log"
        self.proc: subprocess.Popen | None = None
        self.tree: list[psutil.Process] = []
        self.env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
        self.env.update(
            DJANGO_SETTINGS_MODULE="config.settings.local",
            TIDEMARK_VAR_DIR=str(var_dir),
            # Only the environment decides embedded or servers: a developer's .env is
            # not read, so demo data never lands in a database it names.
            TIDEMARK_IGNORE_DOTENV="1",
            PYTHONUNBUFFERED="1",
            TIDEMARK_HOST="127.0.0.1",
            TIDEMARK_PORT=str(self.port),
            WATCHDOG_PORT=str(self.watchdog_port),
            WATCHDOG_PUBLIC_URL=self.watchdog_url,
            TIDEMARK_WATCHDOG_URL=self.watchdog_url,
            **settings,
        )

    # --- operator commands (manage.py, as a user runs them) ------------------------------

    def manage(self, *args: str, watchdog: bool = False, check: bool = True) -> str:
        env = dict(self.env)
        if watchdog:
            env["DJANGO_SETTINGS_MODULE"] = "config.settings.watchdog"
        result = subprocess.run(
            [str(PYTHON), "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise DemoFailed(
                f"manage.py {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}"
            )
        return result.stdout.strip()

    def prepare(self) -> None:
        """Migrate both databases, collect static files and give the catalog its token for
        the watchdog's API (``make run`` does the same)."""
        say("migrating the catalog's and the watchdog's databases")
        self.manage("migrate", "--noinput", "-v", "0")
        self.manage("migrate", "--database", "watchdog", "--noinput", "-v", "0")
        self.manage("collectstatic", "--noinput", "-v", "0")
        token = self.manage("create_watchdog_token", "catalog", watchdog=True).splitlines()[-1]
        self.env["TIDEMARK_WATCHDOG_TOKEN"] = token.strip()

    # --- the process tree -----------------------------------------------------------------

    def start(self) -> None:
        say(f"starting Tidemark (web {self.url}, watchdog {self.watchdog_url}) under honcho")
        say(
            "  processes: web, worker, beat, watchdog, watchdog-web; their output: "
            f"{shown(self.log)}"
        )
        out = open(self.log, "ab")  # noqa: SIM115 (kept open for the stack's lifetime)
        self.proc = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "honcho"), "-f", "Procfile", "start"],
            cwd=REPO,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()
        wait_for(self._healthy, what="the catalog's and the watchdog's /healthz", timeout=120)
        wait_for(
            self._all_started,
            what="gunicorn workers, the Celery workers, beat and the watchdog loop",
            timeout=120,
        )
        self.tree = psutil.Process(self.proc.pid).children(recursive=True)

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise DemoFailed(f"Tidemark's processes exited early; see {self.log}")
        try:
            return all(
                httpx.get(f"{u}/healthz", timeout=2).status_code == 200
                for u in (self.url, self.watchdog_url)
            )
        except httpx.TransportError:
            return False

    def _all_started(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise DemoFailed(f"Tidemark's processes exited early; see {self.log}")
        out = self.output()
        return (
            all(re.search(rf"{name}@\S+ ready\.", out) for name in ("worker", "housekeeping"))
            and "beat: Starting..." in out
            and all(
                re.search(rf"\| {name}\.1 started \(pid=", out)
                for name in ("web", "worker", "housekeeping", "beat", "watchdog", "watchdog-web")
            )
            and out.count("Booting worker with pid") >= 3
        )

    def stop(self) -> None:
        """SIGINT to honcho (as Ctrl-C in ``make run``), then SIGKILL whatever of its tree
        is left after 30 s."""
        if self.proc is None:
            return
        # honcho starts each process in a session of its own: note them all before asking,
        # in case honcho itself has to be killed.
        with suppress(psutil.NoSuchProcess):
            known = {p.pid for p in self.tree}
            self.tree += [
                p
                for p in psutil.Process(self.proc.pid).children(recursive=True)
                if p.pid not in known
            ]
        if self.proc.poll() is None:
            say("stopping Tidemark (SIGINT to honcho, as Ctrl-C does)")
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        for process in self.tree:
            with suppress(psutil.NoSuchProcess):
                remaining = max(0.1, deadline - time.monotonic())
                try:
                    process.wait(timeout=remaining)
                except psutil.TimeoutExpired:
                    process.kill()
        self.proc = None


def storage_sources(name: str, bucket: str, s3: S3Server) -> str:
    """``TIDEMARK_STORAGE_SOURCES`` / ``WATCHDOG_STORAGE_SOURCES`` for one bucket."""
    return json.dumps({name: {"url": f"s3://{bucket}", "options": s3.options()}})


def shown(path: Path) -> str:
    """``path`` relative to the checkout when it is inside it."""
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def fresh_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
