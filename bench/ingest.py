"""Ingest benchmark: readiness publishes per second through the real HTTP stack.

Run from the repository root (``make bench`` does the same)::

    .venv/bin/python bench/ingest.py

It creates fresh PostgreSQL databases (``tidemark_bench`` and ``tidemark_bench_watchdog``),
migrates them, seeds a producer team, a publish-scoped API key and a daily-partitioned
dataset with two webhook subscribers (so each publish writes partition, revision, event,
notification and two deliveries, then rings the Redis doorbell after commit), starts
gunicorn with ``config.settings.bench`` (the Procfile's 4 sync workers) on a free loopback
port and drives it with 16 concurrent clients (``wrk`` when installed, else a
multiprocessing generator; a sync worker closes each connection after its response).

Targets, measured alternately with one gunicorn config (floor, tidemark, floor, ...):

- ``floor``: ``POST /bench/floor``, a plain Django view doing one INSERT (bench/floor.py);
- ``tidemark``: ``POST /api/v1/readiness``, every request a new partition (real work);
- ``noop``: repeats of already-published partitions (the 200 no-op path), secondary;
- ``hot``: every client repeating the same partition (row-lock serialisation), secondary;
- ``drf`` (``--compare-drf``): the same publish through DRF's whole request cycle
  (``POST /bench/readiness-drf``), what the plain view of the hot path saves.

It prints a table and the ratio tidemark/floor, writes ``bench/results/ingest.json`` and
drops the bench databases at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import shutil
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    FIRST_DAY,
    MANIFEST,
    NAME,
    NAMESPACE,
    RESULTS_DIR,
    ROOT,
    CpuMeter,
    Server,
    bench_env,
    check_services,
    clear_doorbells,
    drop_databases,
    migrate,
    partition_key,
    publish_body,
    recreate_databases,
    run_wrk,
    wait_quiet,
    wrk_script,
    wrk_version,
)
from bench.common import machine_info as _machine_info
from bench.common import percentile as _percentile

TARGET_RATE = 600.0  # publishes/s
TARGET_RATIO = 0.3  # tidemark rate / floor rate

PUBLISH_PATH = "/api/v1/readiness"
FLOOR_PATH = "/bench/floor"
DRF_PATH = "/bench/readiness-drf"

# Partition keys are daily dates from year 1000 on; each load run gets its own slot of
# SLOT_DAYS consecutive days, so every publish in a run names a partition never seen.
SLOT_DAYS = 50_000
NOOP_KEYS = 1_000  # the no-op run cycles over this many already-published partitions

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


# --- arguments --------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (16)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds measured per run (10)")
    p.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before each run")
    p.add_argument("--rounds", type=int, default=3, help="floor+tidemark rounds (3)")
    # Defaults: the Procfile's web process (4 sync workers), what production runs.
    p.add_argument("--workers", type=int, default=4, help="gunicorn workers (4)")
    p.add_argument(
        "--threads", type=int, default=1, help="gunicorn threads per worker (1; > 1: gthread)"
    )
    p.add_argument(
        "--worker-class",
        default="sync",
        help="gunicorn worker class: sync or gthread (sync)",
    )
    p.add_argument(
        "--loadgen",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="load generator: wrk when installed (auto), or the multiprocessing one",
    )
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server")
    p.add_argument("--db-name", default="tidemark_bench")
    p.add_argument(
        "--broker-url",
        default="redis://127.0.0.1:6379/14",
        help="CELERY_BROKER_URL for the server (a dead port measures the doorbell's cost)",
    )
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "ingest.json")
    p.add_argument("--skip-secondary", action="store_true", help="skip the noop and hot runs")
    p.add_argument(
        "--compare-drf",
        action="store_true",
        help="each round, also publish through DRF's request cycle (/bench/readiness-drf)",
    )
    p.add_argument(
        "--cprofile",
        type=int,
        default=0,
        metavar="N",
        help="also cProfile N in-process publishes and save bench/results/publish.prof",
    )
    p.add_argument(
        "--quiet-cores",
        type=float,
        default=0.25,
        help="before each run, wait until other processes use at most this many CPUs (0.25)",
    )
    p.add_argument(
        "--quiet-wait", type=float, default=30.0, help="longest wait for a quiet machine (30 s)"
    )
    p.add_argument("--keep", action="store_true", help="keep the bench databases at the end")
    p.add_argument(
        "--check", action="store_true", help="exit 1 when a target (rate, ratio) is missed"
    )
    args = p.parse_args(argv)
    if args.clients < 1 or args.duration <= 0 or args.rounds < 1:
        p.error("--clients, --duration and --rounds must be positive")
    if not args.db_name.isidentifier() or not args.db_name.islower():
        p.error("--db-name must be a lower-case identifier")
    return args


# --- seeding and in-process profile -----------------------------------------------------


def seed() -> dict[str, Any]:
    """Producer team, publish key, daily dataset, two subscribers; the floor's table."""
    from django.db import connection

    from bench.floor import CREATE_TABLE_SQL
    from catalog.actors import Actor
    from catalog.models import ApiKey
    from catalog.services import datasets, subscriptions, teams

    with connection.cursor() as cursor:
        cursor.execute(CREATE_TABLE_SQL)
    producer = teams.team_create(slug="bench-producer", name="Bench producer")
    key, token = teams.api_key_create(team=producer, name="bench", scopes=[ApiKey.Scope.PUBLISH])
    dataset = datasets.dataset_register(
        actor=Actor(team=producer, api_key=key),
        namespace=NAMESPACE,
        name=NAME,
        partitioning="daily",
        sla_cron="30 6 * * *",
        criticality="high",
        # Each run spends a slot of never-seen daily keys from year 1000 up to 9999, most of
        # them after today: the dataset opts in to future partitions as forecasts do (the
        # check still runs on every publish).
        accepts_future_partitions=True,
    )
    for i in (1, 2):
        consumer = teams.team_create(slug=f"bench-consumer-{i}", name=f"Bench consumer {i}")
        subscriptions.subscription_create(
            actor=Actor(team=consumer),
            dataset=dataset,
            endpoint_url=f"https://hooks.example.invalid/bench/{i}",
        )
    assert (dataset.namespace, dataset.name) == (NAMESPACE, NAME), "identity was normalised"
    return {"token": token, "dataset_id": dataset.pk, "subscribers": 2}


def _sql_digest(sql: str) -> str:
    sql = " ".join(sql.split())
    return sql if len(sql) <= 160 else sql[:157] + "..."


def profile_queries(token: str, slot_start: int) -> dict[str, Any]:
    """Queries and time of one publish through Django's test client (no HTTP, no gunicorn).

    ``CaptureQueriesContext`` counts statements (BEGIN, SAVEPOINT and COMMIT included); an
    execute wrapper times each one with ``perf_counter`` (Django's own timings are rounded
    to milliseconds). Transaction control is not timed by the wrapper.
    """
    from django.db import connections
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="127.0.0.1")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    timings: list[float] = []

    def timer(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            timings.append((time.perf_counter() - started) * 1000)

    def publish(index: int):
        default, watchdog = connections["default"], connections["watchdog"]
        timings.clear()
        with (
            CaptureQueriesContext(default) as cap,
            CaptureQueriesContext(watchdog) as wcap,
            default.execute_wrapper(timer),
        ):
            wall, cpu = time.perf_counter(), time.process_time()
            resp = client.post(
                PUBLISH_PATH, publish_body(partition_key(index)), "application/json", **headers
            )
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        timed = iter(timings)
        queries = []
        for q in cap.captured_queries:
            entry: dict[str, Any] = {"sql": _sql_digest(q["sql"])}
            if q["sql"] not in ("BEGIN", "COMMIT", "ROLLBACK"):
                entry["ms"] = round(next(timed, math.nan), 3)
            queries.append(entry)
        return resp, queries, len(wcap.captured_queries), wall * 1000, cpu * 1000

    def floor():
        with CaptureQueriesContext(connections["default"]) as cap:
            resp = client.post(FLOOR_PATH, publish_body("x"), "application/json")
        return resp, len(cap.captured_queries)

    first, first_q, *_ = publish(slot_start)  # cold: also refreshes api key last_used_at
    assert first.status_code == 201, first.content
    new, new_q, watchdog_q, *_ = publish(slot_start + 1)
    assert new.status_code == 201, new.content
    noop, noop_q, *_ = publish(slot_start + 1)
    assert noop.status_code == 200, noop.content
    floor_resp, floor_q = floor()
    assert floor_resp.status_code == 201, floor_resp.content

    # In-process timing of new-partition publishes, one after another.
    n = 200
    walls, cpus, sqls = [], [], []
    for i in range(n):
        resp, queries, _, wall, cpu = publish(slot_start + 2 + i)
        assert resp.status_code == 201, resp.content
        walls.append(wall)
        cpus.append(cpu)
        sqls.append(sum(q.get("ms", 0) for q in queries))
    return {
        "method": "django.test.Client in-process (no gunicorn): CaptureQueriesContext counts, "
        "an execute_wrapper times statements",
        "publish_new_partition": {"queries": len(new_q), "sql": new_q},
        "publish_first_request_of_key_per_minute": {
            "queries": len(first_q),
            "extra": "UPDATE catalog_apikey SET last_used_at (at most once a minute per key)",
        },
        "publish_noop_repeat": {"queries": len(noop_q), "sql": noop_q},
        "watchdog_db_queries": watchdog_q,
        "floor_queries": floor_q,
        "hidden_per_request": "a connection idle longer than DATABASE_HEALTH_CHECK_DELAY (1 s) "
        "is checked with a SELECT 1 before reuse (not captured: it bypasses Django's cursor "
        "wrapper); under load, none is",
        "in_process_timing": {
            "publishes": n,
            "wall_ms_median": round(statistics.median(walls), 3),
            "python_cpu_ms_median": round(statistics.median(cpus), 3),
            "statement_wall_ms_median": round(statistics.median(sqls), 3),
            "doorbell_send_ms_median": _time_doorbell(),
        },
        "keys_used": n + 2,
    }


def _time_doorbell() -> float | None:
    """Median wall time of one doorbell send (``app.send_task``) to the configured broker."""
    from catalog import doorbell

    samples = []
    for _ in range(200):
        started = time.perf_counter()
        doorbell._send(doorbell.DELIVER_DUE)
        samples.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(samples), 3)


def cprofile_publishes(token: str, slot_start: int, n: int) -> str:
    import cProfile
    import io
    import pstats

    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(n):
        client.post(PUBLISH_PATH, publish_body(partition_key(slot_start + i)), "application/json")
    profiler.disable()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(RESULTS_DIR / "publish.prof")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
    return out.getvalue()


def published_run(first: int, limit: int) -> tuple[int, int]:
    """The first run of consecutive published partitions from index ``first`` on:
    ``(start index, length)``, length at most ``limit``.

    wrk calls ``request()`` once to verify the script, so a run's first key may be skipped.
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key FROM catalog_partition WHERE key >= %s AND key <= %s",
            [partition_key(first), partition_key(first + limit + 64)],
        )
        have = {row[0] for row in cursor.fetchall()}
    connection.close()
    start = next((i for i in range(first, first + 64) if partition_key(i) in have), first)
    n = 0
    while n < limit and partition_key(start + n) in have:
        n += 1
    if n < 16:
        raise RuntimeError(f"only {n} partitions published from {partition_key(first)} on")
    return start, n


def count_rows() -> dict[str, int]:
    from django.db import connection

    tables = [
        "catalog_partition",
        "catalog_partitionrevision",
        "catalog_readinessevent",
        "catalog_notification",
        "catalog_delivery",
        "bench_floor",
    ]
    counts = {}
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 - fixed names
            counts[table] = cursor.fetchone()[0]
    connection.close()
    return counts


# --- load generators --------------------------------------------------------------------

# wrk script: every request a new daily partition key (day number -> civil date, Howard
# Hinnant's algorithm), or the floor/noop/hot variants. Args: mode path token first_day
# span.
WRK_LUA = r"""
local mode, path, token, first_day, span, nthreads
local counter = 0

local function civil(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  if m <= 2 then y = y + 1 end
  return string.format("%04d-%02d-%02d", y, m, d)
end

function init(args)
  mode, path, token = args[1], args[2], args[3]
  first_day, span, nthreads = tonumber(args[4]), tonumber(args[5]), tonumber(args[6])
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if token ~= "-" then wrk.headers["Authorization"] = "Bearer " .. token end
end

function request()
  local offset = 0
  if mode ~= "hot" then
    offset = (id + nthreads * counter) % span
  end
  counter = counter + 1
  local body = string.format(
    '{"namespace":"%s","name":"%s","partition":"%s","manifest":%s}',
    "NAMESPACE", "NAME", civil(first_day + offset), 'MANIFEST')
  return wrk.format(nil, path, nil, body)
end
"""


class WrkLoad:
    name = "wrk"

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.threads = 1  # one event loop drives 16 connections; leaves CPU to the server
        self.script = wrk_script(
            WRK_LUA.replace('"NAMESPACE"', json.dumps(NAMESPACE))
            .replace('"NAME"', json.dumps(NAME))
            .replace("'MANIFEST'", json.dumps(json.dumps(MANIFEST, separators=(",", ":"))))
        )

    def version(self) -> str:
        return wrk_version()

    def run(
        self, url: str, mode: str, path: str, token: str, first: int, span: int, seconds: float
    ) -> dict[str, Any]:
        first_day = (FIRST_DAY.toordinal() - _EPOCH_ORDINAL) + first
        return run_wrk(
            self.script,
            url,
            clients=self.clients,
            threads=self.threads,
            seconds=seconds,
            args=[mode, path, token or "-", str(first_day), str(span), str(self.threads)],
        )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.script)


def _python_worker(job: dict[str, Any], queue) -> None:
    """One load process: ``job["threads"]`` threads, each with its own keep-alive client."""
    import logging
    import threading

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)  # Django's LOGGING is inherited
    headers = {"Content-Type": "application/json"}
    if job["token"]:
        headers["Authorization"] = f"Bearer {job['token']}"
    results: list[tuple[list[float], dict[str, int], str | None, int]] = []
    lock = threading.Lock()

    def client_loop(global_id: int) -> None:
        latencies: list[float] = []
        status: dict[str, int] = {"200": 0, "201": 0, "other": 0}
        first_error, socket_errors, counter = None, 0, 0
        with httpx.Client(base_url=job["url"], headers=headers, timeout=30) as client:
            while time.time() < job["start_at"]:
                time.sleep(0.001)
            while time.time() < job["stop_at"]:
                if job["mode"] == "hot":
                    offset = 0
                else:
                    offset = (global_id + job["clients"] * counter) % job["span"]
                counter += 1
                body = publish_body(partition_key(job["first"] + offset))
                started = time.perf_counter()
                try:
                    resp = client.post(job["path"], content=body)
                except httpx.HTTPError:
                    socket_errors += 1
                    continue
                latencies.append(time.perf_counter() - started)
                code = str(resp.status_code)
                if code in status:
                    status[code] += 1
                else:
                    status["other"] += 1
                    first_error = first_error or f"{code} {resp.text[:300]}"
        with lock:
            results.append((latencies, status, first_error, socket_errors))

    threads = [
        threading.Thread(target=client_loop, args=(job["first_id"] + i,))
        for i in range(job["threads"])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(results)


class PythonLoad:
    """Fallback without wrk: 2 processes x (clients / 2) threads, httpx keep-alive clients."""

    name = "python-multiprocessing-httpx"

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.processes = min(2, clients)

    def version(self) -> str:
        import httpx

        return f"httpx {httpx.__version__}, {self.processes} processes"

    def run(
        self, url: str, mode: str, path: str, token: str, first: int, span: int, seconds: float
    ) -> dict[str, Any]:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        start_at = time.time() + 1.0  # every process connected and waiting
        per = [self.clients // self.processes] * self.processes
        for i in range(self.clients % self.processes):
            per[i] += 1
        procs, first_id = [], 0
        for n in per:
            job = {
                "url": url,
                "mode": mode,
                "path": path,
                "token": token,
                "first": first,
                "span": span,
                "clients": self.clients,
                "threads": n,
                "first_id": first_id,
                "start_at": start_at,
                "stop_at": start_at + seconds,
            }
            first_id += n
            proc = ctx.Process(target=_python_worker, args=(job, queue))
            proc.start()
            procs.append(proc)
        gathered = [queue.get(timeout=seconds + 60) for _ in procs]
        for proc in procs:
            proc.join(timeout=10)
        latencies: list[float] = []
        status = {"200": 0, "201": 0, "other": 0}
        first_error, socket_errors = None, 0
        for results in gathered:
            for lat, st, err, sock in results:
                latencies.extend(lat)
                for k, v in st.items():
                    status[k] += v
                first_error = first_error or err
                socket_errors += sock
        latencies.sort()
        ms = [x * 1000 for x in latencies]
        return {
            "requests": len(ms),
            "seconds": round(seconds, 3),
            "rate": round(len(ms) / seconds, 1),
            "p50_ms": round(_percentile(ms, 50), 2),
            "p90_ms": round(_percentile(ms, 90), 2),
            "p99_ms": round(_percentile(ms, 99), 2),
            "max_ms": round(ms[-1], 2) if ms else math.nan,
            "mean_ms": round(statistics.fmean(ms), 2) if ms else math.nan,
            "status": status,
            "socket_errors": {"total": socket_errors},
            "first_error": first_error,
        }

    def close(self) -> None:
        pass


def make_loadgen(choice: str, clients: int):
    has_wrk = shutil.which("wrk") is not None
    if choice == "wrk" and not has_wrk:
        sys.exit("wrk is not installed (Debian: apt-get install -y wrk); try --loadgen python")
    if choice == "wrk" or (choice == "auto" and has_wrk):
        return WrkLoad(clients)
    if choice == "auto":
        print("wrk not found; using the multiprocessing load generator (slower client side)")
    return PythonLoad(clients)


# --- machine info -----------------------------------------------------------------------


def machine_info(args: argparse.Namespace, loadgen) -> dict[str, Any]:
    return _machine_info(
        args.pg,
        {"loadgen": loadgen.version()},
        "load generator, gunicorn, PostgreSQL and Redis share the same CPUs",
    )


# --- orchestration ----------------------------------------------------------------------


class Bench:
    def __init__(
        self, args: argparse.Namespace, server: Server, loadgen, token: str, meter: CpuMeter
    ) -> None:
        self.args = args
        self.server = server
        self.loadgen = loadgen
        self.token = token
        self.meter = meter
        self.next_slot = 1  # slot 0: the in-process profile
        self.runs: list[dict[str, Any]] = []

    def slot(self) -> int:
        first = self.next_slot * SLOT_DAYS
        self.next_slot += 1
        if (FIRST_DAY + timedelta(days=first + SLOT_DAYS)).year > 9999:
            raise RuntimeError("out of partition key space; use fewer rounds")
        return first

    def _load(
        self, target: str, mode: str, first: int, span: int, seconds: float
    ) -> dict[str, Any]:
        path, token = (FLOOR_PATH, "") if mode == "floor" else (PUBLISH_PATH, self.token)
        if target == "drf":
            path = DRF_PATH
        return self.loadgen.run(self.server.base_url, mode, path, token, first, span, seconds)

    def measure(
        self,
        target: str,
        round_no: int,
        mode: str,
        fixed_first: int | None = None,
        span: int = SLOT_DAYS,
    ):
        background = self.wait_quiet()
        if self.args.warmup > 0:
            first = fixed_first if fixed_first is not None else self.slot()
            self._load(target, mode, first, span, self.args.warmup)
        first = fixed_first if fixed_first is not None else self.slot()
        start = self.meter.snapshot()
        result = self._load(target, mode, first, span, self.args.duration)
        result["cpu"] = self.meter.report(start, self.meter.snapshot(), result["requests"])
        result["background_cores_before"] = round(background, 2)
        result.update(
            target=target,
            round=round_no,
            mode=mode,
            first_key=partition_key(first),
            key_span=1 if mode == "hot" else span,
        )
        if result["requests"] >= span and mode in ("publish",):
            result["warning"] = "more requests than keys in the slot: some publishes repeated"
        self.runs.append(result)
        st = result["status"]
        foreign = result["cpu"]["cores_used"]["foreign"]
        print(
            f"  {target:<9} round {round_no}: {result['rate']:8.1f} req/s  "
            f"p50 {result['p50_ms']:6.2f} ms  p99 {result['p99_ms']:7.2f} ms  "
            f"201={st['201']} 200={st['200']} other={st['other']}  "
            f"foreign CPU {foreign:.2f} cores"
            + (f"  first error: {result['first_error']}" if result.get("first_error") else "")
        )
        return result, first

    def wait_quiet(self) -> float:
        """Wait (up to ``--quiet-wait`` s) until other processes leave the CPUs alone."""
        return wait_quiet(self.args.quiet_cores, self.args.quiet_wait)


def summarise(runs: list[dict[str, Any]], target: str) -> dict[str, Any] | None:
    mine = [r for r in runs if r["target"] == target]
    if not mine:
        return None
    rates = [r["rate"] for r in mine]
    best = max(mine, key=lambda r: r["rate"])

    def med(f) -> float:
        return round(statistics.median(f(r) for r in mine), 3)

    return {
        "runs": len(mine),
        "rate_median": round(statistics.median(rates), 1),
        "rate_best": best["rate"],
        "rate_min": min(rates),
        "p50_ms_median": round(med(lambda r: r["p50_ms"]), 2),
        "p99_ms_median": round(med(lambda r: r["p99_ms"]), 2),
        "p50_ms_best_run": best["p50_ms"],
        "p99_ms_best_run": best["p99_ms"],
        "non_2xx": sum(r["status"]["other"] for r in mine),
        "cpu_ms_per_request_median": {
            k: med(lambda r, k=k: r["cpu"]["cpu_ms_per_request"][k])
            for k in ("gunicorn", "postgres", "redis", "loadgen")
        },
        "foreign_cores_max": max(r["cpu"]["cores_used"]["foreign"] for r in mine),
        "server_cpu_ceiling_rate": round(
            statistics.median(
                (os.cpu_count() or 1)
                * 1000
                / max(
                    1e-6,
                    sum(
                        r["cpu"]["cpu_ms_per_request"][k] for k in ("gunicorn", "postgres", "redis")
                    ),
                )
                for r in mine
            ),
            1,
        ),
    }


LABELS = {
    "floor": "floor (1 INSERT view)",
    "tidemark": "tidemark publish (new partition)",
    "noop": "tidemark repeat (no-op, 200)",
    "hot": "tidemark hot partition (16 on 1)",
    "drf": "same publish through DRF's cycle",
}


def print_table(summary: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    print()
    header = (
        f"{'target':<36} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'201':>6} {'200':>6} "
        f"{'err':>4} {'app cpu':>8} {'pg cpu':>7} {'foreign':>7}"
    )
    print(header)
    units = f"{'ms/req':>8} {'ms/req':>7} {'cores':>7}"
    print(f"{'':<36} {'':>8} {'':>7} {'':>7} {'':>6} {'':>6} {'':>4} {units}")
    print("-" * len(header))
    for r in runs:
        st, cpu = r["status"], r["cpu"]
        label = f"{LABELS[r['target']]} #{r['round']}"
        print(
            f"{label:<36} {r['rate']:>8.1f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} "
            f"{st['201']:>6} {st['200']:>6} {st['other']:>4} "
            f"{cpu['cpu_ms_per_request']['gunicorn']:>8.2f} "
            f"{cpu['cpu_ms_per_request']['postgres']:>7.2f} {cpu['cores_used']['foreign']:>7.2f}"
        )
    print("-" * len(header))
    for target in ("floor", "tidemark", "drf"):
        t = summary.get(target)
        if t is None:
            continue
        print(
            f"{LABELS[target] + ' median':<36} {t['rate_median']:>8.1f} "
            f"{t['p50_ms_median']:>7.2f} {t['p99_ms_median']:>7.2f}"
        )
    print()
    verdict = summary["verdict"]
    print(
        f"ratio tidemark/floor (median rates): {summary['ratio_median']:.3f}"
        f"  (best runs: {summary['ratio_best']:.3f})  target >= {TARGET_RATIO}: "
        f"{'met' if verdict['ratio_met'] else 'MISSED'}"
    )
    print(
        f"tidemark publishes/s (median): {summary['tidemark']['rate_median']:.1f}"
        f"  target >= {TARGET_RATE:.0f}: {'met' if verdict['rate_met'] else 'MISSED'}"
    )
    if not verdict["all_answers_2xx"]:
        print("INVALID: some answers were not 2xx (see 'first error' above); rates mean nothing")
    if summary.get("noop"):
        print(f"no-op repeat publishes/s: {summary['noop']['rate_median']:.1f}")
    if summary.get("drf"):
        plain_cpu = summary["tidemark"]["cpu_ms_per_request_median"]["gunicorn"]
        drf_cpu = summary["drf"]["cpu_ms_per_request_median"]["gunicorn"]
        print(
            f"plain view / DRF cycle (median rates): {summary['ratio_plain_to_drf']:.3f}; "
            f"gunicorn CPU per publish {plain_cpu} ms, through DRF {drf_cpu} ms"
        )
    print(
        "CPU-bound ceiling (all CPUs / server CPU ms per request; no load generator, no "
        f"other processes): tidemark {summary['tidemark']['server_cpu_ceiling_rate']:.0f}/s, "
        f"floor {summary['floor']['server_cpu_ceiling_rate']:.0f}/s"
    )
    if summary["machine_was_busy"]:
        print(
            "WARNING: other processes used more than "
            f"{summary['foreign_cores_limit']} CPUs during some runs; figures are pessimistic"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(ROOT)
    check_services(args.pg)
    databases = [args.db_name, f"{args.db_name}_watchdog"]
    env = bench_env(args.pg, databases, args.broker_url)
    os.environ.update(env)
    loadgen = make_loadgen(args.loadgen, args.clients)
    server = Server(env, workers=args.workers, worker_class=args.worker_class, threads=args.threads)
    started_at = datetime.now(UTC)
    report: dict[str, Any] = {}
    try:
        print(f"creating databases {', '.join(databases)} and migrating")
        recreate_databases(args.pg, databases)
        clear_doorbells(args.broker_url)
        migrate(env)

        import django

        django.setup()
        from django.db import connections

        # With a dead --broker-url every in-process ring logs a traceback; count, not print.
        logging.getLogger("catalog.doorbell").setLevel(logging.ERROR)
        seeded = seed()
        print("profiling one publish in-process (query count)")
        profile = profile_queries(seeded["token"], 0)
        cprofile_text = None
        if args.cprofile:
            cprofile_text = cprofile_publishes(
                seeded["token"], profile["keys_used"] + 10, args.cprofile
            )
        connections.close_all()

        print(
            f"starting gunicorn: {args.workers} x {args.worker_class} workers, "
            f"{args.threads} thread(s) each"
        )
        server.start()
        bench = Bench(
            args,
            server,
            loadgen,
            seeded["token"],
            CpuMeter({"gunicorn": server.proc.pid}, databases),
        )
        print(
            f"load: {args.clients} clients via {loadgen.name}, {args.warmup:g} s warm-up + "
            f"{args.duration:g} s per run, {args.rounds} round(s)"
        )
        published_first = None
        for round_no in range(1, args.rounds + 1):
            bench.measure("floor", round_no, "floor")
            _, first = bench.measure("tidemark", round_no, "publish")
            published_first = published_first if published_first is not None else first
            if args.compare_drf:
                bench.measure("drf", round_no, "publish")
        if not args.skip_secondary:
            start, span = published_run(published_first, NOOP_KEYS)
            bench.measure("noop", 1, "noop", fixed_first=start, span=span)
            bench.measure("hot", 1, "hot", fixed_first=start)
        server.stop()
        server_log = server.log_summary()

        rows = count_rows()
        summary = {t: summarise(bench.runs, t) for t in ("floor", "tidemark", "noop", "hot", "drf")}
        created = sum(r["status"]["201"] for r in bench.runs if r["target"] == "tidemark")
        verification = {
            "row_counts": rows,
            "note": "counts include warm-up runs and the in-process profile's publishes",
            "deliveries_per_event": round(
                rows["catalog_delivery"] / max(1, rows["catalog_readinessevent"]), 3
            ),
            "measured_201s_tidemark": created,
            "server_log": server_log,
        }
        n = rows["catalog_partition"]
        verification["consistent"] = (
            rows["catalog_partitionrevision"] == rows["catalog_readinessevent"] == n
            and rows["catalog_notification"] == n
            and rows["catalog_delivery"] == 2 * n
            and created <= n
        )
        ratio_median = summary["tidemark"]["rate_median"] / summary["floor"]["rate_median"]
        ratio_best = summary["tidemark"]["rate_best"] / summary["floor"]["rate_best"]
        summary["ratio_median"] = round(ratio_median, 3)
        summary["ratio_best"] = round(ratio_best, 3)
        if summary["drf"]:
            summary["ratio_plain_to_drf"] = round(
                summary["tidemark"]["rate_median"] / summary["drf"]["rate_median"], 3
            )
        summary["foreign_cores_limit"] = args.quiet_cores
        summary["machine_was_busy"] = any(
            r["cpu"]["cores_used"]["foreign"] > args.quiet_cores for r in bench.runs
        )
        summary["verdict"] = {
            "basis": "median rate over rounds",
            "rate_target": TARGET_RATE,
            "ratio_target": TARGET_RATIO,
            "rate_met": summary["tidemark"]["rate_median"] >= TARGET_RATE,
            "ratio_met": ratio_median >= TARGET_RATIO,
            # A refused publish is cheap: any non-2xx answer makes the rates meaningless.
            "all_answers_2xx": not any(r["status"]["other"] for r in bench.runs),
        }
        report = {
            "benchmark": "tidemark ingest: POST /api/v1/readiness vs one-INSERT floor view",
            "started_at": started_at.isoformat(),
            "finished_at": datetime.now(UTC).isoformat(),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "settings": {
                "clients": args.clients,
                "warmup_s": args.warmup,
                "duration_s": args.duration,
                "rounds": args.rounds,
                "order": "floor, tidemark (and drf) alternately per round; then noop, hot",
                "loadgen": loadgen.name,
                "gunicorn": {
                    "argv": server.argv[1:],
                    "workers": args.workers,
                    "worker_class": args.worker_class,
                    "threads": args.threads,
                    "settings_module": "config.settings.bench",
                },
                "databases": databases,
                "broker_url": args.broker_url,
                "dataset": {
                    "namespace": NAMESPACE,
                    "name": NAME,
                    "partitioning": "daily",
                    "subscribers": seeded["subscribers"],
                },
                "publish_body_example": json.loads(publish_body(partition_key(0))),
                "writes_per_new_publish": "partition, revision, readiness event, notification, "
                "2 deliveries, partition.current_revision; doorbell to Redis after commit "
                "(statements: profile.publish_new_partition.sql)",
                "noop": f"repeats of up to {NOOP_KEYS} partitions published in tidemark round 1 "
                "(cycled; see the run's key_span)",
                "hot": "all clients repeat one already-published partition",
            },
            "machine": machine_info(args, loadgen),
            "summary": summary,
            "runs": bench.runs,
            "profile": profile,
            "verification": verification,
        }
        if cprofile_text:
            report["profile"]["cprofile_top"] = cprofile_text.splitlines()[:60]
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n")
        print_table(summary, bench.runs)
        print(
            f"\nqueries per new-partition publish: "
            f"{profile['publish_new_partition']['queries']} (no transaction around them); "
            f"no-op: {profile['publish_noop_repeat']['queries']}; floor: "
            f"{profile['floor_queries']}"
        )
        print(
            f"rows written: {n} partitions, revisions, events and notifications, "
            f"{rows['catalog_delivery']} deliveries: "
            + ("consistent" if verification["consistent"] else f"INCONSISTENT {rows}")
        )
        if server_log["tracebacks"] or server_log["errors"] or server_log["warnings"]:
            print(
                f"server log {server_log['log']}: {server_log['tracebacks']} tracebacks, "
                f"{server_log['errors']} errors, {server_log['warnings']} warnings"
            )
        print(f"wrote {args.output}")
    finally:
        server.stop()
        loadgen.close()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if not args.keep:
            drop_databases(args.pg, databases)
        clear_doorbells(args.broker_url)
    if (
        args.check
        and report
        and not all(
            report["summary"]["verdict"][k] for k in ("rate_met", "ratio_met", "all_answers_2xx")
        )
    ):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
