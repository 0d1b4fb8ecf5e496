"""Helpers shared by the benchmarks (``ingest.py``, ``delivery.py``, ``freshness.py``...).

The options and the start and end every bench shares, services and bench databases,
gunicorn on a loopback port, machine info, percentiles and CPU accounting on a possibly
shared machine. Nothing here imports Django at module level:
the benchmarks set their environment (``DATABASE_URL``...) before ``django.setup()``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
VENV_BIN = ROOT / ".venv" / "bin"


PG_SERVER = "postgres://postgres@127.0.0.1:5432"


# --- what every bench's main shares ------------------------------------------------------


def add_service_args(
    parser: argparse.ArgumentParser,
    *,
    broker_url: str,
    output: str,
    db_name: str | None = None,
    db_prefix: str | None = None,
) -> None:
    """Add ``--pg`` (the PostgreSQL server URL), ``--db-name`` (default ``db_name``) or
    ``--db-prefix`` (default ``db_prefix``), ``--broker-url`` (default ``broker_url``),
    ``--keep`` (keep the bench databases) and ``--output`` (default ``output``, a file
    name under ``bench/results``)."""
    parser.add_argument("--pg", default=PG_SERVER)
    if db_name is not None:
        parser.add_argument("--db-name", default=db_name)
    if db_prefix is not None:
        parser.add_argument("--db-prefix", default=db_prefix)
    parser.add_argument("--broker-url", default=broker_url)
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / output)


def bench_start(pg: str) -> None:
    """Run from the repository root, with PostgreSQL and Redis up (else exit with a hint)
    and ``bench/results`` made."""
    os.chdir(ROOT)
    check_services(pg)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)


def bench_end(
    *, pg: str, databases: list[str], keep: bool, broker_url: str, doorbells: tuple[str, ...]
) -> None:
    """Close this process's Django connections (if it set Django up), drop ``databases``
    unless ``keep``, and clear the doorbell lists (``clear_doorbells`` with ``doorbells``)."""
    with contextlib.suppress(Exception):
        from django.db import connections

        connections.close_all()
    if not keep:
        drop_databases(pg, databases)
    clear_doorbells(broker_url, doorbells)


# --- services and databases -------------------------------------------------------------


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
        return True
    return False


def check_services(pg: str) -> None:
    """Exit with a hint when PostgreSQL (``pg``, a server URL) or Redis is not reachable."""
    import psycopg

    try:
        with psycopg.connect(f"{pg}/postgres", connect_timeout=3):
            pass
    except psycopg.Error as exc:
        sys.exit(f"PostgreSQL is not reachable at {pg}: {exc} (try: bin/ensure-services)")
    if not port_open("127.0.0.1", 6379):
        sys.exit("Redis is not reachable at 127.0.0.1:6379 (try: bin/ensure-services)")


def recreate_databases(pg: str, names: list[str]) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')


def drop_databases(pg: str, names: list[str]) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def clear_doorbells(url: str, extra: tuple[str, ...] = ()) -> None:
    """Delete the doorbell queues and kombu bindings a bench leaves in Redis (plus the
    ``extra`` keys); only those keys, never the whole database."""
    if not url.startswith("redis://"):
        return
    import redis

    with contextlib.suppress(redis.RedisError):
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
        names = ["delivery", "default", *extra]
        for pattern in ("_kombu.binding.*", "_kombu.binding_permanent.*"):
            names.extend(client.scan_iter(match=pattern))
        client.delete(*names)


def bench_env(
    pg: str, databases: list[str], broker_url: str, *, database_url: str | None = None, **extra
) -> dict[str, str]:
    """The environment of a catalog bench process: this process's environment plus the
    bench databases (``databases`` = [catalog, watchdog] on server ``pg``), the broker and
    ``config.settings.bench``; ``extra`` adds settings. ``database_url`` overrides the
    catalog's URL (e.g. to tag it with an application_name)."""
    return {
        **os.environ,
        "DATABASE_URL": database_url or f"{pg}/{databases[0]}",
        "WATCHDOG_DATABASE_URL": f"{pg}/{databases[1]}",
        "CELERY_BROKER_URL": broker_url,
        "DJANGO_SETTINGS_MODULE": "config.settings.bench",
        "DJANGO_DEBUG": "false",
        **extra,
    }


def migrate(env: dict[str, str]) -> None:
    for database in ("default", "watchdog"):
        subprocess.run(
            [
                sys.executable,
                "manage.py",
                "migrate",
                "--noinput",
                "-v",
                "0",
                "--database",
                database,
            ],
            cwd=ROOT,
            env=env,
            check=True,
        )


# --- seeding with INSERT ... SELECT --------------------------------------------------------

# The zero value a seeding INSERT gives a NOT NULL column it does not name, by data type.
ZERO_VALUES = {
    "boolean": "false",
    "smallint": "0",
    "integer": "0",
    "bigint": "0",
    "numeric": "0",
    "double precision": "0",
    "text": "''",
    "character varying": "''",
    "jsonb": "'[]'::jsonb",
    "timestamp with time zone": "now()",
    "uuid": "gen_random_uuid()",
}
_INSERT = re.compile(r"INSERT INTO (\w+)\s*\((.*?)\)\s*(?:OVERRIDING SYSTEM VALUE\s*)?SELECT", re.S)
_REQUIRED_COLUMNS_SQL = (
    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s"
    " AND is_nullable = 'NO' AND column_default IS NULL AND is_identity = 'NO'"
)


def fill_required(
    statement: str,
    fetch: Callable[[str, list], list[tuple]],
    filled: dict[str, list[str]],
    zeros: dict[str, str] | None = None,
) -> str:
    """``statement`` (an ``INSERT INTO t (cols) SELECT ... FROM ...`` naming the models'
    columns as written) with every NOT NULL column added since (no database default:
    Django keeps defaults in Python) added, valued its type's zero (``ZERO_VALUES``, then
    ``zeros``; ``DEFAULT`` for a type neither knows). Any other statement is returned as
    it is.

    Args:
        fetch: runs a query (SQL, params) on the seeded database and returns its rows.
        filled: gets ``{table: [columns filled]}`` for the report.
    """
    match = _INSERT.search(statement)
    if not match:
        return statement
    table, given = match.group(1), {c.strip() for c in match.group(2).split(",")}
    missing = [(c, t) for c, t in fetch(_REQUIRED_COLUMNS_SQL, [table]) if c not in given]
    if not missing:
        return statement
    zero = {**ZERO_VALUES, **(zeros or {})}
    filled[table] = sorted(c for c, _ in missing)
    cols = "".join(f", {c}" for c, _ in missing)
    vals = "".join(f", {zero.get(t, 'DEFAULT')}" for _, t in missing)
    from_at = re.compile(r"\n\s*FROM ").search(statement, match.end()).start()
    return (
        statement[: match.end(2)]
        + cols
        + statement[match.end(2) : from_at]
        + vals
        + statement[from_at:]
    )


# --- gunicorn ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """gunicorn serving ``config.settings.bench`` on a loopback port."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        workers: int,
        worker_class: str = "sync",
        threads: int = 1,
        log: Path = RESULTS_DIR / "gunicorn.log",
    ) -> None:
        self.port = free_port()
        self.log = log
        self.argv = [
            str(VENV_BIN / "gunicorn"),
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(workers),
            "--worker-class",
            worker_class,
            "--threads",
            str(threads),
            "--backlog",
            "2048",
            "--keep-alive",
            "5",
            "--graceful-timeout",
            "5",
            "--log-level",
            "warning",
            "--error-logfile",
            "-",  # stderr, which start() sends to self.log with Django's own logging
        ]
        self.env = {**env, "DJANGO_SETTINGS_MODULE": "config.settings.bench"}
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.unlink(missing_ok=True)
        self.proc = spawn_logged(self.argv, self.env, self.log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.proc.returncode}; see {self.log}")
            url = f"{self.base_url}/healthz"  # always http://127.0.0.1
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(url, timeout=2) as resp,  # noqa: S310
            ):
                if resp.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer /healthz within 30 s; see {self.log}")

    def stop(self) -> None:
        stop_process(self.proc)

    def log_summary(self) -> dict[str, Any]:
        return log_summary(self.log)


def http_answer(status: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """A whole HTTP/1.1 response with a body."""
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
    return head.encode() + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload


def serve_http(port: int, respond) -> None:
    """A minimal asyncio HTTP/1.1 server with keep-alive on 127.0.0.1:``port``, for the
    benchmarks' receivers, which must cost as little as a receiver can.

    ``await respond(conn, method, target, headers, body, arrived)`` returns the response
    bytes; ``conn`` numbers connections, ``headers`` has lower-cased names, ``arrived`` is
    ``time.time()`` once the body is read. Chunked bodies are answered 501. Runs forever.
    """
    import asyncio

    connections = iter(range(1 << 62))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = next(connections)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head[:-4].split(b"\r\n")
                method, target, _ = lines[0].split(b" ", 2)
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    headers[name.strip().lower()] = value.strip()
                if b"transfer-encoding" in headers:
                    writer.write(http_answer("501 Not Implemented", b"{}"))
                    await writer.drain()
                    return
                length = int(headers.get(b"content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                writer.write(await respond(conn, method, target, headers, body, time.time()))
                if headers.get(b"connection", b"").lower() == b"close":
                    await writer.drain()
                    return
                if writer.transport.get_write_buffer_size() > 65536:
                    await writer.drain()
        except ConnectionError:
            return
        finally:
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


class ReceiverProcess:
    """A loopback HTTP receiver in its own process (multiprocessing ``spawn``: no Django
    inside). ``target(port)`` serves it and must answer ``GET /_count`` (JSON ``count``),
    ``GET /_dump`` (the records) and ``POST /_reset``."""

    def __init__(self, target, name: str) -> None:
        import multiprocessing

        self.port = free_port()
        self.proc = multiprocessing.get_context("spawn").Process(
            target=target, args=(self.port,), name=name, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it and wait (up to 15 s) until it answers."""
        self.proc.start()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                self._call("/_count")
                return
            time.sleep(0.1)
        raise RuntimeError("the receiver did not start within 15 s")

    def _call(self, path: str, method: str = "GET") -> bytes:
        url = f"{self.base_url}{path}"  # always http://127.0.0.1
        request = urllib.request.Request(url, method=method)  # noqa: S310
        with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310 - loopback
            return resp.read()

    def count(self) -> int:
        return json.loads(self._call("/_count"))["count"]

    def dump(self) -> list[list]:
        return json.loads(self._call("/_dump"))

    def reset(self) -> None:
        self._call("/_reset", "POST")

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(timeout=5)


# wrk (https://github.com/wg/wrk) reporting shared by the benchmarks' Lua scripts: per
# thread status counters, and one WRK_JSON summary line (plus the first error body).
# A bench's own script adds ``init`` and ``request``; each thread gets an ``id``.
WRK_REPORTING_LUA = r"""
local threads = {}
local next_id = 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

c200, c201, cother, errbody = 0, 0, 0, ""

function response(status, headers, body)
  if status == 201 then c201 = c201 + 1
  elseif status == 200 then c200 = c200 + 1
  else
    cother = cother + 1
    if errbody == "" then errbody = tostring(status) .. " " .. string.sub(body, 1, 300) end
  end
end

function done(summary, latency, requests)
  local s200, s201, sother, err = 0, 0, 0, ""
  for _, t in ipairs(threads) do
    s200 = s200 + t:get("c200")
    s201 = s201 + t:get("c201")
    sother = sother + t:get("cother")
    if err == "" then err = t:get("errbody") end
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,'
    .. '"status":%d,"timeout":%d},"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,'
    .. '"mean":%.1f},"status":{"200":%d,"201":%d,"other":%d}}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, s200, s201, sother))
  if err ~= "" then io.write("WRK_ERRBODY " .. err .. "\n") end
end
"""


def write_temp(text: str, *, prefix: str, suffix: str) -> str:
    """Write ``text`` to a new temporary file; returns its path (the caller removes it)."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def wrk_script(request_lua: str, *, prefix: str = "tidemark-bench-") -> str:
    """A wrk script file: ``request_lua`` (``init``, ``request``) plus the reporting."""
    return write_temp(WRK_REPORTING_LUA + request_lua, prefix=prefix, suffix=".lua")


def wrk_version() -> str:
    out = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def run_wrk(
    script: str, url: str, *, clients: int, threads: int, seconds: float, args: list[str]
) -> dict[str, Any]:
    """Run wrk with ``script`` against ``url`` (``args`` go to the script's ``init``).

    Returns requests, seconds, rate (/s), latency percentiles (ms), status counts, socket
    errors and the first error body.

    Raises:
        RuntimeError: wrk printed no summary.
    """
    argv = [
        *("wrk", f"-t{threads}", f"-c{clients}", f"-d{max(1, round(seconds))}s"),
        *("--timeout", "30s", "-s", script, url, "--", *args),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    data, errbody = None, None
    for line in out.stdout.splitlines():
        if line.startswith("WRK_JSON "):
            data = json.loads(line[len("WRK_JSON ") :])
        elif line.startswith("WRK_ERRBODY "):
            errbody = line[len("WRK_ERRBODY ") :]
    if data is None:
        raise RuntimeError(f"wrk printed no summary:\n{out.stdout}\n{out.stderr}")
    secs = data["duration_us"] / 1e6
    lat = data["latency_us"]
    return {
        "requests": data["requests"],
        "seconds": round(secs, 3),
        "rate": round(data["requests"] / secs, 1),
        "p50_ms": round(lat["p50"] / 1000, 2),
        "p90_ms": round(lat["p90"] / 1000, 2),
        "p99_ms": round(lat["p99"] / 1000, 2),
        "max_ms": round(lat["max"] / 1000, 2),
        "mean_ms": round(lat["mean"] / 1000, 2),
        "status": data["status"],
        "socket_errors": data["errors"],
        "first_error": errbody,
    }


def spawn_logged(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start ``argv`` from the repository root with ``env``, stdin closed, stdout and
    stderr appended to ``log``, in a session of its own (``stop_process`` signals the
    whole group)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_consuming(
    procs: list[subprocess.Popen], broker_url: str, log: Path, timeout: float = 120
) -> float:
    """Wait until every Celery worker in ``procs`` consumes from the Redis broker at
    ``broker_url`` (kombu's Redis transport waits for messages in ``BRPOP``: one such client
    per worker on the broker's database). Workers log through Tidemark's own logging, so
    Celery's "ready." line is not a signal to wait for.

    Returns:
        Seconds waited.

    Raises:
        RuntimeError: a worker exited, or not all consume within ``timeout`` seconds (the
            workers are stopped first); the message names ``log``.
    """
    import redis

    started = time.monotonic()
    client = redis.Redis.from_url(broker_url, socket_connect_timeout=1)
    db = str(client.connection_pool.connection_kwargs.get("db", 0))
    while True:
        consuming = sum(
            1 for c in client.client_list() if c.get("db") == db and c.get("cmd") == "brpop"
        )
        if consuming >= len(procs):
            return time.monotonic() - started
        if any(p.poll() is not None for p in procs) or time.monotonic() - started > timeout:
            for proc in procs:
                stop_process(proc)
            raise RuntimeError(f"worker did not start consuming; see {log}")
        time.sleep(0.1)


def stop_process(proc: subprocess.Popen | None, timeout: float = 15) -> None:
    """SIGTERM a process this bench started (in its own session), SIGKILL its group if it
    does not exit within ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # our own process's group only
        proc.wait(timeout=5)


def log_summary(log: Path) -> dict[str, Any]:
    """Counts of tracebacks, errors and warnings in a server's log, and the first few."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    errors = [line for line in lines if " ERROR " in line or "[ERROR]" in line]
    warnings = [line for line in lines if " WARNING " in line or "[WARNING]" in line]
    return {
        "log": str(log.relative_to(ROOT)),
        "tracebacks": sum(line.startswith("Traceback") for line in lines),
        "errors": len(errors),
        "warnings": len(warnings),
        "first_errors": errors[:5],
        "first_warnings": warnings[:5],
    }


# --- statistics -------------------------------------------------------------------------


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (nan when empty)."""
    if not sorted_values:
        return math.nan
    rank = max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)
    return sorted_values[rank]


# --- machine info -----------------------------------------------------------------------


def machine_info(pg: str, tools: dict[str, Any], note: str) -> dict[str, Any]:
    """Host, CPU, memory, versions, PostgreSQL durability settings and the git commit;
    ``tools`` (e.g. the load generator's version) is merged in after Redis."""
    import django
    import gunicorn
    import psycopg

    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        meminfo = Path("/proc/meminfo").read_text().splitlines()[0]
        mem_gb = round(int(meminfo.split()[1]) / 1024 / 1024, 1)
    pg_info: dict[str, Any] = {}
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(f"{pg}/postgres") as conn,
    ):
        pg_info["version"] = conn.execute("SHOW server_version").fetchone()[0]
        for setting in (
            "synchronous_commit",
            "fsync",
            "wal_sync_method",
            "shared_buffers",
            "max_connections",
        ):
            pg_info[setting] = conn.execute(f"SHOW {setting}").fetchone()[0]
    redis_version = None
    with contextlib.suppress(Exception):
        import redis

        redis_version = redis.Redis(socket_connect_timeout=1).info("server")["redis_version"]
    git = {}
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        git["commit"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        git["dirty"] = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "memory_gb": mem_gb,
        "python": platform.python_version(),
        "django": django.get_version(),
        "gunicorn": gunicorn.__version__,
        "psycopg": psycopg.__version__,
        "postgresql": pg_info,
        "redis": redis_version,
        **tools,
        "git": git,
        "note": note,
    }


# --- CPU accounting ---------------------------------------------------------------------
#
# The machine may be shared: other processes' CPU time during a run makes the figures
# unreliable, so each run records who used the CPUs. "Ours" is the process trees the bench
# started (gunicorn, a worker, a receiver...), this process's waited-for children (a load
# generator), the bench database's PostgreSQL backends plus PostgreSQL's shared background
# processes, and Redis; "foreign" is everything else.

HZ = os.sysconf("SC_CLK_TCK")
_PG_AUX = ("checkpointer", "background writer", "walwriter", "autovacuum", "logical replication")


def machine_busy() -> dict[str, int]:
    """Jiffies over all CPUs since boot: ``tasks`` (user, nice, system: what processes
    are charged with), ``irq`` (hard and soft interrupts, e.g. loopback networking) and
    ``steal`` (taken by the hypervisor for other guests). iowait counts as idle."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return {"tasks": v[0] + v[1] + v[2], "irq": v[5] + v[6], "steal": v[7]}


def processes() -> dict[int, tuple[int, int, str]]:
    """``pid -> (ppid, utime + stime jiffies, cmdline)`` for every readable process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), cmdline)
    return table


class CpuMeter:
    """CPU jiffies used during a window, split into the bench's process trees, PostgreSQL,
    Redis, waited-for children and foreign (everything else on the machine).

    Args:
        trees: ``category -> root pid``; each root's descendants count to it, except
            descendants that are another tree's root.
        databases: the bench databases, whose backends count as ``postgres``.
        children: category for this process's waited-for children (``RUSAGE_CHILDREN``),
            or None to leave them out.
        pg_clients: ``(server URL, application_name -> category)``; when given, each
            snapshot asks PostgreSQL which client each backend serves (the report adds
            ``postgres_cpu_ms_per_<unit>_by_client``; other clients: ``other``), and counts
            the sessions opened per database, and the report adds a ``postgres_exited``
            category: CPU of backends that exited during the window (the postmaster's
            reaped children), which a per-process view cannot see. It is exact only when
            no other database opened sessions meanwhile (see ``pg_sessions_opened``).
    """

    def __init__(
        self,
        trees: dict[str, int],
        databases: list[str],
        *,
        children: str | None = "loadgen",
        pg_clients: tuple[str, dict[str, str]] | None = None,
    ) -> None:
        self.trees = dict(trees)
        self.databases = databases
        self.children = children
        self.pg_clients = pg_clients
        self._pg_conn = None

    def _classify(self, table: dict[int, tuple[int, int, str]]) -> dict[int, tuple[str, int]]:
        """``pid -> (category, jiffies)`` for the processes the bench accounts as its own."""
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        roots = {pid: category for category, pid in self.trees.items()}
        ours: dict[int, tuple[str, int]] = {}
        for root, category in roots.items():
            stack = [root]
            while stack:
                pid = stack.pop()
                if pid in table:
                    ours[pid] = (category, table[pid][1])
                stack.extend(c for c in children.get(pid, []) if c not in roots)
        for pid, (_, jiffies, cmdline) in table.items():
            if cmdline.startswith("postgres:"):
                if any(f" {db} " in cmdline for db in self.databases) or any(
                    aux in cmdline for aux in _PG_AUX
                ):
                    ours[pid] = ("postgres", jiffies)
            elif cmdline.startswith("redis-server"):
                ours[pid] = ("redis", jiffies)
        return ours

    def _pg_state(self) -> dict[str, Any]:
        """Backend pid -> client category, and sessions opened so far per database."""
        import psycopg

        url, names = self.pg_clients
        try:
            if self._pg_conn is None or self._pg_conn.closed:
                # One connection for the meter's life: a backend per snapshot would exit
                # and count as ``postgres_exited``.
                self._pg_conn = psycopg.connect(f"{url}/postgres", autocommit=True)
            rows = self._pg_conn.execute(
                "SELECT pid, application_name FROM pg_stat_activity WHERE datname = ANY(%s)",
                [self.databases],
            ).fetchall()
            sessions = dict(
                self._pg_conn.execute(
                    "SELECT datname, sessions FROM pg_stat_database WHERE datname IS NOT NULL"
                ).fetchall()
            )
        except psycopg.Error:
            return {"backends": {}, "sessions": {}}
        return {
            "backends": {pid: names.get(app, "other") for pid, app in rows},
            "sessions": sessions,
        }

    @staticmethod
    def _postmaster_reaped(table: dict[int, tuple[int, int, str]]) -> int:
        """CPU jiffies of the postmaster's exited (reaped) children: cutime + cstime."""
        for ppid, _, cmdline in table.values():
            if cmdline.startswith("postgres:") and "checkpointer" in cmdline:
                with contextlib.suppress(OSError, IndexError, ValueError):
                    stat = Path(f"/proc/{ppid}/stat").read_text().rsplit(")", 1)[1].split()
                    return int(stat[13]) + int(stat[14])
        return 0

    def close(self) -> None:
        if self._pg_conn is not None:
            self._pg_conn.close()
            self._pg_conn = None

    def snapshot(self) -> dict[str, Any]:
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        table = processes()
        snap = {
            "categories": [*self.trees, "postgres", "redis"],
            "procs": self._classify(table),
            "children": self.children,
            "loadgen": (usage.ru_utime + usage.ru_stime) * HZ,  # waited-for children
            "busy": machine_busy(),
            "wall": time.monotonic(),
        }
        if self.pg_clients:
            snap["categories"].append("postgres_exited")
            snap["pg"] = self._pg_state()
            snap["pg_reaped"] = self._postmaster_reaped(table)
        return snap

    def report(
        self, start: dict[str, Any], end: dict[str, Any], count: int, unit: str = "request"
    ) -> dict[str, Any]:
        """CPUs used per category over the window, and CPU milliseconds per ``unit``
        (``count`` of them in the window).

        Per process, so a backend that reconnects (``CONN_MAX_AGE``) or an autovacuum
        worker that comes and goes does not count negative; CPU of a process that exited
        during the window is lost to "foreign" (except PostgreSQL backends with
        ``pg_clients``: ``postgres_exited``).
        """
        seconds = end["wall"] - start["wall"]
        delta = dict.fromkeys(start["categories"], 0.0)
        by_client: dict[str, float] = {}
        backends = {
            **start.get("pg", {}).get("backends", {}),
            **end.get("pg", {}).get("backends", {}),
        }
        for pid, (category, jiffies) in end["procs"].items():
            before = start["procs"].get(pid)
            used = jiffies - (before[1] if before and before[0] == category else 0)
            delta[category] += used
            if category == "postgres" and "pg" in end:
                client = backends.get(pid, "shared (background processes)")
                by_client[client] = by_client.get(client, 0.0) + used
        if start["children"]:
            delta[start["children"]] = end["loadgen"] - start["loadgen"]
        if "pg" in end:
            delta["postgres_exited"] = max(0, end["pg_reaped"] - start["pg_reaped"])
        busy = {k: end["busy"][k] - start["busy"][k] for k in start["busy"]}
        foreign = max(0.0, busy["tasks"] - sum(delta.values()))
        cores = {k: round(v / HZ / seconds, 2) for k, v in delta.items()}
        cores["foreign"] = round(foreign / HZ / seconds, 2)
        cores["irq"] = round(busy["irq"] / HZ / seconds, 2)
        cores["steal"] = round(busy["steal"] / HZ / seconds, 2)
        cores["machine_busy"] = round(sum(busy.values()) / HZ / seconds, 2)
        per_unit = {
            k: round(v / HZ * 1000 / max(1, count), 3)
            for k, v in (*delta.items(), ("foreign", foreign))
        }
        result = {"cores_used": cores, f"cpu_ms_per_{unit}": per_unit}
        if "pg" in end:
            result[f"postgres_cpu_ms_per_{unit}_by_client"] = {
                k: round(v / HZ * 1000 / max(1, count), 3) for k, v in sorted(by_client.items())
            }
            before, after = start["pg"]["sessions"], end["pg"]["sessions"]
            opened = {db: n - before.get(db, 0) for db, n in after.items()}
            ours = sum(opened.get(db, 0) for db in self.databases)
            result["pg_sessions_opened"] = {
                "bench databases": ours,
                "other databases": sum(opened.values()) - ours,
                # Reaped children of other databases' sessions count in postgres_exited too.
                "postgres_exited_is_exact": sum(opened.values()) == ours,
            }
        return result

    @staticmethod
    def background_cores(seconds: float = 1.0) -> float:
        """CPUs busy while the bench itself is idle: other work on this machine."""
        before, started = machine_busy(), time.monotonic()
        time.sleep(seconds)
        after = machine_busy()
        busy = sum(after.values()) - sum(before.values())
        return busy / HZ / (time.monotonic() - started)


def wait_quiet(quiet_cores: float, quiet_wait: float) -> float:
    """Wait (up to ``quiet_wait`` s) until other processes use at most ``quiet_cores``
    CPUs; returns the CPUs busy at the last look."""
    deadline = time.monotonic() + quiet_wait
    told = False
    while True:
        background = CpuMeter.background_cores(1.0)
        if background <= quiet_cores:
            return background
        if time.monotonic() >= deadline:
            print(f"  warning: other processes use {background:.2f} CPUs; measuring anyway")
            return background
        if not told:
            print(f"  machine busy ({background:.2f} CPUs used by others); waiting")
            told = True
        time.sleep(2)


# --- the benchmarked dataset -------------------------------------------------------------

NAMESPACE = "s3://tidemark-bench"
NAME = "curated/orders_daily"
MANIFEST = {"expected_files": 4, "row_count": 18250}
FIRST_DAY = date(1000, 1, 1)  # partition keys: daily dates from year 1000 on, never seen


def partition_key(index: int) -> str:
    return (FIRST_DAY + timedelta(days=index)).isoformat()


def publish_body(key: str) -> str:
    body = {"namespace": NAMESPACE, "name": NAME, "partition": key, "manifest": MANIFEST}
    return json.dumps(body, separators=(",", ":"))
