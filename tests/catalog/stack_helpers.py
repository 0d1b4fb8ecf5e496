"""Tidemark as real processes, for the tests of Tidemark watching itself: the watchdog's web
server and loop (``config.settings.watchdog``), the catalog's Celery beat, and the
catalog's Celery workers exactly as the Procfile runs them."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings
from django.utils import timezone

from catalog import watchdog_feed
from catalog.actors import Actor
from catalog.models import Dataset
from catalog.services import datasets as dataset_services
from catalog.services import publishing
from tests.catalog.worker_helpers import CELERY, LoggedProcess, wait_until
from tests.watchdog.processes import watchdog_database_url
from watchdog.models import LoopState

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
PROCFILE = Path(settings.BASE_DIR) / "Procfile"
# The production topology (docs/operations.md): the work queues split across workers.
PRODUCTION_PROCFILE = Path(settings.BASE_DIR) / "deploy" / "Procfile.production"


def watchdog_environment(**extra: str) -> dict[str, str]:
    """The environment of a watchdog process: this one's, without any catalog, Celery or
    Django setting, on the test watchdog database, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_", "WATCHDOG_", "TIDEMARK_", "CELERY_", "DJANGO_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.watchdog",
        TIDEMARK_IGNORE_DOTENV="1",
        WATCHDOG_DATABASE_URL=watchdog_database_url(),
        TIDEMARK_OUTBOUND_ALLOW_NETWORKS="127.0.0.0/8",
        TIDEMARK_OUTBOUND_ALLOW_HTTP="true",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@dataclass
class WatchdogLoop(LoggedProcess):
    """``manage.py run_watchdog`` with cycles ``interval`` seconds apart."""

    interval: float = 0.2

    def argv(self) -> list[str]:
        return [sys.executable, MANAGE, "run_watchdog", "--interval", str(self.interval)]

    def wait_ready(self, timeout: float = 30) -> None:
        started = timezone.now()
        wait_until(
            lambda: (
                not self.alive or LoopState.objects.filter(pk=1, last_cycle_at__gt=started).exists()
            ),
            timeout,
            "the watchdog loop to cycle",
        )
        assert self.alive, f"the watchdog loop exited:\n{self.log()[-3000:]}"


_BEAT = (
    "import json, sys; from config.celery import app; "
    "app.conf.beat_schedule = json.loads(sys.argv[1]); "
    "app.start(['beat', '-l', 'info', '-s', sys.argv[2]])"
)


@dataclass
class Beat(LoggedProcess):
    """``celery beat`` of the catalog's app with ``schedule`` (``CELERY_BEAT_SCHEDULE``'s
    shape) in place of the configured one."""

    schedule: dict | None = None
    schedule_file: Path | None = None

    def argv(self) -> list[str]:
        return [sys.executable, "-c", _BEAT, json.dumps(self.schedule), str(self.schedule_file)]

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until(
            lambda: not self.alive or "beat: Starting..." in self.log(), timeout, "beat to start"
        )
        assert self.alive, f"beat exited:\n{self.log()[-3000:]}"


def scaled_beat_schedule(scale: float) -> dict:
    """The configured beat schedule with every interval, and every expiry, times ``scale``."""
    scaled = {}
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        options = dict(entry.get("options", {}))
        if "expires" in options:
            options["expires"] = options["expires"] * scale
        scaled[name] = {"task": entry["task"], "schedule": entry["schedule"] * scale}
        if options:
            scaled[name]["options"] = options
    return scaled


def procfile_workers(procfile: Path = PROCFILE) -> dict[str, list[str]]:
    """The Procfile's Celery workers: process name -> the arguments after ``worker``."""
    workers = {}
    for line in procfile.read_text().splitlines():
        name, _, command = line.partition(":")
        words = shlex.split(command)
        if "celery" in " ".join(words[:1]) and "worker" in words:
            workers[name.strip()] = words[words.index("worker") + 1 :]
    return workers


def procfile_queues(args: list[str]) -> list[str]:
    """The queues a Procfile worker's arguments name with ``-Q``."""
    return args[args.index("-Q") + 1].split(",") if "-Q" in args else []


@dataclass
class ProcfileWorker(LoggedProcess):
    """One of the Procfile's Celery workers, with its own arguments, named ``name``."""

    args: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        # The Procfile's arguments, but for the node name, which tells this test's apart.
        args = list(self.args)
        if "-n" in args:
            del args[args.index("-n") : args.index("-n") + 2]
        return [
            *(str(CELERY), "-A", "config.celery", "worker", *args),
            *("-n", f"{self.name}@tidemark-test"),
        ]

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until(
            lambda: not self.alive or f"{self.name}@tidemark-test ready." in self.log(),
            timeout,
            f"worker {self.name} to be ready",
        )
        assert self.alive, f"worker {self.name} exited:\n{self.log()[-3000:]}"

    def ran(self, task: str) -> int:
        """How many ``task`` runs this worker logged as finished."""
        return len(re.findall(rf"Task {re.escape(task)}\[[^\]]+\] succeeded", self.log()))


def stop(process: LoggedProcess) -> None:
    """Stop a process as an operator would (SIGTERM to its group: a Celery worker's warm
    shutdown), then reap it."""
    if process.alive:
        os.killpg(process.process.pid, signal.SIGTERM)
        process.process.wait(20)
    process.kill()


def register_critical(team, name: str, *, deadline, grace_seconds: int) -> Dataset:
    """A critical dataset of ``team`` in ``s3://lake`` with daily partitions (UTC) and a
    daily SLA at ``deadline``'s hour and minute (UTC), registered through the service."""
    return dataset_services.dataset_register(
        actor=Actor(team=team),
        namespace="s3://lake",
        name=name,
        criticality=Dataset.Criticality.CRITICAL,
        partitioning=Dataset.Partitioning.DAILY,
        partition_timezone="UTC",
        sla_cron=f"{deadline.minute} {deadline.hour} * * *",
        sla_timezone="UTC",
        sla_grace_seconds=grace_seconds,
    )


def publish_and_ping(dataset: Dataset, partition: str) -> None:
    """The producer's publish of ``partition`` through the catalog, then its pipeline's
    last task's ping to the watchdog (which must answer 200)."""
    publishing.readiness_publish(
        actor=Actor(team=dataset.owner),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=partition,
        now=timezone.now(),
    )
    response = httpx.post(watchdog_feed.pipeline_ping_url(dataset), timeout=5)
    assert response.status_code == 200, response.text
