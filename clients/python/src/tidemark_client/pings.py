"""Watchdog pings and the cron wrapper behind ``tidemark run``.

A ping URL is a monitor's (``https://watchdog.example.com/ping/<uuid>``, or
``/ping/<ping key>/<slug>``, perhaps with ``?create=1``), in the dead-man's-switch
convention Tidemark's watchdog speaks: ``/start`` when a job starts, ``/<exit status>``
when it ends (0 is success, 1-255 a failure), with the tail of its output as the body, and
the same ``rid`` run id on both so the watchdog pairs them and measures the duration. The
watchdog keeps at most ``Ping-Body-Limit`` bytes of a body (told on every answer).

Pings carry no API key: a ping URL is its own secret.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import urlsplit, urlunsplit

import httpx

from . import __version__, retries
from .errors import TidemarkError
from .models import PingResult
from .retries import RetryPolicy

# What the watchdog keeps unless its Ping-Body-Limit says otherwise (its default).
DEFAULT_BODY_LIMIT = 10_000
# A command that could not be started, as shells report it.
EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126
# Pings are short and a job should not wait long on them: a Retry-After of a minute (the
# watchdog's rate window) is the longest waited for.
PING_RETRY = RetryPolicy(attempts=3, max_retry_after=60.0)


def ping_url(base: str, suffix: str, run_id: str | None) -> str:
    """``base`` with ``/suffix`` added to its path (none for ""), its query kept and
    ``rid=run_id`` added."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/") + (f"/{suffix}" if suffix else "")
    query = "&".join(q for q in (parts.query, f"rid={run_id}" if run_id else "") if q)
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


class Pinger:
    """Sends pings to one monitor's ping URL.

    Args:
        url: the monitor's ping URL.
        timeout: seconds for each ping.
        retry: how 429 and 503 are retried (``Retry-After`` honoured).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy = PING_RETRY,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise TidemarkError(f"{url!r} is not an http(s) ping URL")
        self.url = url
        self.retry = retry
        self._sleep = sleep
        self._http = httpx.Client(
            timeout=timeout, headers={"User-Agent": f"tidemark-client/{__version__}"}
        )

    def close(self) -> None:
        self._http.close()

    def ping(self, suffix: str = "", *, body: bytes = b"", run_id: str | None = None) -> PingResult:
        """Send one ping: ``suffix`` is ``start``, ``fail``, ``log``, an exit status
        (``"0"`` ... ``"255"``) or "" (success). POST with ``body`` (the watchdog keeps
        its first ``Ping-Body-Limit`` bytes).

        Raises:
            ProblemError: the watchdog refused it (404 ``not found``, 400, 429 past the
                retries).
            TransportError: no answer.
        """
        request = self._http.build_request(
            "POST",
            ping_url(self.url, suffix, run_id),
            content=body,
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )
        response = retries.send(
            self._http, request, policy=self.retry, idempotent=False, sleep=self._sleep
        )
        retries.raise_for_problem(response)
        limit = response.headers.get("Ping-Body-Limit", "")
        return PingResult(
            status_code=response.status_code,
            text=response.text,
            body_limit=int(limit) if limit.isdigit() else None,
        )


class OutputTail:
    """The last ``limit`` bytes written by a command's stdout and stderr, interleaved as
    they arrive (thread-safe)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._chunks and self._size - len(self._chunks[0]) >= self.limit:
                self._size -= len(self._chunks.popleft())

    def value(self) -> bytes:
        with self._lock:
            return b"".join(self._chunks)[-self.limit :] if self.limit else b""


def _pump(source: BinaryIO, sink: BinaryIO, tail: OutputTail) -> None:
    """Copy ``source`` to ``sink`` as it comes, keeping its tail."""
    for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
        tail.add(chunk)
        sink.write(chunk)
        sink.flush()


@dataclass(frozen=True)
class RunOutcome:
    """What ``run_command`` saw: the command's exit status (128 + N when killed by
    signal N, 127 when not found, 126 when not executable) and its output's tail."""

    exit_status: int
    tail: bytes


def run_command(
    argv: Sequence[str],
    *,
    tail_limit: int,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
) -> RunOutcome:
    """Run ``argv``, passing its stdout and stderr through to ours while keeping the last
    ``tail_limit`` bytes of both."""
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr.buffer
    tail = OutputTail(tail_limit)
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        message = f"tidemark run: command not found: {argv[0]}\n".encode()
        stderr.write(message)
        return RunOutcome(EXIT_NOT_FOUND, message[-tail_limit:])
    except PermissionError:
        message = f"tidemark run: permission denied: {argv[0]}\n".encode()
        stderr.write(message)
        return RunOutcome(EXIT_NOT_EXECUTABLE, message[-tail_limit:])
    pumps = [
        threading.Thread(target=_pump, args=(process.stdout, stdout, tail), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, stderr, tail), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    code = process.wait()
    for pump in pumps:
        pump.join()
    return RunOutcome(128 - code if code < 0 else code, tail.value())


def run_with_pings(
    pinger: Pinger,
    argv: Sequence[str],
    *,
    warn: Callable[[str], None],
    run_id: str | None = None,
    **streams: BinaryIO,
) -> int:
    """Wrap a job in pings, as cron wrappers for dead-man's switches do: ``/start``, run
    it, then ``/<exit status>`` with the tail of its output (at most the watchdog's
    ``Ping-Body-Limit`` bytes) as the body, both with the same ``rid``.

    A ping that fails is reported through ``warn`` and does not stop the job: a watchdog
    that is down must not take the job down with it (it will page for the missing ping).

    Returns:
        The command's exit status (see ``RunOutcome``).
    """
    run_id = run_id or str(uuid.uuid4())
    limit = DEFAULT_BODY_LIMIT
    try:
        started = pinger.ping("start", run_id=run_id)
        limit = started.body_limit or limit
    except TidemarkError as exc:
        warn(f"start ping failed: {exc}")
    outcome = run_command(argv, tail_limit=limit, **streams)
    try:
        pinger.ping(str(min(outcome.exit_status, 255)), body=outcome.tail, run_id=run_id)
    except TidemarkError as exc:
        warn(f"exit ping failed: {exc}")
    return outcome.exit_status
