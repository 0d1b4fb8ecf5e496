"""Delivery benchmark: publish-to-webhook latency and deliveries per second per worker.

Run from the repository root::

    .venv/bin/python bench/delivery.py

It creates fresh PostgreSQL databases (``tidemark_bench_delivery`` and
``tidemark_bench_delivery_watchdog``), migrates them, and seeds a producer team, a
publish-scoped API key, a daily-partitioned dataset and 10 subscriber teams, each with a
webhook endpoint at a local receiver (``http://127.0.0.1:<port>/hooks/<i>``, allowed by
``TIDEMARK_OUTBOUND_ALLOW_NETWORKS=127.0.0.0/8`` and ``TIDEMARK_OUTBOUND_ALLOW_HTTP=1``).
Every process runs with ``config.settings.bench`` and Redis db 12 as the Celery broker.

Processes: gunicorn (the publish API), one Celery worker (``-P solo``, the product's
doorbell task), a receiver (asyncio, HTTP/1.1 keep-alive, answers 204 and records the
arrival time of every request) and a publisher (open loop at a steady rate, one new
partition per publish through ``POST /api/v1/readiness``).

Runs:

- ``latency``: the worker running, publishes at ``--rate`` (20/s, so 200 deliveries/s)
  for ``--warmup`` + ``--duration`` s; latency per delivery = receiver arrival time -
  the publish request's start, joined on the partition key in the payload and the
  endpoint; split into segments with the delivery rows' own timestamps.
- ``throughput`` (``--rounds`` times): with the worker stopped, a backlog of
  ``--backlog`` publishes (x10 deliveries); then a fresh worker starts, the bench rings the
  doorbell once and times the drain: deliveries per second of one worker process. Then
  once more with the receiver answering ``--slow-receiver-ms`` later.
- ``in-process``: ``catalog.delivery.deliver_due`` in this process against a backlog, no
  Celery: the cost of a pass alone; then with each phase (claim, send, record) timed and
  its statements counted, two what-ifs (``synchronous_commit=off`` on the session; no
  endpoint-health UPDATE after a success), a cProfile (``bench/results/delivery.prof``)
  and the cost of opening a database connection (what every doorbell task pays).

CPU is accounted per process (worker, gunicorn, receiver, publisher, PostgreSQL backends
split by client, exited backends, Redis, foreign) as in ``ingest.py``. It verifies the
signatures the receiver saw with ``standardwebhooks`` and the endpoint secrets
``subscription_create`` returned, prints a table, writes ``bench/results/delivery.json``
and drops the bench databases (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    NAME,
    NAMESPACE,
    RESULTS_DIR,
    ROOT,
    VENV_BIN,
    CpuMeter,
    ReceiverProcess,
    Server,
    bench_env,
    check_services,
    clear_doorbells,
    drop_databases,
    http_answer,
    log_summary,
    machine_info,
    migrate,
    partition_key,
    percentile,
    publish_body,
    recreate_databases,
    serve_http,
    spawn_logged,
    stop_process,
    wait_consuming,
    wait_quiet,
)
from bench.delivery_report import (
    QUIET_MAX_3S,
    TARGET_P50_MS,
    TARGET_P99_MS,
    TARGET_PER_WORKER,
    TARGET_RATE,
    print_table,
    summarise,
    timeline_by_5s,
)

PUBLISH_PATH = "/api/v1/readiness"

# application_name per client, so PostgreSQL CPU can be split by who asked for it.
APP_NAMES = {
    "tidemark-bench-worker": "worker",
    "tidemark-bench-web": "gunicorn",
    "tidemark-bench-main": "bench",
}


# --- arguments --------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=TARGET_RATE, help="publishes/s (20)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds measured (20)")
    p.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds at --rate (3)")
    p.add_argument("--subscribers", type=int, default=10, help="subscriber endpoints (10)")
    p.add_argument(
        "--backlog", type=int, default=200, help="publishes per throughput backlog (200)"
    )
    p.add_argument("--rounds", type=int, default=2, help="throughput rounds (2)")
    p.add_argument("--latency-rounds", type=int, default=3, help="latency rounds (3)")
    p.add_argument(
        "--profile-backlog",
        type=int,
        default=100,
        help="publishes per instrumented, what-if and cProfile backlog (100)",
    )
    p.add_argument(
        "--receiver-ms",
        type=float,
        default=0.0,
        help="the receiver answers every webhook this many ms after it arrived, in the "
        "latency, hang and throughput runs (0)",
    )
    p.add_argument(
        "--slow-receiver-ms",
        type=float,
        default=50.0,
        help="one more throughput round with the receiver answering after this many ms "
        "(50; 0 skips it)",
    )
    p.add_argument(
        "--slow-backlog", type=int, default=200, help="publishes in the slow-receiver round (200)"
    )
    p.add_argument(
        "--hang-rounds",
        type=int,
        default=1,
        help="latency rounds with one subscriber's endpoint hanging until the worker's "
        "timeout: latency of the others (1; 0 skips them)",
    )
    p.add_argument("--skip-inprocess", action="store_true", help="skip the in-process passes")
    p.add_argument(
        "--reconnects",
        type=int,
        default=40,
        help="one-publish passes, alternately on a new and a reused database connection (40)",
    )
    p.add_argument(
        "--worker-settings",
        default="config.settings.bench",
        help="DJANGO_SETTINGS_MODULE of the Celery worker, to measure a settings change "
        "(put its folder on PYTHONPATH)",
    )
    p.add_argument("--publisher-threads", type=int, default=4, help="publisher threads (4)")
    p.add_argument("--preload-rate", type=float, default=100.0, help="backlog publishes/s (100)")
    p.add_argument("--workers", type=int, default=2, help="gunicorn workers (2)")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="give up waiting for deliveries after this many seconds without one (30)",
    )
    p.add_argument(
        "--verify-every",
        type=int,
        default=1,
        metavar="N",
        help="verify the signature of every Nth delivery received (1: all)",
    )
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server")
    p.add_argument("--db-name", default="tidemark_bench_delivery")
    p.add_argument("--broker-url", default="redis://127.0.0.1:6379/12", help="CELERY_BROKER_URL")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "delivery.json")
    p.add_argument(
        "--quiet-cores",
        type=float,
        default=0.25,
        help="before each run, wait until other processes use at most this many CPUs (0.25)",
    )
    p.add_argument(
        "--quiet-wait", type=float, default=30.0, help="longest wait for a quiet machine (30 s)"
    )
    p.add_argument(
        "--no-vacuum",
        action="store_true",
        help="do not VACUUM ANALYZE the outbox tables before each run",
    )
    p.add_argument("--keep", action="store_true", help="keep the bench databases at the end")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    if min(args.rate, args.duration, args.subscribers, args.backlog, args.rounds) <= 0:
        p.error("--rate, --duration, --subscribers, --backlog and --rounds must be positive")
    if not args.db_name.isidentifier() or not args.db_name.islower():
        p.error("--db-name must be a lower-case identifier")
    if not args.broker_url.startswith("redis://"):
        p.error("--broker-url must be a redis:// URL (the bench purges and watches its queue)")
    return args


# --- receiver (own process) -------------------------------------------------------------
#
# A minimal HTTP/1.1 server on asyncio: keep-alive, Content-Length bodies only. Each webhook
# is recorded as (arrival time.time(), connection number, path, webhook-id,
# webhook-timestamp, webhook-signature, body) and answered 204; parsing and signature checks
# happen in the bench afterwards, so the receiver costs as little as a receiver can.
# Control: GET /_count, GET /_dump (everything since the last reset), POST /_reset,
# POST /_delay?ms=N (answer each webhook N ms after it arrived, like a slower receiver) and
# POST /_hang?path=P (webhooks to path P are recorded but never answered: the sender's
# timeout ends them; an empty P ends the hang). /_count leaves out the hung path's.

_NO_CONTENT = b"HTTP/1.1 204 No Content\r\n\r\n"


def receiver_main(port: int) -> None:
    import asyncio

    records: list[tuple] = []
    delay = [0.0]  # seconds before answering a webhook (POST /_delay?ms=N)
    hang = [b""]  # the path whose webhooks are never answered (POST /_hang?path=P)
    hung = [0]  # webhooks to it since the last reset

    async def respond(conn, method, target, headers, body, arrived) -> bytes:
        if method == b"POST" and target.startswith(b"/hooks/"):
            records.append(
                (
                    arrived,
                    conn,
                    target.decode(),
                    headers.get(b"webhook-id", b"").decode(),
                    headers.get(b"webhook-timestamp", b"").decode(),
                    headers.get(b"webhook-signature", b"").decode(),
                    body.decode("utf-8", "replace"),
                )
            )
            if target == hang[0]:
                hung[0] += 1
                await asyncio.sleep(3600)  # the sender gives up first, at its deadline
            if delay[0]:
                await asyncio.sleep(delay[0])
            return _NO_CONTENT
        if target.startswith(b"/_delay?ms=") and method == b"POST":
            delay[0] = float(target.split(b"=", 1)[1]) / 1000
            return _NO_CONTENT
        if target.startswith(b"/_hang?path=") and method == b"POST":
            hang[0] = target.split(b"=", 1)[1]
            return _NO_CONTENT
        if target == b"/_count":
            count = {"count": len(records) - hung[0], "hung": hung[0]}
            return http_answer("200 OK", json.dumps(count).encode())
        if target == b"/_dump":
            return http_answer("200 OK", json.dumps(records).encode())
        if target == b"/_reset" and method == b"POST":
            records.clear()
            hung[0] = 0
            return _NO_CONTENT
        return http_answer("404 Not Found", b"{}")

    serve_http(port, respond)


class Receiver(ReceiverProcess):
    """The webhook receiver in its own process."""

    def __init__(self) -> None:
        super().__init__(receiver_main, "tidemark-bench-receiver")

    def set_delay(self, ms: float) -> None:
        self._call(f"/_delay?ms={ms:g}", "POST")

    def hung(self) -> int:
        """Webhooks to the hung path since the last reset."""
        return json.loads(self._call("/_count"))["hung"]

    def set_hang(self, path: str) -> None:
        """Never answer webhooks to ``path`` ("" ends the hang)."""
        self._call(f"/_hang?path={path}", "POST")


# --- publisher (own process) ------------------------------------------------------------


def publisher_main(job: dict[str, Any], queue) -> None:
    """Publish ``job["count"]`` new partitions at ``job["rate"]``/s from ``job["start_at"]``
    (open loop: request i is due at start_at + i / rate and is sent by whichever of the
    keep-alive client threads is free); puts ``[(key, due, sent, answered, status)]``."""
    import queue as queues
    import threading

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    n, rate, first = job["count"], job["rate"], job["first"]
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {job['token']}"}
    todo: queues.Queue[int | None] = queues.Queue()
    results: list[tuple | None] = [None] * n

    def send_loop() -> None:
        with httpx.Client(base_url=job["url"], headers=headers, timeout=30) as client:
            client.get("/healthz")  # connect before the clock starts
            while (i := todo.get()) is not None:
                key = partition_key(first + i)
                body = publish_body(key)
                sent = time.time()
                try:
                    status = client.post(PUBLISH_PATH, content=body).status_code
                except httpx.HTTPError:
                    status = 0
                results[i] = (key, job["start_at"] + i / rate, sent, time.time(), status)

    threads = [threading.Thread(target=send_loop) for _ in range(job["threads"])]
    for t in threads:
        t.start()
    for i in range(n):
        delay = job["start_at"] + i / rate - time.time()
        if delay > 0:
            time.sleep(delay)
        todo.put(i)
    for _ in threads:
        todo.put(None)
    for t in threads:
        t.join()
    queue.put(results)


class Publisher:
    def __init__(self, url: str, token: str, threads: int) -> None:
        self.url = url
        self.token = token
        self.threads = threads
        self.proc = None
        self.queue = None
        self.next_index = 0  # every publish of the whole bench names a new partition

    def start(self, count: int, rate: float, lead: float = 2.0) -> dict[str, Any]:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        job = {
            "url": self.url,
            "token": self.token,
            "count": count,
            "rate": rate,
            "first": self.next_index,
            "threads": self.threads,
            "start_at": time.time() + lead,  # spawned, imported and connected by then
        }
        self.next_index += count
        self.queue = ctx.Queue()
        self.proc = ctx.Process(
            target=publisher_main, args=(job, self.queue), name="tidemark-bench-publisher"
        )
        self.proc.start()
        return job

    def wait(self, timeout: float) -> list[tuple]:
        results = self.queue.get(timeout=timeout)
        self.proc.join(timeout=10)
        self.proc = None
        return results

    def run(self, count: int, rate: float) -> list[tuple]:
        self.start(count, rate)
        return self.wait(timeout=count / rate + 120)

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)


# --- Celery worker ----------------------------------------------------------------------


class Worker:
    """One ``celery worker -P solo`` process, consuming the doorbell queues."""

    def __init__(self, env: dict[str, str], broker_url: str) -> None:
        self.env = env  # DJANGO_SETTINGS_MODULE included
        self.broker_url = broker_url
        self.log = RESULTS_DIR / "delivery-worker.log"
        self.argv = [
            str(VENV_BIN / "celery"),
            "-A",
            "config.celery",
            "worker",
            "-P",
            "solo",
            "-Q",
            "delivery,default",
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"tidemark-bench-delivery-{os.getpid()}@%h",
        ]
        self.proc: subprocess.Popen | None = None
        self.log.unlink(missing_ok=True)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> float:
        """Start the worker and wait until it blocks on the queue; returns seconds taken."""
        self.proc = spawn_logged(self.argv, self.env, self.log)
        return wait_consuming([self.proc], self.broker_url, self.log, timeout=60)

    def stop(self) -> None:
        stop_process(self.proc, timeout=30)
        self.proc = None

    def first_error(self) -> str | None:
        """The first ERROR line of the worker's log, if any."""
        summary = log_summary(self.log)
        return summary["first_errors"][0][:400] if summary["first_errors"] else None

    def check_delivered(self, received: int, expected: int, run: str) -> None:
        """Stop the bench when a run delivered nothing: its figures would mean nothing."""
        if expected and not received:
            raise RuntimeError(
                f"{run}: the worker delivered none of {expected} deliveries; first error in "
                f"{self.log.relative_to(ROOT)}: {self.first_error()}"
            )


# What kombu keeps in Redis for a consuming worker (its remote-control binding and the
# unacked-message bookkeeping of acks_late), deleted with the queues at the end.
WORKER_KEYS = ("_kombu.binding_deadlines", "unacked", "unacked_index", "unacked_mutex")


def purge_doorbells(broker_url: str) -> int:
    """Drop the queued doorbell messages (not the bindings); returns how many there were."""
    import redis

    client = redis.Redis.from_url(broker_url, socket_connect_timeout=1)
    queued = client.llen("delivery")
    client.delete("delivery")
    return queued


# --- seeding and database checks --------------------------------------------------------


def seed(receiver_url: str, subscribers: int) -> dict[str, Any]:
    """Producer team, publish key, daily dataset; ``subscribers`` teams with a webhook each."""
    from catalog.actors import Actor
    from catalog.models import ApiKey
    from catalog.services import datasets, subscriptions, teams

    producer = teams.team_create(slug="bench-producer", name="Bench producer")
    key, token = teams.api_key_create(team=producer, name="bench", scopes=[ApiKey.Scope.PUBLISH])
    dataset = datasets.dataset_register(
        actor=Actor(team=producer, api_key=key),
        namespace=NAMESPACE,
        name=NAME,
        partitioning="daily",
        sla_cron="30 6 * * *",
        criticality="high",
    )
    secrets = {}
    for i in range(1, subscribers + 1):
        consumer = teams.team_create(slug=f"bench-consumer-{i}", name=f"Bench consumer {i}")
        result = subscriptions.subscription_create(
            actor=Actor(team=consumer),
            dataset=dataset,
            endpoint_url=f"{receiver_url}/hooks/{i}",
        )
        assert result.endpoint_secret, "a new endpoint returns its secret once"
        secrets[f"/hooks/{i}"] = result.endpoint_secret
    assert (dataset.namespace, dataset.name) == (NAMESPACE, NAME), "identity was normalised"
    return {"token": token, "dataset_id": dataset.pk, "secrets": secrets}


def cancel_waiting(path: str) -> int:
    """Cancel the deliveries still waiting for the endpoint at receiver path ``path`` (a
    hung one), so later runs neither send nor count them; returns how many."""
    from catalog.models import Delivery

    return Delivery.objects.filter(
        endpoint__url__endswith=path, state__in=["pending", "retrying"]
    ).update(state="cancelled", claimed_until=None, claim_token=None)


def delivery_states() -> dict[str, Any]:
    """Deliveries by state, and how many took more than one attempt."""
    from django.db.models import Count

    from catalog.models import Delivery, DeliveryAttempt

    by_state = dict(Delivery.objects.values_list("state").annotate(n=Count("id")).order_by("state"))
    return {
        "by_state": by_state,
        "with_retries": Delivery.objects.filter(attempts__gt=1).count(),
        "attempt_rows": DeliveryAttempt.objects.count(),
    }


def outbox_stats() -> dict[str, int]:
    """PostgreSQL's counters for the outbox table and its partial ``delivery_due`` index
    (the claim's path): dead rows, (auto)vacuums and analyzes so far, index scans and the
    index entries they read, sequential scans."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.n_dead_tup, t.vacuum_count + t.autovacuum_count, "
            "t.analyze_count + t.autoanalyze_count, t.seq_scan, i.idx_scan, i.idx_tup_read "
            "FROM pg_stat_user_tables t JOIN pg_stat_user_indexes i ON i.relid = t.relid "
            "WHERE t.relname = 'catalog_delivery' AND i.indexrelname = 'delivery_due'"
        )
        row = cursor.fetchone() or (0, 0, 0, 0, 0, 0)
    keys = ("dead_rows", "vacuums", "analyzes", "seq_scans", "due_index_scans")
    return dict(zip((*keys, "due_index_entries_read"), row, strict=True))


def pending_deliveries() -> int:
    from catalog.models import Delivery

    return Delivery.objects.filter(state__in=["pending", "retrying"]).count()


# --- analysing what the receiver saw ----------------------------------------------------


def wait_for_deliveries(receiver: Receiver, expected: int, stall_timeout: float) -> int:
    """Poll the receiver until ``expected`` requests arrived, or none for ``stall_timeout``."""
    last, last_change = -1, time.monotonic()
    while True:
        count = receiver.count()
        if count >= expected:
            return count
        if count != last:
            last, last_change = count, time.monotonic()
        elif time.monotonic() - last_change > stall_timeout:
            return count
        time.sleep(0.05)


def analyse_records(
    records: list[list], secrets: dict[str, str], verify_every: int
) -> dict[str, Any]:
    """Parse bodies, check ids, verify signatures; index arrivals by partition key."""
    from standardwebhooks import Webhook, WebhookVerificationError

    webhooks = {path: Webhook(secret) for path, secret in secrets.items()}
    arrivals: dict[str, list[tuple[float, str]]] = {}
    seen: Counter = Counter()
    id_mismatch = verified = failed = 0
    first_failure = None
    for n, (arrived, _conn, path, msg_id, ts, sig, body) in enumerate(records):
        payload = json.loads(body)
        if payload.get("id") != msg_id:
            id_mismatch += 1
        seen[(msg_id, path)] += 1
        arrivals.setdefault(payload["data"]["partition"], []).append((arrived, path))
        if n % verify_every == 0:
            headers = {"webhook-id": msg_id, "webhook-timestamp": ts, "webhook-signature": sig}
            try:
                webhooks[path].verify(body, headers)
                verified += 1
            except (WebhookVerificationError, KeyError) as exc:
                failed += 1
                first_failure = first_failure or f"{path} {msg_id}: {exc!r}"
    return {
        "arrivals": arrivals,
        "received": len(records),
        "distinct": len(seen),
        "duplicates": sum(v - 1 for v in seen.values()),
        "connections": len({r[1] for r in records}),
        "id_mismatch": id_mismatch,
        "signatures": {
            "checked": verified + failed,
            "verified": verified,
            "failed": failed,
            "first_failure": first_failure,
            "method": "standardwebhooks.Webhook(endpoint_secret).verify(body, headers), "
            "secrets as returned by subscription_create",
        },
    }


def latency_stats(values_ms: list[float]) -> dict[str, Any]:
    ms = sorted(values_ms)
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 1),
        "p90_ms": round(percentile(ms, 90), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(ms[-1], 1),
        "min_ms": round(ms[0], 1),
        "mean_ms": round(statistics.fmean(ms), 1),
    }


# --- runs -------------------------------------------------------------------------------


class Bench:
    def __init__(
        self, args, env, database_url, server, receiver, publisher, seeded, databases
    ) -> None:
        self.args = args
        self.env = env
        self.server = server
        self.receiver = receiver
        self.publisher = publisher
        self.seeded = seeded
        self.databases = databases
        worker_env = {
            **env,
            "DATABASE_URL": app_url(database_url, "tidemark-bench-worker"),
            "DJANGO_SETTINGS_MODULE": args.worker_settings,
        }
        self.worker = Worker(worker_env, args.broker_url)

    def meter(self, **trees: int) -> CpuMeter:
        roots = {"receiver": self.receiver.proc.pid, "gunicorn": self.server.proc.pid}
        roots.update(trees)
        roots["bench"] = os.getpid()
        return CpuMeter(roots, self.databases, children=None, pg_clients=(self.args.pg, APP_NAMES))

    # latency ------------------------------------------------------------------------

    def vacuum(self) -> None:
        """VACUUM ANALYZE the outbox tables before a run, as autovacuum would between runs
        (this PostgreSQL may run with autovacuum off, see settings.postgres_autovacuum):
        each run then starts from the same state, not from its predecessors' dead rows."""
        from django.db import connection

        if self.args.no_vacuum:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "VACUUM ANALYZE catalog_delivery, catalog_deliveryattempt, catalog_notification"
            )

    def latency(self, round_no: int, hung: str | None = None) -> dict[str, Any]:
        """One latency round; ``hung``: a receiver path that never answers (its endpoint
        hangs until the worker's timeout), left out of the latencies and counted apart."""
        args = self.args
        self.vacuum()
        self.receiver.set_delay(args.receiver_ms)
        self.receiver.set_hang(hung or "")
        ready_s = self.worker.start()
        background = wait_quiet(args.quiet_cores, args.quiet_wait)
        self.receiver.reset()
        n_warm = round(args.warmup * args.rate)
        n_measured = round(args.duration * args.rate)
        job = self.publisher.start(n_warm + n_measured, args.rate)
        meter = self.meter(worker=self.worker.pid, publisher=self.publisher.proc.pid)
        measure_from = job["start_at"] + n_warm / args.rate
        timeline = Timeline(self.meter(worker=self.worker.pid, publisher=self.publisher.proc.pid))
        time.sleep(max(0.0, measure_from - time.time() - 1.0))
        timeline.start()
        time.sleep(max(0.0, measure_from - time.time()))
        cpu_start, wall_start = meter.snapshot(), time.time()
        results = self.publisher.wait(timeout=(n_warm + n_measured) / args.rate + 120)
        publishes_ok = [r for r in results if r[4] == 201]
        answered = args.subscribers - (1 if hung else 0)
        expected = len(publishes_ok) * answered
        received = wait_for_deliveries(self.receiver, expected, args.drain_timeout)
        cpu_end, wall_end = meter.snapshot(), time.time()
        timeline.stop()
        meter.close()
        hung_requests = self.receiver.hung() if hung else 0
        self.worker.stop()
        self.worker.check_delivered(received, expected, f"latency round {round_no}")
        cancelled = 0
        if hung:
            self.receiver.set_hang("")
            cancelled = cancel_waiting(hung)

        records = self.receiver.dump()
        seen = analyse_records(records, self.seeded["secrets"], args.verify_every)
        measured = results[n_warm:]
        sent_at = {r[0]: r[2] for r in measured if r[4] == 201}
        latencies, by_endpoint, by_bucket, arrivals = [], {}, {}, []
        for key, sent in sent_at.items():
            for arrived, path in seen["arrivals"].get(key, []):
                if path == hung:
                    continue
                ms = (arrived - sent) * 1000
                latencies.append(ms)
                arrivals.append((arrived, ms))
                by_endpoint.setdefault(path, []).append(ms)
                by_bucket.setdefault(int((sent - measure_from) // 5) * 5, []).append(ms)
        missing = len(sent_at) * answered - len(latencies)
        in_window = sum(1 for r in records if wall_start <= r[0] <= wall_end and r[2] != hung)
        sends = sorted(r[2] for r in measured if r[4] == 201)
        publish_ms = sorted((r[3] - r[2]) * 1000 for r in measured if r[4] == 201)
        lag_ms = sorted(max(0.0, r[2] - r[1]) * 1000 for r in measured)
        cpu = meter.report(cpu_start, cpu_end, in_window, unit="delivery")
        cpu_publish = meter.report(cpu_start, cpu_end, len(sent_at), unit="publish")
        sessions = cpu["pg_sessions_opened"]["bench databases"]
        stats = latency_stats(latencies)
        result = {
            "round": round_no,
            "receiver_delay_ms": args.receiver_ms,
            "hung_endpoint": {
                "path": hung,
                "requests": hung_requests,
                "waiting_deliveries_cancelled_after": cancelled,
                "note": "its requests are never answered; the worker's read timeout / total "
                "deadline ends each; the latencies are the other endpoints'",
            }
            if hung
            else None,
            "worker_ready_s": round(ready_s, 2),
            "background_cores_before": round(background, 2),
            "publishes": {
                "warmup": n_warm,
                "measured": len(measured),
                "status": dict(Counter(str(r[4]) for r in results)),
                "achieved_rate": round((len(sends) - 1) / (sends[-1] - sends[0]), 2)
                if len(sends) > 1
                else None,
                "response_p50_ms": round(percentile(publish_ms, 50), 1),
                "response_p99_ms": round(percentile(publish_ms, 99), 1),
                "schedule_lag_p99_ms": round(percentile(lag_ms, 99), 1),
            },
            "deliveries": {
                "expected_measured": len(sent_at) * answered,
                "latencies": len(latencies),
                "missing": missing,
                "received_total": received,
                "expected_total": expected,
                "in_cpu_window": in_window,
                "rate_in_window": round(in_window / (wall_end - wall_start), 1),
                "duplicates": seen["duplicates"],
                "id_mismatch": seen["id_mismatch"],
                "receiver_connections": seen["connections"],
            },
            "latency": stats,
            "latency_breakdown": latency_breakdown(sent_at, records),
            "latency_p50_by_endpoint_ms": {
                path: round(percentile(sorted(v), 50), 1)
                for path, v in sorted(by_endpoint.items(), key=lambda kv: int(kv[0].split("/")[-1]))
            },
            "latency_p99_by_endpoint_ms": {
                path: round(percentile(sorted(v), 99), 1)
                for path, v in sorted(by_endpoint.items(), key=lambda kv: int(kv[0].split("/")[-1]))
            },
            "latency_by_5s_of_publishing": {
                f"{start}-{start + 5}s": {
                    "p50_ms": round(percentile(sorted(v), 50), 1),
                    "p99_ms": round(percentile(sorted(v), 99), 1),
                }
                for start, v in sorted(by_bucket.items())
            },
            "database_sessions": {
                "opened_in_window": sessions,
                "per_publish": round(sessions / max(1, len(sent_at)), 2),
                "note": "new PostgreSQL connections to the bench databases during the window: "
                "the worker reconnects for every doorbell task (Celery's Django fixup closes "
                "the connection after each task); gunicorn and the bench keep theirs",
            },
            "signatures": seen["signatures"],
            "cpu": {**cpu, "cpu_ms_per_publish": cpu_publish["cpu_ms_per_publish"]},
            "timeline": timeline.rows(arrivals, measure_from),
            "database": delivery_states(),
        }
        result["timeline_by_5s"] = timeline_by_5s(result["timeline"])
        foreign = [row["cores"]["foreign"] for row in result["timeline"]]
        windows = [statistics.fmean(foreign[i : i + 3]) for i in range(max(1, len(foreign) - 2))]
        worst = round(max(windows, default=0.0), 2)
        result["quiet"] = {
            "foreign_cores_mean": cpu["cores_used"]["foreign"],
            "foreign_cores_max_3s": worst,
            "clean": cpu["cores_used"]["foreign"] <= args.quiet_cores and worst <= QUIET_MAX_3S,
        }
        label = f"hang round {round_no} ({hung} hangs)" if hung else f"round {round_no}"
        print(
            f"  {label}: {len(latencies)} deliveries of {len(sent_at)} publishes "
            f"(achieved {result['publishes']['achieved_rate']}/s): p50 {stats.get('p50_ms')} ms "
            f"p90 {stats.get('p90_ms')} ms p99 {stats.get('p99_ms')} ms max "
            f"{stats.get('max_ms')} ms; missing {missing}; signatures "
            f"{seen['signatures']['verified']}/{seen['signatures']['checked']} verified; "
            f"{sessions} new database sessions; foreign {cpu['cores_used']['foreign']:.2f} cores"
        )
        return result

    # throughput ---------------------------------------------------------------------

    def preload(self, publishes: int) -> dict[str, Any]:
        """``publishes`` new partitions with no worker running; purge their doorbells."""
        started = time.monotonic()
        before = pending_deliveries()
        results = self.publisher.run(publishes, self.args.preload_rate)
        created = sum(1 for r in results if r[4] == 201)
        pending = pending_deliveries()
        purged = purge_doorbells(self.args.broker_url)
        self.receiver.reset()
        self.vacuum()
        if pending - before != created * self.args.subscribers:
            raise RuntimeError(
                f"backlog: {pending - before} new pending deliveries for {created} publishes"
            )
        return {
            "publishes": created,
            "deliveries": pending,
            "doorbells_purged": purged,
            "seconds": round(time.monotonic() - started, 1),
        }

    def throughput(self, label: str, publishes: int, receiver_delay_ms: float = 0.0):
        """A backlog, then one fresh worker and one doorbell ring: time the drain."""
        import config.celery  # noqa: F401 - loaded before the clock starts, not by the ring
        from catalog import doorbell

        args = self.args
        backlog = self.preload(publishes)
        self.receiver.set_delay(receiver_delay_ms)
        ready_s = self.worker.start()
        background = wait_quiet(args.quiet_cores, args.quiet_wait)
        meter = self.meter(worker=self.worker.pid)
        cpu_start, rung = meter.snapshot(), time.time()
        doorbell.ring_now(doorbell.DELIVER_DUE)
        received = wait_for_deliveries(self.receiver, backlog["deliveries"], args.drain_timeout)
        cpu_end, done = meter.snapshot(), time.time()
        meter.close()
        self.worker.stop()
        self.worker.check_delivered(received, backlog["deliveries"], f"throughput {label}")
        self.receiver.set_delay(0)
        records = self.receiver.dump()
        seen = analyse_records(records, self.seeded["secrets"], args.verify_every)
        arrivals = sorted(r[0] for r in records)
        seconds = (arrivals[-1] - rung) if arrivals else done - rung
        rate = len(arrivals) / seconds if seconds > 0 else 0.0
        span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
        result = {
            "label": label,
            "receiver_delay_ms": receiver_delay_ms,
            "backlog": backlog,
            "worker_ready_s": round(ready_s, 2),
            "background_cores_before": round(background, 2),
            "received": received,
            "seconds_ring_to_last": round(seconds, 3),
            "deliveries_per_s": round(rate, 1),
            "deliveries_per_s_first_to_last": round((len(arrivals) - 1) / span, 1)
            if span
            else None,
            "first_arrival_after_ring_ms": round((arrivals[0] - rung) * 1000, 1)
            if arrivals
            else None,
            "duplicates": seen["duplicates"],
            "receiver_connections": seen["connections"],
            "signatures": seen["signatures"],
            "cpu": meter.report(cpu_start, cpu_end, len(arrivals), unit="delivery"),
            "database": delivery_states(),
        }
        cpu = result["cpu"]["cpu_ms_per_delivery"]
        print(
            f"  throughput {label}: {len(arrivals)} deliveries in {seconds:.2f} s = "
            f"{rate:.1f}/s per worker; CPU ms/delivery worker {cpu['worker']:.2f} "
            f"postgres {cpu['postgres'] + cpu['postgres_exited']:.2f} receiver "
            f"{cpu['receiver']:.2f}; foreign {result['cpu']['cores_used']['foreign']:.2f} cores"
        )
        return result

    # in-process ---------------------------------------------------------------------

    def inprocess(self, label: str, publishes: int, mode: str = "plain") -> dict[str, Any]:
        """One ``deliver_due`` pass in this process over a fresh backlog.

        ``mode``: ``plain``; ``phases`` (claim/send/record timed, statements counted);
        what-ifs ``async_commit`` (session ``synchronous_commit=off``) and ``skip_health``
        (no endpoint-health UPDATE after a success); ``cprofile``.
        """
        from django.db import connections

        from catalog import delivery

        backlog = self.preload(publishes)
        background = wait_quiet(self.args.quiet_cores, self.args.quiet_wait)
        sender = delivery.sender_from_settings()
        sender.pool()  # built once per worker process: not part of a pass
        conn = connections["default"]
        conn.ensure_connection()
        extra: dict[str, Any] = {}
        instrument = Instrument(conn) if mode == "phases" else None
        profiler = None
        original_health = delivery._endpoint_health
        if mode == "async_commit":
            with conn.cursor() as cursor:
                cursor.execute("SET synchronous_commit = off")
        if mode == "skip_health":
            import outbound

            def health_unless_success(claim, decision, **kwargs):
                if decision != outbound.Decision.SUCCEEDED:
                    original_health(claim, decision, **kwargs)

            delivery._endpoint_health = health_unless_success
        if mode == "cprofile":
            import cProfile

            profiler = cProfile.Profile()
        meter = self.meter()
        cpu_start = meter.snapshot()
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            if instrument:
                instrument.install()
            if profiler:
                profiler.enable()
            summary = delivery.deliver_due(sender=sender, max_batches=1_000_000)
        finally:
            if profiler:
                profiler.disable()
            if instrument:
                instrument.uninstall()
            delivery._endpoint_health = original_health
            if mode == "async_commit":
                with conn.cursor() as cursor:
                    cursor.execute("RESET synchronous_commit")
            sender.close()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        cpu_end = meter.snapshot()
        meter.close()
        received = wait_for_deliveries(self.receiver, backlog["deliveries"], 5)
        self.receiver.reset()
        n = summary.claimed
        if instrument:
            extra["phases"] = instrument.report(n, wall)
        if profiler:
            extra["cprofile_top"] = save_profile(profiler)
        result = {
            "label": label,
            "mode": mode,
            "backlog": backlog,
            "background_cores_before": round(background, 2),
            "summary": str(summary),
            "received": received,
            "seconds": round(wall, 3),
            "deliveries_per_s": round(n / wall, 1) if wall else None,
            "pass_cpu_ms_per_delivery": round(cpu * 1000 / max(1, n), 3),
            "cpu": meter.report(cpu_start, cpu_end, n, unit="delivery"),
            **extra,
        }
        per = result["cpu"]["cpu_ms_per_delivery"]
        print(
            f"  in-process {label}: {n} deliveries in {wall:.2f} s = "
            f"{result['deliveries_per_s']}/s; pass CPU {result['pass_cpu_ms_per_delivery']:.2f} "
            f"ms/delivery, postgres {per['postgres'] + per['postgres_exited']:.2f} ms/delivery; "
            f"foreign {result['cpu']['cores_used']['foreign']:.2f} cores"
        )
        return result

    def reconnect_cost(self, publishes: int) -> dict[str, Any]:
        """What a doorbell task pays for reconnecting (Celery's Django fixup closes the
        connection after every task): one-batch passes of ``--subscribers`` deliveries (one
        publish, as each doorbell brings at 20/s) alternately on a new connection (cold)
        and on the connection the previous pass used (warm).

        Client wall and CPU from this process; the backend's CPU from
        ``/proc/<backend pid>/schedstat`` (for a new connection: its whole life, start-up
        and cold catalog caches included).
        """
        from django.db import connections

        from catalog import delivery

        self.preload(publishes)
        wait_quiet(self.args.quiet_cores, self.args.quiet_wait)
        sender = delivery.sender_from_settings()
        sender.pool()
        conn = connections["default"]
        conn.ensure_connection()
        passes: dict[str, list[tuple[float, float, float]]] = {"new": [], "reused": []}
        try:
            for i in range(publishes):
                kind = "new" if i % 2 == 0 else "reused"
                before_ns = 0
                if kind == "new":
                    conn.close()
                else:
                    before_ns = _schedstat_ns(conn.connection.info.backend_pid)
                wall, cpu = time.perf_counter(), time.process_time()
                delivery.deliver_due(sender=sender, batch_size=self.args.subscribers, max_batches=1)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                backend_ns = _schedstat_ns(conn.connection.info.backend_pid) - before_ns
                passes[kind].append((wall * 1000, cpu * 1000, backend_ns / 1e6))
        finally:
            sender.close()
            conn.close()
        self.receiver.reset()

        def stats(kind: str) -> dict[str, float]:
            rows = passes[kind]
            return {
                "passes": len(rows),
                "wall_ms_median": round(statistics.median(r[0] for r in rows), 3),
                "client_cpu_ms_mean": round(statistics.fmean(r[1] for r in rows), 3),
                "backend_cpu_ms_mean": round(statistics.fmean(r[2] for r in rows), 3),
            }

        new, reused = stats("new"), stats("reused")
        result = {
            "deliveries_per_pass": self.args.subscribers,
            "new_connection": new,
            "reused_connection": reused,
            "extra_per_task": {
                k: round(new[k] - reused[k], 3)
                for k in ("wall_ms_median", "client_cpu_ms_mean", "backend_cpu_ms_mean")
            },
        }
        extra = result["extra_per_task"]
        print(
            f"  one-publish pass on a new vs a reused connection: +{extra['wall_ms_median']} ms "
            f"wall, +{extra['client_cpu_ms_mean']} ms client CPU, "
            f"+{extra['backend_cpu_ms_mean']} ms backend CPU per task"
        )
        return result


def _schedstat_ns(pid: int) -> int:
    """CPU time a process has used so far, in ns (``/proc/<pid>/schedstat``)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


class Timeline:
    """Once a second during a run: CPUs used per category and deliveries still due, to
    tell a worker that cannot keep up from a machine that is busy with other work."""

    def __init__(self, meter: CpuMeter, interval: float = 1.0) -> None:
        import threading

        self.meter = meter
        self.interval = interval
        self.samples: list[tuple[float, dict[str, Any], int, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timeline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from django.db import connections

        try:
            while not self._stop.is_set():
                snap = self.meter.snapshot()
                self.samples.append((time.time(), snap, pending_deliveries(), outbox_stats()))
                self._stop.wait(self.interval)
        finally:
            connections.close_all()  # this thread's own connections
            self.meter.close()

    def rows(self, arrivals: list[tuple[float, float]], origin: float) -> list[dict[str, Any]]:
        """One row per interval: CPUs per category, deliveries due at its end, and the
        deliveries (of measured publishes) that arrived in it with their p50 latency."""
        rows = []
        pairs = zip(self.samples, self.samples[1:], strict=False)
        for (t0, s0, _, o0), (t1, s1, due, o1) in pairs:
            cores = self.meter.report(s0, s1, 1)["cores_used"]
            ms = sorted(lat for arrived, lat in arrivals if t0 <= arrived < t1)
            scans = o1["due_index_scans"] - o0["due_index_scans"]
            rows.append(
                {
                    "t_s": round(t1 - origin, 1),
                    "due": due,
                    "arrived": len(ms),
                    "latency_p50_ms": round(percentile(ms, 50), 1) if ms else None,
                    "outbox": {
                        "dead_rows": o1["dead_rows"],
                        "vacuums": o1["vacuums"],
                        "analyzes": o1["analyzes"],
                        "due_index_scans": scans,
                        "due_index_entries_read_per_scan": round(
                            (o1["due_index_entries_read"] - o0["due_index_entries_read"]) / scans,
                            1,
                        )
                        if scans
                        else None,
                        "seq_scans": o1["seq_scans"] - o0["seq_scans"],
                    },
                    "cores": {
                        "worker": cores.get("worker", 0.0),
                        "gunicorn": cores["gunicorn"],
                        "postgres": cores["postgres"],
                        "postgres_exited": cores["postgres_exited"],
                        "foreign": cores["foreign"],
                        "machine": cores["machine_busy"],
                    },
                }
            )
        return rows


def latency_breakdown(sent_at: dict[str, float], records: list[list]) -> dict[str, Any]:
    """Where the latency goes, per delivery, from the database's own timestamps:

    - ``publish_to_outbox``: publish request start -> the delivery row's ``created_at``
      (set in the publish transaction, before its commit);
    - ``outbox_to_attempt``: -> the first attempt's ``started_at`` (commit, doorbell,
      Celery, task start, database connect, claim, and the sends ahead in the batch);
    - ``attempt_to_arrival``: -> the receiver has the request (signing, HTTP).
    """
    from catalog.models import DeliveryAttempt

    arrived = {}
    for arrival, _conn, path, _id, _ts, _sig, body in records:
        arrived[(json.loads(body)["data"]["partition"], path)] = arrival
    rows = DeliveryAttempt.objects.filter(
        number=1, delivery__notification__payload__data__partition__in=list(sent_at)
    ).values_list(
        "delivery__notification__payload__data__partition",
        "delivery__endpoint__url",
        "delivery__created_at",
        "started_at",
    )
    segments: dict[str, list[float]] = {
        "publish_to_outbox": [],
        "outbox_to_attempt": [],
        "attempt_to_arrival": [],
    }
    for key, url, created, started in rows:
        path = "/" + url.split("/", 3)[3]
        if (key, path) not in arrived:
            continue
        segments["publish_to_outbox"].append((created.timestamp() - sent_at[key]) * 1000)
        segments["outbox_to_attempt"].append((started.timestamp() - created.timestamp()) * 1000)
        segments["attempt_to_arrival"].append((arrived[(key, path)] - started.timestamp()) * 1000)
    return {name: latency_stats(values) for name, values in segments.items()}


def app_url(url: str, application_name: str) -> str:
    """A database URL whose connections identify themselves in ``pg_stat_activity``."""
    return f"{url}{'&' if '?' in url else '?'}application_name={application_name}"


class Instrument:
    """Times ``delivery_claim_due``, ``delivery_send``, ``delivery_record`` and
    ``success_batches.successes_record`` (plain successes recorded together) (wall and thread
    CPU), counts and times their statements and commits. Patches the modules' functions
    in this process only (the pass looks them up at call time). Sends run on the pass's
    pool threads and run no statement: they are timed, never made the current phase."""

    PHASES = ("delivery_claim_due", "delivery_send", "delivery_record", "successes_record")
    MODULES = {"successes_record": "success_batches"}
    NO_STATEMENTS = frozenset({"delivery_send"})

    def __init__(self, conn) -> None:
        self.conn = conn
        self.current: str | None = None
        self.stats = {
            name: {"calls": 0, "wall": 0.0, "cpu": 0.0, "statements": 0, "sql_wall": 0.0}
            | {"commits": 0, "commit_wall": 0.0}
            for name in self.PHASES
        }
        self.sql: Counter = Counter()
        self._originals: dict[str, Any] = {}
        self._wrapper_cm = None

    def _timer(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            if self.current:
                st = self.stats[self.current]
                st["statements"] += 1
                st["sql_wall"] += time.perf_counter() - started
                self.sql[(self.current, " ".join(sql.split())[:200])] += 1

    def _module(self, name: str):
        import importlib

        return importlib.import_module(f"catalog.{self.MODULES.get(name, 'delivery')}")

    def install(self) -> None:
        for name in self.PHASES:
            original = getattr(self._module(name), name)
            self._originals[name] = original
            setattr(self._module(name), name, self._wrap(name, original))
        commit = self.conn._commit

        def timed_commit():
            started = time.perf_counter()
            try:
                return commit()
            finally:
                if self.current:
                    self.stats[self.current]["commits"] += 1
                    self.stats[self.current]["commit_wall"] += time.perf_counter() - started

        self.conn._commit = timed_commit
        self._wrapper_cm = self.conn.execute_wrapper(self._timer)
        self._wrapper_cm.__enter__()

    def uninstall(self) -> None:
        for name, original in self._originals.items():
            setattr(self._module(name), name, original)
        with contextlib.suppress(AttributeError):
            del self.conn._commit
        if self._wrapper_cm is not None:
            self._wrapper_cm.__exit__(None, None, None)

    def _wrap(self, name: str, fn):
        current = name not in self.NO_STATEMENTS

        def timed(*args, **kwargs):
            if current:
                self.current = name
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                st = self.stats[name]
                st["calls"] += 1
                st["wall"] += time.perf_counter() - wall
                st["cpu"] += time.thread_time() - cpu
                if current:
                    self.current = None

        return timed

    def report(self, deliveries: int, pass_wall: float) -> dict[str, Any]:
        n = max(1, deliveries)
        phases = {}
        for name, st in self.stats.items():
            phases[name.removeprefix("delivery_")] = {
                "calls": st["calls"],
                "wall_ms_per_delivery": round(st["wall"] * 1000 / n, 3),
                "python_cpu_ms_per_delivery": round(st["cpu"] * 1000 / n, 3),
                "statements_per_delivery": round(st["statements"] / n, 3),
                "statement_wall_ms_per_delivery": round(st["sql_wall"] * 1000 / n, 3),
                "commits_per_delivery": round(st["commits"] / n, 3),
                "commit_wall_ms_per_delivery": round(st["commit_wall"] * 1000 / n, 3),
            }
        # Sends overlap the pass's own work: only the pass thread's phases add up.
        accounted = sum(
            st["wall"] for name, st in self.stats.items() if name not in self.NO_STATEMENTS
        )
        statements = sum(st["statements"] + st["commits"] for st in self.stats.values())
        return {
            "per_phase": phases,
            "loop_overhead_ms_per_delivery": round((pass_wall - accounted) * 1000 / n, 3),
            "round_trips_per_delivery": round(statements / n, 2),
            "round_trips_note": "statements (psycopg sends BEGIN with a transaction's first "
            "statement, timed inside it) plus COMMITs",
            "statements": [
                {
                    "phase": phase.removeprefix("delivery_"),
                    "per_delivery": round(c / n, 3),
                    "sql": s,
                }
                for (phase, s), c in self.sql.most_common()
            ],
        }


def save_profile(profiler) -> list[str]:
    import io
    import pstats

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(RESULTS_DIR / "delivery.prof")
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(35)
    stats.sort_stats("tottime").print_stats(25)
    return [line for line in out.getvalue().splitlines() if line.strip()]


# --- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(ROOT)
    check_services(args.pg)
    databases = [args.db_name, f"{args.db_name}_watchdog"]
    database_url = f"{args.pg}/{databases[0]}"
    env = bench_env(
        args.pg,
        databases,
        args.broker_url,
        database_url=app_url(database_url, "tidemark-bench-main"),
        TIDEMARK_OUTBOUND_ALLOW_NETWORKS="127.0.0.0/8",
        TIDEMARK_OUTBOUND_ALLOW_HTTP="1",
    )
    os.environ.update(env)
    web_env = {**env, "DATABASE_URL": app_url(database_url, "tidemark-bench-web")}
    server = Server(web_env, workers=args.workers, log=RESULTS_DIR / "delivery-gunicorn.log")
    receiver = Receiver()
    publisher = None
    bench = None
    started_at = datetime.now(UTC)
    product_files = _fingerprints(PRODUCT_FILES)
    report: dict[str, Any] = {}
    try:
        print(f"creating databases {', '.join(databases)} and migrating")
        recreate_databases(args.pg, databases)
        clear_doorbells(args.broker_url)
        migrate(env)
        receiver.start()

        import django

        django.setup()
        from django.db import connections

        # As in the Celery worker, whose root logger is at WARNING: no line per request.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("catalog.doorbell").setLevel(logging.ERROR)
        seeded = seed(receiver.base_url, args.subscribers)
        connections.close_all()
        print(f"starting gunicorn ({args.workers} sync workers); receiver on :{receiver.port}")
        server.start()
        publisher = Publisher(server.base_url, seeded["token"], args.publisher_threads)
        bench = Bench(args, env, database_url, server, receiver, publisher, seeded, databases)

        print(
            f"latency: {args.latency_rounds} round(s), 1 worker; {args.rate:g} publishes/s x "
            f"{args.subscribers} subscribers, {args.warmup:g} s warm-up + {args.duration:g} s"
        )
        latency_rounds = [bench.latency(i) for i in range(1, args.latency_rounds + 1)]
        if args.hang_rounds:
            print(
                f"hang: {args.hang_rounds} round(s) as above, with /hooks/1 never answering "
                "(its endpoint hangs until the worker's timeout)"
            )
        hang_rounds = [bench.latency(i, hung="/hooks/1") for i in range(1, args.hang_rounds + 1)]
        print(
            f"throughput: {args.rounds} round(s) of {args.backlog} publishes "
            f"({args.backlog * args.subscribers} deliveries) queued with no worker, then one "
            "worker and one doorbell ring"
        )
        throughput = [
            bench.throughput(f"#{i}", args.backlog, args.receiver_ms)
            for i in range(1, args.rounds + 1)
        ]
        slow = []
        if args.slow_receiver_ms > 0:
            slow.append(bench.throughput("slow", args.slow_backlog, args.slow_receiver_ms))
        inprocess, reconnect = [], None
        if not args.skip_inprocess:
            print("in-process passes (catalog.delivery.deliver_due, no Celery)")
            inprocess.append(bench.inprocess("plain", args.backlog))
            inprocess.append(bench.inprocess("phases timed", args.profile_backlog, "phases"))
            inprocess.append(
                bench.inprocess(
                    "what-if synchronous_commit=off", args.profile_backlog, "async_commit"
                )
            )
            inprocess.append(
                bench.inprocess("what-if no health UPDATE", args.profile_backlog, "skip_health")
            )
            inprocess.append(bench.inprocess("cProfile", args.profile_backlog, "cprofile"))
            reconnect = bench.reconnect_cost(args.reconnects)

        report = {
            "benchmark": "tidemark delivery: publish -> webhook latency, deliveries/s per worker",
            "started_at": started_at.isoformat(),
            "finished_at": datetime.now(UTC).isoformat(),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "targets": {
                "latency_p50_ms": TARGET_P50_MS,
                "latency_p99_ms": TARGET_P99_MS,
                "publish_rate": TARGET_RATE,
                "deliveries_per_s_per_worker": TARGET_PER_WORKER,
            },
            "settings": {
                "rate": args.rate,
                "warmup_s": args.warmup,
                "duration_s": args.duration,
                "subscribers": args.subscribers,
                "backlog_publishes": args.backlog,
                "receiver_ms": args.receiver_ms,
                "slow_receiver_ms": args.slow_receiver_ms,
                "hang_rounds": args.hang_rounds,
                "slow_backlog_publishes": args.slow_backlog,
                "profile_backlog_publishes": args.profile_backlog,
                "rounds": args.rounds,
                "publisher": f"open loop, {args.publisher_threads} httpx keep-alive threads, "
                "one new daily partition per publish, POST /api/v1/readiness",
                "latency_definition": "receiver arrival time.time() - publish request start "
                "time.time(), joined on the payload's data.partition and the endpoint path",
                "receiver": "asyncio HTTP/1.1 keep-alive, answers 204, records only (own process)",
                "worker_argv": bench.worker.argv[1:],
                "worker_settings_module": args.worker_settings,
                "gunicorn": {"argv": server.argv[1:], "settings_module": "config.settings.bench"},
                "delivery_settings": _delivery_settings(),
                "databases": databases,
                "broker_url": args.broker_url,
                "quiet_cores": args.quiet_cores,
                "vacuum_before_each_run": not args.no_vacuum,
                "product_files_sha256_at_start": product_files,
                "postgres_autovacuum": _pg_setting(args.pg, "autovacuum"),
            },
            "machine": machine_info(
                args.pg,
                {"celery": _version("celery"), "httpx": _version("httpx")},
                "gunicorn, worker, receiver, publisher, PostgreSQL and Redis share the same CPUs",
            ),
            "latency_rounds": latency_rounds,
            "hang_rounds": hang_rounds,
            "throughput": throughput,
            "slow_receiver": slow,
            "inprocess": inprocess,
            "reconnect": reconnect,
            "logs": {
                "gunicorn": server.log_summary(),
                "worker": log_summary(bench.worker.log),
            },
        }
        changed = [
            path
            for path, digest in _fingerprints(PRODUCT_FILES).items()
            if digest != product_files.get(path)
        ]
        report["settings"]["product_files_changed_during_run"] = changed
        report["summary"] = summarise(report, args)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n")
        print_table(report)
        for name, logs in report["logs"].items():
            if logs["tracebacks"] or logs["errors"] or logs["warnings"]:
                print(
                    f"{name} log {logs['log']}: {logs['tracebacks']} tracebacks, "
                    f"{logs['errors']} errors, {logs['warnings']} warnings"
                )
        if changed:
            print(
                "WARNING: product files changed while the bench ran (processes started later "
                f"ran other code than earlier ones): {', '.join(changed)}"
            )
        print(f"wrote {args.output}")
    finally:
        if publisher is not None:
            publisher.stop()
        if bench is not None:
            bench.worker.stop()
        server.stop()
        receiver.stop()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if not args.keep:
            drop_databases(args.pg, databases)
        clear_doorbells(args.broker_url, WORKER_KEYS)
    if args.check and report and not all(report["summary"]["verdict"].values()):
        return 1
    return 0


# The code this bench measures; their hashes go into the JSON (the working tree may differ
# from the recorded commit).
PRODUCT_FILES = (
    "catalog/delivery.py",
    "catalog/sending.py",
    "catalog/success_batches.py",
    "catalog/tasks.py",
    "catalog/doorbell.py",
    "catalog/services/publishing.py",
    "catalog/services/one_statement.py",
    "catalog/services/publish_steps.py",
    "catalog/services/publish_targets.py",
    "catalog/services/subscriptions.py",
    "catalog/models/delivery.py",
    "catalog/models/partitions.py",
    "outbound/http.py",
    "outbound/signing.py",
    "config/celery.py",
    "config/settings/base.py",
)


def _fingerprints(paths: tuple[str, ...]) -> dict[str, str | None]:
    import hashlib

    out: dict[str, str | None] = {}
    for path in paths:
        try:
            out[path] = hashlib.sha256((ROOT / path).read_bytes()).hexdigest()[:16]
        except OSError:
            out[path] = None
    return out


def _pg_setting(pg: str, name: str) -> str | None:
    import psycopg

    with contextlib.suppress(psycopg.Error), psycopg.connect(f"{pg}/postgres") as conn:
        return conn.execute("SELECT current_setting(%s)", [name]).fetchone()[0]
    return None


def _delivery_settings() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.TIDEMARK_DELIVERY)


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
