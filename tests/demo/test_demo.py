"""``make demo`` (``python -m demo``): refuses a configured database without ``--demo``, and
stops everything it started when interrupted. The whole scenario runs in ``.ci/run`` as
``make demo``, which exits non-zero when any expectation fails."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER_ENV = ("DATABASE_URL", "WATCHDOG_DATABASE_URL", "CELERY_BROKER_URL")


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (*SERVER_ENV, "DJANGO_SETTINGS_MODULE", "TIDEMARK_VAR_DIR")
    }
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _demo(args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "demo", *args],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


@pytest.mark.parametrize(
    "servers",
    [
        {name: "postgres://postgres@127.0.0.1:5432/x" for name in SERVER_ENV[:2]}
        | {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"},
        {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x"},
    ],
    ids=["all-three", "database-only"],
)
def test_demo_refuses_a_configured_database_without_the_demo_flag(tmp_path, servers):
    var_dir = tmp_path / "demo"
    proc = _demo(["--var-dir", str(var_dir)], _env(**servers))
    out, _ = proc.communicate(timeout=60)

    assert proc.returncode == 2, out
    assert "--demo" in out
    assert not var_dir.exists()  # nothing was started or written


def test_demo_with_the_flag_still_needs_all_three_server_settings(tmp_path):
    var_dir = tmp_path / "demo"
    env = _env(DATABASE_URL="postgres://postgres@127.0.0.1:5432/x")
    proc = _demo(["--demo", "--var-dir", str(var_dir)], env)
    out, _ = proc.communicate(timeout=60)

    assert proc.returncode == 2, out
    assert "missing: CELERY_BROKER_URL, WATCHDOG_DATABASE_URL" in out
    assert not var_dir.exists()


def _gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(600)
def test_demo_interrupted_stops_everything_it_started(tmp_path):
    """Ctrl-C once the stack is up: the demo stops honcho's tree (gunicorn, Celery, the
    watchdog), moto, its receivers and a dbt install in progress, prints its table with the
    interruption and fails. Any failure shows what the demo printed."""
    proc = _demo(
        ["--var-dir", str(tmp_path / "demo"), "--dbt-venv", str(tmp_path / "dbt-venv")],
        _env(),
        start_new_session=True,
    )
    lines: list[str] = []
    pump = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    pump.start()
    try:
        _interrupt_once_up(proc, lines)
    except BaseException as exc:
        raise AssertionError(f"{exc!r}\n--- the demo printed ---\n{''.join(lines)}") from exc
    finally:
        if proc.poll() is None:  # the test failed with the demo still running
            for process in [*psutil.Process(proc.pid).children(recursive=True), proc]:
                with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                    process.kill()
        pump.join(timeout=10)


def _interrupt_once_up(proc: subprocess.Popen, lines: list[str]) -> None:
    deadline = time.monotonic() + 240  # a loaded machine starts the stack slowly
    while "== The dbt environment" not in "".join(lines):
        assert proc.poll() is None, "the demo ended before its stack was up"
        assert time.monotonic() < deadline, "the stack was not up within 240 s"
        time.sleep(0.2)
    tree = psutil.Process(proc.pid).children(recursive=True)
    commands = {p.pid: " ".join(p.cmdline()) for p in tree if not _gone(p)}
    for part in ("honcho", "moto.server", "celery", "run_watchdog"):
        assert any(part in c for c in commands.values()), (part, commands)

    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
    proc.wait(timeout=120)
    out = "".join(lines)
    assert proc.returncode == 1
    assert "interrupted" in out
    assert "Tidemark demo FAILED" in out
    # Everything the demo started is gone, honcho's children included.
    still = [f"{p.pid} {commands[p.pid]}" for p in tree if p.pid in commands and not _gone(p)]
    assert not still, still
