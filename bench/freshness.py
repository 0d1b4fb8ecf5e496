"""Freshness benchmark: how soon after deadline plus grace every ``dataset.late`` is
written when thousands of datasets share one deadline.

Run from the repository root::

    .venv/bin/python bench/freshness.py                       # 10,000 datasets, 1 worker
    .venv/bin/python bench/freshness.py --datasets 2000 --subscribers 0 --mode inprocess

It creates fresh PostgreSQL databases (``tmbench_freshness`` and ``_wd``), migrates them
and bulk-creates ``--datasets`` daily datasets with the SLA ``0 6 * * *`` (UTC), all owned
by one team and each subscribed to by ``--subscribers`` teams (one webhook endpoint each,
so every late notice writes that many deliveries). No partition is ready, so every dataset
is late at its deadline plus grace; the grace is chosen so that instant ("late_at") falls
a few seconds after seeding.

- ``--mode worker`` (default): ``--workers`` real ``celery worker -P solo -Q freshness``
  processes; at ``late_at`` the bench rings ``catalog.tasks.evaluate_freshness`` once, as
  one beat tick would, and nothing else rings it (the pass continues by itself).
- ``--mode inprocess``: ``freshness.evaluate_pass`` in the bench process, no Celery.

Figures: seconds from ``late_at`` to the last incident written; per incident
``created_at - late_at`` p50/p99/max (the issue's target: p99 within 60 s with 10,000
datasets); datasets judged per second. A beat tick can come up to one beat interval after
``late_at`` (``evaluate-freshness`` is every 15 s): add it for the worst case. Writes
``bench/results/freshness.json``; drops the databases at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    VENV_BIN,
    add_service_args,
    bench_end,
    bench_env,
    bench_start,
    machine_info,
    migrate,
    percentile,
    recreate_databases,
    spawn_logged,
    stop_process,
    wait_consuming,
)

LEAD_SECONDS = 5  # late_at is this long after seeding ends (workers are ready by then)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--subscribers", type=int, default=1, help="teams per dataset")
    parser.add_argument("--mode", choices=["worker", "inprocess"], default="worker")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (worker mode)")
    parser.add_argument("--timeout", type=float, default=600.0)
    add_service_args(
        parser,
        db_name="tmbench_freshness",
        broker_url="redis://127.0.0.1:6379/12",
        output="freshness.json",
    )
    return parser.parse_args(argv)


def seed(datasets: int, subscribers: int) -> datetime:
    """Bulk-create the datasets (and subscriptions); returns their shared ``late_at``."""
    from catalog.models import Dataset, Endpoint, Subscription, Team

    owner = Team.objects.create(slug="producer", name="Producer")
    teams = Team.objects.bulk_create(
        Team(slug=f"consumer-{i}", name=f"Consumer {i}") for i in range(subscribers)
    )
    endpoints = Endpoint.objects.bulk_create(
        Endpoint(team=team, url=f"http://127.0.0.1:9/hook/{team.slug}") for team in teams
    )
    now = datetime.now(UTC)
    deadline = now.replace(hour=6, minute=0, second=0, microsecond=0)
    if deadline > now:
        deadline -= timedelta(days=1)
    # Seeding 10,000 rows takes a while: late_at is set after it, by an UPDATE.
    rows = Dataset.objects.bulk_create(
        (
            Dataset(
                namespace="s3://bench",
                name=f"raw/table_{i:05d}",
                owner=owner,
                partitioning=Dataset.Partitioning.DAILY,
                sla_cron="0 6 * * *",
            )
            for i in range(datasets)
        ),
        batch_size=2000,
    )
    Subscription.objects.bulk_create(
        (
            Subscription(team=team, dataset=dataset, endpoint=endpoint)
            for dataset in rows
            for team, endpoint in zip(teams, endpoints, strict=True)
        ),
        batch_size=5000,
    )
    late_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=LEAD_SECONDS)
    grace = int((late_at - deadline).total_seconds())
    Dataset.objects.update(
        sla_grace_seconds=grace, next_deadline_at=deadline, next_check_at=late_at
    )
    return late_at


def start_workers(env: dict[str, str], count: int) -> list[tuple[subprocess.Popen, Path]]:
    workers = []
    for n in range(count):
        log = RESULTS_DIR / f"freshness-worker-{n}.log"
        log.unlink(missing_ok=True)
        proc = spawn_logged(
            [
                *(str(VENV_BIN / "celery"), "-A", "config.celery", "worker", "-P", "solo"),
                *("-Q", "freshness", "--without-gossip", "--without-mingle", "-l", "info"),
                *("-n", f"tidemark-bench-freshness-{n}-{os.getpid()}@%h"),
            ],
            env,
            log,
        )
        workers.append((proc, log))
    wait_consuming([proc for proc, _ in workers], env["CELERY_BROKER_URL"], workers[0][1])
    return workers


def run(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    from django.db.models import Max
    from django.utils import timezone

    from catalog import doorbell, freshness
    from catalog.models import LatePartition

    workers = []
    if args.mode == "worker":
        workers = start_workers(env, args.workers)
    try:
        t0 = time.perf_counter()
        late_at = seed(args.datasets, args.subscribers)
        print(f"seeded {args.datasets:,} datasets in {time.perf_counter() - t0:.1f} s")
        time.sleep(max(0.0, (late_at - datetime.now(UTC)).total_seconds()))
        rung_at = datetime.now(UTC)
        if args.mode == "worker":
            doorbell.ring_now("catalog.tasks.evaluate_freshness")  # one beat tick
            give_up = time.monotonic() + args.timeout
            while LatePartition.objects.count() < args.datasets:
                if time.monotonic() > give_up:
                    raise RuntimeError("timed out: see bench/results/freshness-worker-*.log")
                time.sleep(0.2)
        else:
            while LatePartition.objects.count() < args.datasets:
                freshness.evaluate_pass(clock=timezone.now)
        done_at = datetime.now(UTC)
    finally:
        for proc, _ in workers:
            stop_process(proc)
    lags = sorted(
        (created - late_at).total_seconds()
        for created in LatePartition.objects.values_list("created_at", flat=True)
    )
    last = LatePartition.objects.aggregate(last=Max("created_at"))["last"]
    judge_seconds = (last - rung_at).total_seconds()
    return {
        "late_at": late_at.isoformat(),
        "incidents": len(lags),
        "ring_to_last_seconds": round(judge_seconds, 2),
        "observed_all_after_seconds": round((done_at - rung_at).total_seconds(), 2),
        "lag_p50_seconds": round(percentile(lags, 50), 2),
        "lag_p99_seconds": round(percentile(lags, 99), 2),
        "lag_max_seconds": round(lags[-1], 2),
        "datasets_per_second": round(args.datasets / judge_seconds, 1),
        "ms_per_dataset": round(1000 * judge_seconds / args.datasets, 2),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_start(args.pg)
    databases = [args.db_name, f"{args.db_name}_wd"]
    env = bench_env(args.pg, databases, args.broker_url, TIDEMARK_LOG_LEVEL="WARNING")
    os.environ.update(env)
    try:
        print(f"creating databases {', '.join(databases)} and migrating")
        recreate_databases(args.pg, databases)
        migrate(env)
        import django

        django.setup()
        result = run(args, env)
        report = {
            "benchmark": "tidemark freshness: one deadline shared by many datasets",
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "settings": {
                "datasets": args.datasets,
                "subscribers": args.subscribers,
                "mode": args.mode,
                "workers": args.workers if args.mode == "worker" else 0,
            },
            "result": result,
            "machine": machine_info(args.pg, {}, f"freshness, {args.mode}"),
        }
        args.output.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(
            f"{args.datasets:,} datasets x {args.subscribers} subscriber(s), {args.mode}"
            + (f" ({args.workers} worker process(es))" if args.mode == "worker" else "")
        )
        for key, value in result.items():
            print(f"  {key:28} {value}")
        print(f"wrote {args.output}")
    finally:
        bench_end(
            pg=args.pg,
            databases=databases,
            keep=args.keep,
            broker_url=args.broker_url,
            doorbells=("freshness",),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
