"""Helpers to run Tidemark the way ``make run`` does: ``bin/run`` as a real process tree
(honcho with gunicorn, a Celery worker and Celery beat) on SQLite and the filesystem broker
in a temporary ``TIDEMARK_VAR_DIR``."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import psutil
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Seconds: a first start migrates both SQLite databases from scratch and loads the demo
# (about a minute on two busy cores), then six processes boot at once.
START_TIMEOUT = 180.0
KEY_RE = re.compile(r"Demo API key: (tm_[A-Za-z0-9_-]+)")
# Variables that switch Tidemark away from the embedded mode, or that pytest-django sets.
SERVER_ENV = ("DATABASE_URL", "WATCHDOG_DATABASE_URL", "CELERY_BROKER_URL")
NOT_INHERITED = (*SERVER_ENV, "DJANGO_SETTINGS_MODULE", "TIDEMARK_HOST")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def embedded_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of ``make run`` without server URLs, with its files in ``var_dir``."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    env.update(
        TIDEMARK_VAR_DIR=str(var_dir), TIDEMARK_IGNORE_DOTENV="1", PYTHONUNBUFFERED="1", **extra
    )
    return env


def wait_until(predicate: Callable[[], object], timeout: float, what: str, describe=None):
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            detail = f"\n{describe()}" if describe else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(0.1)


def _gone(process: psutil.Process) -> bool:
    """Exited. PID 1 of a container may never reap orphans, so a zombie counts as gone."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class _Pump(threading.Thread):
    """Collects one pipe's lines as they arrive."""

    def __init__(self, pipe) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        for line in iter(self.pipe.readline, ""):
            with self.lock:
                self.lines.append(line)

    def text(self) -> str:
        with self.lock:
            return "".join(self.lines)


class RunningStack:
    """``bin/run`` started in its own session (as a shell would run ``make run``)."""

    def __init__(self, var_dir: Path) -> None:
        self.var_dir = var_dir
        var_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.watchdog_port = free_port()
        self.watchdog_url = f"http://127.0.0.1:{self.watchdog_port}"
        self.key = ""
        self.children: list[psutil.Process] = []  # bin/run's tree once every process is up
        self.commands: dict[int, str] = {}  # their command lines, by pid
        self.proc = subprocess.Popen(
            ["bin/run"],
            cwd=REPO_ROOT,
            env=embedded_env(
                var_dir, TIDEMARK_PORT=str(self.port), WATCHDOG_PORT=str(self.watchdog_port)
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._stdout = _Pump(self.proc.stdout)
        self._stderr = _Pump(self.proc.stderr)
        self._stdout.start()
        self._stderr.start()

    @property
    def stdout(self) -> str:
        return self._stdout.text()

    def describe(self) -> str:
        return (
            f"bin/run exit code: {self.proc.poll()}\n--- stdout ---\n{self.stdout}"
            f"\n--- stderr ---\n{self._stderr.text()}"
        )

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"bin/run exited early\n{self.describe()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def _all_started(self) -> bool:
        out = self.stdout
        return (
            out.count("Booting worker with pid") >= 3  # two catalog workers, one watchdog
            # The Procfile's Celery workers: the work queues' and the housekeeping one.
            and all(re.search(rf"{name}@\S+ ready\.", out) for name in ("worker", "housekeeping"))
            and "beat: Starting..." in out
        )

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait for /healthz, the banner's key and every process; then note the tree."""
        deadline = time.monotonic() + timeout
        wait_until(self._healthy, timeout, "/healthz to answer 200", self.describe)
        match = wait_until(
            lambda: KEY_RE.search(self.stdout),
            deadline - time.monotonic(),
            "the banner's demo API key on stdout",
            self.describe,
        )
        self.key = match.group(1)
        wait_until(
            self._all_started,
            deadline - time.monotonic(),
            "gunicorn's workers, the Celery workers and beat to start",
            self.describe,
        )
        self.children = psutil.Process(self.proc.pid).children(recursive=True)
        self.commands = {p.pid: " ".join(p.cmdline()) for p in self.children}

    def stop(self, sig: signal.Signals, timeout: float = 20.0) -> float:
        """Send ``sig`` to bin/run's process group as a terminal would; wait for every
        process of the tree to exit. Returns the seconds it took; fails past ``timeout``."""
        started = time.monotonic()
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"bin/run still running {timeout:.0f}s after {sig.name}\n{self.describe()}")
        remaining = max(0.0, timeout - (time.monotonic() - started))
        wait_until(
            lambda: all(_gone(p) for p in self.children),
            remaining,
            f"every process to exit after {sig.name}",
            lambda: (
                "still running: "
                + "; ".join(
                    f"{p.pid} {self.commands[p.pid]}" for p in self.children if not _gone(p)
                )
            ),
        )
        return time.monotonic() - started

    def kill(self) -> None:
        """SIGKILL the group and every process of the tree (honcho starts each of its
        processes in a new session, so the group alone does not reach them)."""
        try:
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for process in {p.pid: p for p in [*self.children, *tree]}.values():
            with suppress(psutil.NoSuchProcess):
                process.kill()
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._stdout.join(timeout=5)
        self._stderr.join(timeout=5)


@contextmanager
def running_stack(var_dir: Path) -> Iterator[RunningStack]:
    """A ``make run`` stack ready to serve; killed on exit, whatever happened."""
    stack = RunningStack(var_dir)
    try:
        stack.wait_ready()
        yield stack
    finally:
        stack.kill()
