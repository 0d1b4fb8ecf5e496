"""Real processes for delivery tests: a private redis-server, Celery worker subprocesses and
a threaded HTTP receiver on loopback that records every request it is sent."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import kombu.pools
import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

CELERY = Path(sys.executable).with_name("celery")


def wait_until(
    condition: Callable[[], bool],
    timeout: float,
    what: str,
    *,
    every: Callable[[], None] | None = None,
    every_seconds: float = 0.5,
) -> None:
    """Poll ``condition`` until true, failing after ``timeout`` seconds.

    ``every`` (if given) is called at once and then every ``every_seconds`` while waiting.
    """
    deadline = time.monotonic() + timeout
    next_tick = time.monotonic()
    while True:
        if every is not None and time.monotonic() >= next_tick:
            every()
            next_tick = time.monotonic() + every_seconds
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- redis ------------------------------------------------------------------------------


@dataclass
class PrivateRedis:
    """A redis-server of the test's own, on a spare port, that can crash and come back."""

    port: int
    workdir: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        # No client-side retries: "is it down?" must be answered at once, not after backoff.
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=1,
            socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )

    def answers(self) -> bool:
        try:
            with self.client() as client:
                return bool(client.ping())
        except redis.ConnectionError:
            return False

    def queue_length(self, queue: str) -> int:
        with self.client() as client:
            return client.llen(queue)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--daemonize", "no"),
            ],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: self.process.poll() is not None or self.answers(), 10, "redis-server")
        if self.process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.process.returncode}")

    @classmethod
    def spare(cls, workdir: Path) -> PrivateRedis:
        """Start one on a free port (trying another if the first is taken meanwhile)."""
        server = cls(port=free_port(), workdir=workdir)
        try:
            server.start()
        except RuntimeError:  # another process took the port between bind and start
            server.port = free_port()
            server.start()
        return server

    def kill(self) -> None:
        """Crash it (SIGKILL): connections drop, the port refuses, queued messages are gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        wait_until(lambda: not self.answers(), 10, "redis-server to go away")


def _reset_broker_connections(app) -> None:
    """Forget pooled broker connections so the next send connects to the current URL
    (kombu's process-wide pools plus the app's own pool and producer pool)."""
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


def point_celery_at(url: str, monkeypatch) -> Callable[[], None]:
    """Point this process's Celery app (the doorbell's publisher) at ``url``.

    Celery reads CELERY_BROKER_URL from the environment before its configuration, so the
    variable moves too. Returns the function that points it back.
    """
    from config.celery import app

    original = app.conf.broker_url
    monkeypatch.setenv("CELERY_BROKER_URL", url)
    app.conf.broker_url = url
    _reset_broker_connections(app)

    def restore() -> None:
        app.conf.broker_url = original
        _reset_broker_connections(app)

    return restore


# --- HTTP receiver ----------------------------------------------------------------------


@dataclass
class Hit:
    """One request the receiver got; ``started``/``finished`` are ``time.monotonic()``."""

    path: str
    webhook_id: str
    body: bytes
    headers: dict[str, str]
    started: float
    finished: float = 0.0
    status: int = 0


class Receiver:
    """A threaded HTTP server on loopback that records every request.

    ``respond(hit) -> status`` decides each answer and may block (it runs in the request's
    own thread); by default every request gets 200.
    """

    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.lock = threading.Lock()
        # Set on close: a ``respond`` that blocks should wait on this, never forever.
        self.closing = threading.Event()
        self.respond: Callable[[Hit], int] = lambda hit: 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The head and the body are two writes: with Nagle's algorithm the body would
            # wait for the client's delayed ACK, 40 ms per request on Linux.
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                started = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hit = Hit(
                    path=self.path,
                    webhook_id=self.headers.get("webhook-id", ""),
                    body=body,
                    headers=dict(self.headers.items()),
                    started=started,
                )
                with receiver.lock:
                    receiver.hits.append(hit)
                hit.status = receiver.respond(hit)
                try:
                    self.send_response(hit.status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    self.wfile.flush()
                except OSError:  # the sender is gone (killed mid-request)
                    pass
                hit.finished = time.monotonic()

            def log_message(self, *args) -> None:  # keep pytest output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url_for(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def snapshot(self) -> list[Hit]:
        with self.lock:
            return list(self.hits)

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


# --- Celery workers ---------------------------------------------------------------------


def _database_url(settings_dict: dict) -> str:
    user = quote(settings_dict["USER"] or "", safe="")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password, safe='')}" if password else user
    host = settings_dict["HOST"] or "127.0.0.1"
    port = settings_dict["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{settings_dict['NAME']}"


def worker_environment(*, broker_url: str, lease_seconds: int, **extra: str) -> dict[str, str]:
    """The environment of a worker that shares this test's databases and ``broker_url``.

    Read inside a test: ``connection.settings_dict`` then names pytest-django's test
    database. The worker never touches the watchdog database, so whichever one the alias
    names (test or not) will do.
    """
    from django.db import connections

    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.test",
        TIDEMARK_IGNORE_DOTENV="1",
        DATABASE_URL=_database_url(connections["default"].settings_dict),
        WATCHDOG_DATABASE_URL=_database_url(connections["watchdog"].settings_dict),
        CELERY_BROKER_URL=broker_url,
        TIDEMARK_DELIVERY_LEASE=str(lease_seconds),
        # A send must fit in the lease with a 5 s margin, or the pass hands the claim back.
        TIDEMARK_DELIVERY_DEADLINE="2",
        # config/settings/test.py allows loopback over plain HTTP; say so for clarity.
        TIDEMARK_OUTBOUND_ALLOW_NETWORKS=",".join(settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS),
        TIDEMARK_OUTBOUND_ALLOW_HTTP="true",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


_SUMMARY = re.compile(r"deliveries: claimed (\d+): .*; claims lost (\d+)")


@dataclass
class LoggedProcess:
    """A subprocess in its own session (so a kill takes its children too), logging to a
    file. Subclasses give ``argv``."""

    name: str
    log_path: Path
    env: dict[str, str]
    process: subprocess.Popen | None = None
    _log_file: object = field(default=None, repr=False)

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self):
        self._log_file = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv(),
            cwd=settings.BASE_DIR,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # the group: its children go too
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


@dataclass
class Worker(LoggedProcess):
    """One ``celery worker -P solo`` subprocess consuming ``queues``."""

    queues: str = "delivery,default"

    def argv(self) -> list[str]:
        return [
            *(str(CELERY), "-A", "config.celery", "worker", "-P", "solo"),
            *("-Q", self.queues, "--without-gossip", "--without-mingle"),
            *("-l", "info", "-n", f"{self.name}@tidemark-test"),
        ]

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until(
            lambda: not self.alive or f"{self.name}@tidemark-test ready." in self.log(),
            timeout,
            f"worker {self.name} to be ready",
        )
        assert self.alive, f"worker {self.name} exited:\n{self.log()[-3000:]}"

    def claimed(self) -> tuple[int, int]:
        """(deliveries claimed, claims lost) summed over the passes this worker logged."""
        passes = [tuple(map(int, m)) for m in _SUMMARY.findall(self.log())]
        return sum(p[0] for p in passes), sum(p[1] for p in passes)


# --- a dataset with webhook subscribers, and what became of its deliveries ------------


def ring_deliveries() -> None:
    """Stand in for beat's 30 s sweep: ring the delivery doorbell now."""
    from catalog import doorbell

    doorbell.ring_now(doorbell.DELIVER_DUE)


def subscribers(receiver: Receiver, paths: list[str]):
    """The orders team's dataset, one consumer team per receiver path; returns
    ``(publish(partition), {path: signing secret})``."""
    from django.utils import timezone

    from catalog.actors import Actor
    from catalog.services.publishing import readiness_publish
    from catalog.services.subscriptions import subscription_create
    from tests.catalog.factories import DatasetFactory, TeamFactory

    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    secrets = {}
    for i, path in enumerate(paths):
        result = subscription_create(
            actor=Actor(team=TeamFactory(slug=f"consumer-{i}")),
            dataset=dataset,
            endpoint_url=receiver.url_for(path),
        )
        secrets[path] = result.endpoint_secret

    def publish(partition: str):
        return readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )

    return publish, secrets


def expected_deliveries(receiver: Receiver) -> set[tuple[str, str]]:
    """(webhook-id, receiver path) of every delivery in the database."""
    from catalog.models import Delivery

    prefix = receiver.url_for("")
    return {
        (str(notification_id), url.removeprefix(prefix))
        for notification_id, url in Delivery.objects.values_list("notification_id", "endpoint__url")
    }


def delivery_states() -> Counter:
    from catalog.models import Delivery

    return Counter(Delivery.objects.values_list("state", flat=True))


def all_succeeded(count: int) -> Callable[[], bool]:
    from catalog.models import Delivery

    return lambda: delivery_states() == Counter({Delivery.State.SUCCEEDED: count})
