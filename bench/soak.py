"""Soak at year scale: the same live workload on a database holding a year of history and
on one holding a day, side by side in one run, with one pruning run in between.

Run from the repository root::

    .venv/bin/python bench/soak.py                                   # 10,000 datasets, 365 days
    .venv/bin/python bench/soak.py --datasets 300 --days 60 --duration 30   # a quick look

Steps (bench/README.md, Soak): migrate a template database pair once and seed it through
the ORM (teams, keys, datasets, subscriptions to a local receiver, 20 monitors' channels)
and, with SQL, the newest day of history; clone it into ``tmbench_soak_year`` and
``tmbench_soak_empty`` (plus ``_wd``); write ``--days`` of history into the year pair with
``INSERT ... SELECT generate_series`` (``soak_seed.py``); sizes per table; on the year pair
publish p99 without and during one ``manage.py prune`` (catalog, then the watchdog's),
sizes again; then the live workload for ``--duration`` seconds against each pair. Writes
``bench/results/soak.json``; drops the databases at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import soak_seed
from bench.common import (
    RESULTS_DIR,
    ROOT,
    VENV_BIN,
    Server,
    add_service_args,
    bench_end,
    bench_env,
    bench_start,
    clear_doorbells,
    drop_databases,
    machine_info,
    migrate,
    percentile,
    recreate_databases,
    spawn_logged,
    stop_process,
    wait_consuming,
)

PRODUCERS = 20  # producer teams (datasets owned round robin)
CONSUMERS = 30  # consumer teams, one webhook endpoint each; each dataset has 3 of them
NAMESPACE = "s3://soak"
TARGET_RATIO = 1.3
TARGET_PRUNE_RATIO = 2.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=365, help="days of history (year db)")
    parser.add_argument("--hourly-every", type=int, default=10, help="one dataset in N hourly")
    parser.add_argument(
        "--lineage-per-hour", type=int, default=None, help="default: 0.3 x datasets (3,000)"
    )
    parser.add_argument("--monitors", type=int, default=None, help="default: datasets / 10")
    parser.add_argument("--duration", type=float, default=180.0, help="live seconds per db")
    parser.add_argument("--rate", type=float, default=10.0, help="publishes per second")
    parser.add_argument("--prune-baseline", type=float, default=120.0, help="seconds")
    parser.add_argument(
        "--prune-no-pause",
        action="store_true",
        help="the first prune with --no-pause (batches back to back), not the duty cycle",
    )
    parser.add_argument("--sweep-publishes", type=int, default=100)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="only the live workload, on the year and empty pairs a --keep run left",
    )
    add_service_args(
        parser, db_prefix="tmbench_soak", broker_url="redis://127.0.0.1:6379/8", output="soak.json"
    )
    return parser.parse_args(argv)


def is_hourly(index: int, every: int) -> bool:
    return every > 0 and index % every == 0


def dataset_name(index: int) -> str:
    return f"raw/table_{index:05d}"


def monitor_key(g: int) -> str:
    """The ping key ``soak_seed.MONITORS`` gives monitor ``g`` (md5 of its name, as uuid)."""
    return str(uuid.UUID(hashlib.md5(f"soak-monitor-{g}".encode()).hexdigest()))  # noqa: S324


# --- children: Django processes on one database pair --------------------------------------


def child_base(cfg: dict[str, Any]) -> dict[str, Any]:
    """Teams, keys, a user, datasets and subscriptions (ORM, on the template pair)."""
    from django.contrib.auth import get_user_model

    from catalog.actors import Actor
    from catalog.models import ApiKey, Dataset, Membership, Subscription
    from catalog.services import subscriptions, teams

    producers = [
        teams.team_create(slug=f"producer-{i}", name=f"Producer {i}") for i in range(PRODUCERS)
    ]
    tokens = [
        teams.api_key_create(
            team=t, name="soak", scopes=[ApiKey.Scope.PUBLISH, ApiKey.Scope.LINEAGE]
        )[1]
        for t in producers
    ]
    datasets = Dataset.objects.bulk_create(
        (
            Dataset(
                namespace=NAMESPACE,
                name=dataset_name(i),
                owner=producers[i % PRODUCERS],
                partitioning="hourly" if is_hourly(i, cfg["hourly_every"]) else "daily",
                sla_cron="30 * * * *" if is_hourly(i, cfg["hourly_every"]) else "0 6 * * *",
                accepts_future_partitions=True,
            )
            for i in range(cfg["datasets"])
        ),
        batch_size=2000,
    )
    consumers, endpoints = [], []
    for i in range(CONSUMERS):
        team = teams.team_create(slug=f"consumer-{i}", name=f"Consumer {i}")
        result = subscriptions.subscription_create(
            actor=Actor(team=team),
            dataset=datasets[i % len(datasets)],
            endpoint_url=f"{cfg['receiver']}/hooks/consumer-{i}",
        )
        consumers.append(team)
        endpoints.append(result.subscription.endpoint)
    existing = set(Subscription.objects.values_list("dataset_id", "team_id"))
    Subscription.objects.bulk_create(
        (
            Subscription(dataset=d, team=consumers[c], endpoint=endpoints[c])
            for n, d in enumerate(datasets)
            for c in ((n + k) % CONSUMERS for k in range(3))
            if (d.pk, consumers[c].pk) not in existing
        ),
        batch_size=5000,
    )
    read_token = teams.api_key_create(team=consumers[0], name="read", scopes=[ApiKey.Scope.READ])[1]
    user = get_user_model().objects.create_user("soak", password=uuid.uuid4().hex)
    Membership.objects.create(team=consumers[0], user=user)
    Membership.objects.create(team=producers[0], user=user)
    hourly = next(d for n, d in enumerate(datasets) if is_hourly(n, cfg["hourly_every"]))
    return {
        "tokens": tokens,
        "read_token": read_token,
        "dataset_page": f"/datasets/{hourly.pk}/",
        "team_page": "/teams/consumer-0/",
    }


def child_rekey(cfg: dict[str, Any]) -> dict[str, Any]:
    """For ``--reuse``: new keys for the producers and the reader of a kept pair (a run's
    tokens are not stored), endpoints pointed at this run's receiver, and the pages."""
    from catalog.models import ApiKey, Dataset, Endpoint, Team
    from catalog.services import teams

    tokens = [
        teams.api_key_create(
            team=Team.objects.get(slug=f"producer-{i}"),
            name="soak",
            scopes=[ApiKey.Scope.PUBLISH, ApiKey.Scope.LINEAGE],
        )[1]
        for i in range(PRODUCERS)
    ]
    consumer = Team.objects.get(slug="consumer-0")
    read_token = teams.api_key_create(team=consumer, name="read", scopes=[ApiKey.Scope.READ])[1]
    for i in range(CONSUMERS):
        Endpoint.objects.filter(team__slug=f"consumer-{i}").update(
            url=f"{cfg['receiver']}/hooks/consumer-{i}"
        )
    hourly = Dataset.objects.filter(name=dataset_name(0)).get()
    return {
        "tokens": tokens,
        "read_token": read_token,
        "dataset_page": f"/datasets/{hourly.pk}/",
        "team_page": "/teams/consumer-0/",
    }


class Load:
    """Open-loop HTTP load in threads: ``every`` seconds ``request(client, i)``; records
    each latency (ms) and status."""

    def __init__(self, name: str, rate: float, request, threads: int = 2) -> None:
        self.name, self.rate, self.request, self.threads = name, rate, request, threads
        self.samples: list[tuple[float, float, int]] = []  # (start, ms, status)
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._counter = iter(range(1 << 40))

    def _run(self, slot: int) -> None:
        import httpx

        period = self.threads / self.rate
        with httpx.Client(timeout=30) as client:
            due = time.monotonic() + slot * period / self.threads
            while not self.stop.is_set():
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                due += period
                with self._lock:
                    i = next(self._counter)
                t0 = time.monotonic()
                try:
                    status = self.request(client, i)
                except Exception:  # counted as status 0
                    status = 0
                self.samples.append((t0, (time.monotonic() - t0) * 1000, status))

    def start(self) -> None:
        self._workers = [
            threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(self.threads)
        ]
        for w in self._workers:
            w.start()

    def finish(self) -> None:
        self.stop.set()
        for w in self._workers:
            w.join(timeout=40)

    def summary(self, since: float = 0.0, until: float = float("inf")) -> dict[str, Any]:
        ms = sorted(m for t, m, _ in self.samples if since <= t < until)
        statuses: dict[int, int] = {}
        for t, _, s in self.samples:
            if since <= t < until:
                statuses[s] = statuses.get(s, 0) + 1
        if not ms:
            return {"requests": 0}
        return {
            "requests": len(ms),
            "p50_ms": round(percentile(ms, 50), 2),
            "p99_ms": round(percentile(ms, 99), 2),
            "max_ms": round(ms[-1], 2),
            "status": {str(k): v for k, v in sorted(statuses.items())},
        }


def publisher(cfg: dict[str, Any], base_url: str, offset: int) -> Load:
    """Publishes of new partitions (dataset ``i * 7919 mod N``, the ``offset + i // N``-th
    period from now on) with the owner team's key."""
    n = cfg["datasets"]
    now = datetime.now(UTC)

    def request(client, i: int) -> int:
        index = (i * 7919) % n
        step = offset + i // n
        if is_hourly(index, cfg["hourly_every"]):
            key = (now + timedelta(hours=step)).strftime("%Y-%m-%dT%H")
        else:
            key = (now + timedelta(days=step)).strftime("%Y-%m-%d")
        body = {"namespace": NAMESPACE, "name": dataset_name(index), "partition": key}
        token = cfg["tokens"][index % PRODUCERS]
        resp = client.post(
            f"{base_url}/api/v1/readiness", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        return resp.status_code

    return Load("publish", cfg["rate"], request)


def start_worker(env: dict[str, str], label: str) -> subprocess.Popen:
    log = RESULTS_DIR / f"soak-{label}-worker.log"
    log.unlink(missing_ok=True)
    proc = spawn_logged(
        [
            *(str(VENV_BIN / "celery"), "-A", "config.celery", "worker", "-P", "solo"),
            *("-Q", "delivery,default,lineage", "--without-gossip", "--without-mingle"),
            *("-l", "info", "-n", f"tidemark-soak-{label}-{os.getpid()}@%h"),
        ],
        env,
        log,
    )
    wait_consuming([proc], env["CELERY_BROKER_URL"], log)
    return proc


def manage(env: dict[str, str], *args: str, watchdog: bool = False) -> tuple[float, str]:
    """Run ``manage.py args`` (watchdog settings with ``watchdog``); seconds and stdout."""
    if watchdog:
        env = {**env, "DJANGO_SETTINGS_MODULE": "config.settings.watchdog"}
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed: {out.stderr[-2000:]}")
    return time.perf_counter() - t0, out.stdout


# ``manage.py prune`` in a process that boots Django first and prunes when told to: the
# window measured "during the prune" is the pruning, as in a worker running the periodic
# task, not Django's start-up (a second of one core, which would be most of a short run's
# slowest publishes).
PRUNE_ON_CUE = (
    "import os, sys, django\n"
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings.local')\n"
    "django.setup()\n"
    "from django.core.management import call_command\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "call_command('prune', *sys.argv[1:])\n"
)


def prune_on_cue(env: dict[str, str], *args: str, before=None) -> tuple[float, float, str]:
    """Boot a pruning process, call ``before()`` once it is ready, then let it prune:
    (seconds booting, seconds pruning, its stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", PRUNE_ON_CUE, *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = proc.stdout.readline()
    if ready.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the pruning process did not start: {proc.stderr.read()[-2000:]}")
    booted = time.perf_counter() - t0
    if before:
        before()
    t1 = time.perf_counter()
    out, err = proc.communicate("go\n")
    if proc.returncode:
        raise RuntimeError(f"prune {' '.join(args)} failed: {err[-2000:]}")
    return booted, time.perf_counter() - t1, out


def child_prune(cfg: dict[str, Any]) -> dict[str, Any]:
    """Publish p50/p99 for ``prune_baseline`` s, then while ``manage.py prune`` runs (the
    catalog's, timed from a booted process's go); then the watchdog's prune, timed alone."""
    env = dict(os.environ)
    server = Server(env, workers=2, log=RESULTS_DIR / "soak-prune-gunicorn.log")
    server.start()
    marks: dict[str, float] = {}
    try:
        load = publisher(cfg, server.base_url, offset=1000)

        def baseline_then_go() -> None:  # the pruning process has booted: measure
            load.start()
            marks["t0"] = time.monotonic()
            time.sleep(cfg["prune_baseline"])
            marks["t1"] = time.monotonic()

        boot, seconds, out = prune_on_cue(
            env, *(["--no-pause"] if cfg["prune_no_pause"] else []), before=baseline_then_go
        )
        t0, t1, t2 = marks["t0"], marks["t1"], time.monotonic()
        load.finish()
    finally:
        server.stop()
    # No worker ran: the publishes made deliveries nobody sent. Marked sent, so that the
    # year pair's live step does not start with this backlog (the empty pair has none).
    from django.db.models import Count
    from django.utils import timezone

    from catalog import success_counts
    from catalog.models import Delivery

    now = timezone.now()
    backlog = Delivery.objects.filter(state__in=["pending", "retrying"]).update(
        state="succeeded", attempts=1, last_attempt_at=now, finished_at=now
    )
    # Counted as the workers count what they send (the endpoints' health reads it).
    marked = Delivery.objects.filter(state="succeeded", finished_at=now).values("endpoint_id")
    success_counts.successes_add(
        {
            (row["endpoint_id"], success_counts.hour_of(now)): row["n"]
            for row in marked.annotate(n=Count("pk")).order_by()
        }
    )
    wd_seconds, wd_out = manage(env, "prune", watchdog=True)
    without, during = load.summary(t0 + 2, t1), load.summary(t1, t2)
    from django.conf import settings

    return {
        "duty_cycle": 1.0 if cfg["prune_no_pause"] else settings.TIDEMARK_PRUNE["duty_cycle"],
        "prune_seconds": round(seconds, 2),
        "prune_boot_seconds": round(boot, 2),
        "prune_output": out.strip().splitlines(),
        "watchdog_prune_seconds": round(wd_seconds, 2),
        "watchdog_prune_output": wd_out.strip().splitlines(),
        "publish_without_prune": without,
        "publish_during_prune": during,
        "p99_ratio_during_over_without": ratio(during.get("p99_ms"), without.get("p99_ms")),
        # Where the slow ones fall: (seconds after the prune began, ms), and p99 a minute.
        "slowest_during": sorted(
            ((round(t - t1, 1), round(ms, 1)) for t, ms, _ in load.samples if t1 <= t < t2),
            key=lambda sample: -sample[1],
        )[:20],
        "p99_ms_by_minute": [
            load.summary(start, min(start + 60, t2)).get("p99_ms")
            for start in (t1 + 60 * m for m in range(int((t2 - t1) // 60) + 1))
        ],
        "deliveries_marked_sent": backlog,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def child_live(cfg: dict[str, Any]) -> dict[str, Any]:
    """The live workload for ``duration`` s, then the in-process passes."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from catalog import delivery, freshness
    from catalog.models import Dataset, Delivery

    env = dict(os.environ)
    label = cfg["label"]
    browser = Client()
    browser.force_login(get_user_model().objects.get(username="soak"))
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    server = Server(env, workers=2, log=RESULTS_DIR / f"soak-{label}-gunicorn.log")
    wd = Server(
        env, workers=1, worker_class="gthread", threads=4, log=RESULTS_DIR / f"soak-{label}-wd.log"
    )
    wd.argv[1] = "config.wsgi_watchdog:application"
    wd.env["DJANGO_SETTINGS_MODULE"] = "config.settings.watchdog"
    worker = None
    monitors = cfg["monitors"]

    def lineage(client, i: int) -> int:
        run_id = str(uuid.uuid4())
        body = {
            "eventType": "COMPLETE",
            "eventTime": datetime.now(UTC).isoformat(),
            "run": {"runId": run_id},
            "job": {"namespace": "airflow://soak", "name": f"job_{i % 500}"},
            "inputs": [{"namespace": NAMESPACE, "name": dataset_name(i % cfg["datasets"])}],
            "outputs": [{"namespace": NAMESPACE, "name": f"curated/out_{i % 500}"}],
            "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        }
        token = cfg["tokens"][0]
        resp = client.post(
            f"{server.base_url}/api/v1/lineage",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        return resp.status_code

    def ping(client, i: int) -> int:
        return client.get(f"{wd.base_url}/ping/{monitor_key(1 + i % monitors)}").status_code

    pages = {
        "catalog_page": ("/", {"Cookie": cookie}),
        "dataset_page": (cfg["dataset_page"], {"Cookie": cookie}),
        "team_page": (cfg["team_page"], {"Cookie": cookie}),
        "endpoint_list": ("/api/v1/endpoints", {"Authorization": f"Bearer {cfg['read_token']}"}),
    }
    page_ms: dict[str, list[float]] = {name: [] for name in pages}
    page_status: dict[str, dict[str, int]] = {name: {} for name in pages}
    loads = [
        publisher(cfg, server.base_url, offset=cfg.get("publish_offset", 0)),
        Load("lineage", cfg["lineage_rate"], lineage, threads=1),
        Load("ping", cfg["ping_rate"], ping, threads=1),
    ]
    result: dict[str, Any] = {}
    try:
        import httpx

        server.start()
        wd.start()
        worker = start_worker(env, label)
        for load in loads:
            load.start()
        t0 = time.monotonic()
        with httpx.Client(timeout=60) as client:
            while time.monotonic() < t0 + cfg["duration"]:
                for name, (path, headers) in pages.items():
                    s = time.monotonic()
                    resp = client.get(f"{server.base_url}{path}", headers=headers)
                    page_ms[name].append((time.monotonic() - s) * 1000)
                    key = str(resp.status_code)
                    page_status[name][key] = page_status[name].get(key, 0) + 1
                time.sleep(0.5)
        for load in loads:
            load.finish()
            result[load.name] = load.summary(t0 + 3)
        for name, values in page_ms.items():
            values.sort()
            result[name] = {
                "requests": len(values),
                "p50_ms": round(percentile(values, 50), 2),
                "p99_ms": round(percentile(values, 99), 2),
                "status": page_status[name],
            }
        stop_process(worker)
        # The delivery sweep: a backlog written with no worker, sent in this process.
        backlog = publisher(cfg, server.base_url, offset=cfg.get("publish_offset", 0) + 500)
        backlog.rate = 50
        backlog.start()
        while len(backlog.samples) < cfg["sweep_publishes"]:
            time.sleep(0.05)
        backlog.finish()
        due = Delivery.objects.filter(state__in=["pending", "retrying"]).count()
        sender = delivery.sender_from_settings()
        s = time.perf_counter()
        sent = 0
        while True:
            summary = delivery.deliver_due(sender=sender, max_batches=1_000_000)
            sent += summary.claimed
            if not summary.more_due:
                break
        seconds = time.perf_counter() - s
        result["delivery_sweep"] = {
            "due": due,
            "sent": sent,
            "seconds": round(seconds, 3),
            "ms_per_delivery": round(1000 * seconds / max(sent, 1), 3),
        }
        # One freshness pass over every dataset (all made due now).
        # Every dataset's latest deadline (as freshness.py seeds them): 06:00 UTC today or
        # yesterday for the daily ones, the latest half hour for the hourly ones.
        now = timezone.now()
        daily = now.replace(hour=6, minute=0, second=0, microsecond=0)
        daily -= timedelta(days=1) if daily > now else timedelta(0)
        hourly = now.replace(minute=30, second=0, microsecond=0)
        hourly -= timedelta(hours=1) if hourly > now else timedelta(0)
        judged = 0
        for partitioning, deadline in (("daily", daily), ("hourly", hourly)):
            judged += Dataset.objects.filter(partitioning=partitioning).update(
                next_deadline_at=deadline, next_check_at=now
            )
        s = time.perf_counter()
        late = 0
        while True:
            summary = freshness.evaluate_pass(clock=timezone.now)
            late += summary.handled  # partitions newly found late
            if not summary.more_due:
                break
        seconds = time.perf_counter() - s
        result["freshness_evaluation"] = {
            "datasets": judged,
            "newly_late": late,
            "seconds": round(seconds, 3),
            "ms_per_dataset": round(1000 * seconds / max(judged, 1), 3),
        }
    finally:
        stop_process(worker)
        server.stop()
        wd.stop()
    out = subprocess.run(
        [sys.executable, __file__, "_wdcycle"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings.watchdog"},
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"watchdog cycle failed: {out.stderr[-2000:]}")
    result["watchdog_cycle"] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def child_wdcycle() -> dict[str, Any]:
    """``loop.run_cycle`` 30 times (nothing due: the monitors were pinged on time)."""
    from watchdog import loop, paging

    sender = paging.sender_from_settings()
    times = []
    for _ in range(30):
        s = time.perf_counter()
        loop.run_cycle(sender=sender)
        times.append((time.perf_counter() - s) * 1000)
    times.sort()
    return {"cycles": 30, "p50_ms": round(percentile(times, 50), 2), "p99_ms": round(times[-1], 2)}


def run_child(kind: str, env: dict[str, str], cfg: dict[str, Any]) -> dict[str, Any]:
    """Run ``soak.py _<kind>`` with ``env`` and ``cfg``; its last stdout line is JSON."""
    out = subprocess.run(
        [sys.executable, __file__, f"_{kind}"],
        cwd=ROOT,
        env={**env, "SOAK_CHILD": json.dumps(cfg)},
        stdout=subprocess.PIPE,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"the {kind} step failed (exit {out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the orchestrator (psycopg only) ------------------------------------------------------

SIZES = """
SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid),
       pg_indexes_size(c.oid), coalesce(s.n_live_tup, 0)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = 'public' AND c.relkind = 'r'
ORDER BY pg_total_relation_size(c.oid) DESC
"""


def sizes(pg: str, database: str) -> dict[str, Any]:
    """VACUUM ANALYZE, then per table: total, heap and index bytes and live rows."""
    import psycopg

    with psycopg.connect(f"{pg}/{database}", autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        tables = {
            name: {"total": total, "heap": heap, "indexes": idx, "rows": rows}
            for name, total, heap, idx, rows in conn.execute(SIZES).fetchall()
            if total > 64 * 1024
        }
        db = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return {"database_bytes": db, "tables": tables}


def checkpoint(pg: str) -> None:
    """Write out what the seeding left dirty (``CHECKPOINT``, as a superuser), so that the
    publishes measured without the prune do not meet the seeding's checkpoint instead."""
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute("CHECKPOINT")


def clone(pg: str, template: str, names: list[str]) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def print_sizes(before: dict, after: dict) -> None:
    print(
        f"\n{'table':34} {'rows before':>12} {'size before':>12} {'rows after':>12} "
        f"{'size after':>12}"
    )
    for name, b in list(before["tables"].items())[:16]:
        a = after["tables"].get(name, {"rows": 0, "total": 0})
        print(
            f"{name:34} {b['rows']:>12,} {mb(b['total']):>12} {a['rows']:>12,} {mb(a['total']):>12}"
        )
    print(
        f"{'database':34} {'':>12} {mb(before['database_bytes']):>12} {'':>12} "
        f"{mb(after['database_bytes']):>12}"
    )


def retained_estimate(before: dict, after: dict) -> int:
    """Bytes the rows kept would take once the space pruning freed is reused: per table,
    its size before times the share of rows kept (a table shrinks on disk only by VACUUM
    FULL; plain VACUUM leaves the freed pages to new rows)."""
    total = 0
    for name, b in before["tables"].items():
        kept = after["tables"].get(name, {"rows": 0})["rows"]
        total += round(b["total"] * min(1.0, kept / b["rows"])) if b["rows"] else b["total"]
    return total


RATIOS = [
    ("publish p50", ("publish", "p50_ms")),
    ("publish p99", ("publish", "p99_ms")),
    ("delivery sweep (ms/delivery)", ("delivery_sweep", "ms_per_delivery")),
    ("freshness evaluation (ms/dataset)", ("freshness_evaluation", "ms_per_dataset")),
    ("catalog page p50", ("catalog_page", "p50_ms")),
    ("dataset page p50", ("dataset_page", "p50_ms")),
    ("team page p50", ("team_page", "p50_ms")),
    ("GET /api/v1/endpoints p50", ("endpoint_list", "p50_ms")),
    ("watchdog cycle p50", ("watchdog_cycle", "p50_ms")),
]


def run_live(args, envs: dict, cfgs: dict[str, dict]) -> dict[str, Any]:
    """The live workload on the empty pair, then on the year pair."""
    live = {}
    for label in ("empty", "year"):
        print(f"live workload on {label} for {args.duration:.0f} s", flush=True)
        clear_doorbells(args.broker_url, ("lineage",))
        live[label] = run_child("live", envs[label], {**cfgs[label], "label": label})
    return live


def finish_report(args, report: dict, live: dict) -> dict[str, float | None]:
    """Ratios year/empty and machine info into ``report``, written to ``args.output``."""
    report["live"] = live
    ratios = {}
    for title, (group, field) in RATIOS:
        ratios[title] = ratio(live["year"][group].get(field), live["empty"][group].get(field))
    report["ratios_year_over_empty"] = ratios
    report["machine"] = machine_info(args.pg, {}, "soak")
    args.output.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return ratios


def print_ratios(live: dict, ratios: dict) -> None:
    print(f"\n{'figure':36} {'empty':>10} {'year':>10} {'ratio':>7}  target <= {TARGET_RATIO}")
    for title, (group, field) in RATIOS:
        e, y = live["empty"][group].get(field), live["year"][group].get(field)
        r = ratios[title]
        verdict = "" if r is None else ("pass" if r <= TARGET_RATIO else "FAIL")
        print(f"{title:36} {e!s:>10} {y!s:>10} {r!s:>7}  {verdict}")


def reuse(args, pairs: dict, envs: dict, cfg: dict, report: dict, receiver) -> int:
    """``--reuse``: migrate the kept year and empty pairs (this checkout's migrations), give
    them new keys and this run's receiver, and run the live workload alone. Publishes go
    to periods no earlier run used (``publish_offset``, from the clock)."""
    import psycopg

    cfg["publish_offset"] = 2000 + int(time.time()) // 600 % 1000
    cfgs = {}
    for label in ("empty", "year"):
        migrate(envs[label])
        cfgs[label] = {**cfg, **run_child("rekey", envs[label], cfg)}
    with psycopg.connect(f"{args.pg}/{pairs['year'][0]}") as conn:
        report["rows"] = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608
            for table in ("catalog_partition", "catalog_delivery", "catalog_notification")
        }
    live = run_live(args, envs, cfgs)
    ratios = finish_report(args, report, live)
    print_ratios(live, ratios)
    print(f"wrote {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import psycopg

    from bench.delivery import Receiver

    bench_start(args.pg)
    p = args.db_prefix
    pairs = {
        "template": [f"{p}_tpl", f"{p}_tpl_wd"],
        "year": [f"{p}_year", f"{p}_year_wd"],
        "empty": [f"{p}_empty", f"{p}_empty_wd"],
    }
    extra = {
        "TIDEMARK_LOG_LEVEL": "WARNING",
        "TIDEMARK_OUTBOUND_ALLOW_NETWORKS": "127.0.0.0/8",
        "TIDEMARK_OUTBOUND_ALLOW_HTTP": "1",
    }
    receiver = Receiver()
    receiver.start()
    extra["WATCHDOG_PAGERDUTY_URL"] = f"{receiver.base_url}/pagerduty"
    envs = {k: bench_env(args.pg, v, args.broker_url, **extra) for k, v in pairs.items()}
    monitors = args.monitors or max(1, args.datasets // 10)
    if args.lineage_per_hour is None:
        args.lineage_per_hour = max(1, round(0.3 * args.datasets))
    cfg: dict[str, Any] = {
        "datasets": args.datasets,
        "hourly_every": args.hourly_every,
        "receiver": receiver.base_url,
        "monitors": monitors,
        "rate": args.rate,
        "lineage_rate": max(0.2, args.lineage_per_hour / 3600),
        "ping_rate": 5.0,
        "duration": args.duration,
        "prune_baseline": args.prune_baseline,
        "prune_no_pause": args.prune_no_pause,
        "sweep_publishes": args.sweep_publishes,
    }
    report: dict[str, Any] = {
        "benchmark": "tidemark soak: a year of history against a day, same live workload",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "settings": {**cfg, "days": args.days, "lineage_per_hour": args.lineage_per_hour},
    }
    try:
        if args.reuse:
            return reuse(args, pairs, envs, cfg, report, receiver)
        t = time.perf_counter()
        print(f"migrating {', '.join(pairs['template'])}", flush=True)
        recreate_databases(args.pg, pairs["template"])
        migrate(envs["template"])
        cfg.update(run_child("base", envs["template"], cfg))
        with psycopg.connect(f"{args.pg}/{pairs['template'][0]}") as conn:
            soak_seed.seed_catalog(
                conn, first_day=1, last_day=0, lineage_per_hour=args.lineage_per_hour
            )
        with psycopg.connect(f"{args.pg}/{pairs['template'][1]}") as conn:
            soak_seed.seed_monitors(conn, monitors)
            soak_seed.seed_watchdog(conn, first_day=1, last_day=0)
        clone(args.pg, pairs["template"][0], [pairs["year"][0], pairs["empty"][0]])
        clone(args.pg, pairs["template"][1], [pairs["year"][1], pairs["empty"][1]])
        drop_databases(args.pg, pairs["template"])
        report["setup_seconds"] = round(time.perf_counter() - t, 1)
        print(f"template seeded and cloned in {report['setup_seconds']} s", flush=True)

        t = time.perf_counter()
        with psycopg.connect(f"{args.pg}/{pairs['year'][0]}") as conn:
            seeded = soak_seed.seed_catalog(
                conn, first_day=args.days, last_day=1, lineage_per_hour=args.lineage_per_hour
            )
        with psycopg.connect(f"{args.pg}/{pairs['year'][1]}") as conn:
            seeded.update(soak_seed.seed_watchdog(conn, first_day=args.days, last_day=1))
        seconds = time.perf_counter() - t
        rows = sum(int(v["rows"]) for v in seeded.values())
        report["seeding"] = {
            "tables": seeded,
            "rows": rows,
            "seconds": round(seconds, 1),
            "seconds_per_million_rows": round(seconds / max(rows, 1) * 1e6, 1),
            "filled_with_zero_values": soak_seed.FILLED,
        }
        print(
            f"seeded {rows:,} rows of history in {seconds:.0f} s "
            f"({report['seeding']['seconds_per_million_rows']} s per million)",
            flush=True,
        )

        before = {
            "year": sizes(args.pg, pairs["year"][0]),
            "year_wd": sizes(args.pg, pairs["year"][1]),
        }
        checkpoint(args.pg)
        print("pruning the year database (publishing meanwhile)", flush=True)
        report["prune"] = run_child("prune", envs["year"], cfg)
        after = {
            "year": sizes(args.pg, pairs["year"][0]),
            "year_wd": sizes(args.pg, pairs["year"][1]),
        }
        report["sizes"] = {"before_prune": before, "after_prune": after}
        retained = retained_estimate(before["year"], after["year"]) + retained_estimate(
            before["year_wd"], after["year_wd"]
        )
        report["retained_bytes_estimate"] = retained

        live = run_live(args, envs, {label: cfg for label in ("empty", "year")})
        ratios = finish_report(args, report, live)

        print_sizes(before["year"], after["year"])
        print_sizes(before["year_wd"], after["year_wd"])
        print(f"rows kept would take about {mb(retained)} once freed space is reused")
        pr = report["prune"]
        print(
            f"\nprune (duty cycle {pr['duty_cycle']}): {pr['prune_seconds']} s "
            f"(watchdog {pr['watchdog_prune_seconds']} s); "
            f"publish p99 {pr['publish_without_prune'].get('p99_ms')} ms without, "
            f"{pr['publish_during_prune'].get('p99_ms')} ms during: "
            f"{pr['p99_ratio_during_over_without']}x (target <= {TARGET_PRUNE_RATIO})"
        )
        print_ratios(live, ratios)
        print(f"wrote {args.output}")
    finally:
        receiver.stop()
        bench_end(
            pg=args.pg,
            databases=[n for v in pairs.values() for n in v],
            keep=args.keep,
            broker_url=args.broker_url,
            doorbells=("lineage",),
        )
    return 0


def child_main(kind: str) -> int:
    import django

    django.setup()
    cfg = json.loads(os.environ.get("SOAK_CHILD", "{}"))
    handlers = {
        "_base": child_base,
        "_prune": child_prune,
        "_live": child_live,
        "_rekey": child_rekey,
    }
    result = child_wdcycle() if kind == "_wdcycle" else handlers[kind](cfg)
    with contextlib.suppress(Exception):
        from django.db import connections

        connections.close_all()
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        sys.exit(child_main(sys.argv[1]))
    sys.exit(main())
