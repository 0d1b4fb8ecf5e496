"""Lineage benchmark: OpenLineage events accepted per second through the real HTTP stack,
and events processed per second by one worker process.

Run from the repository root (``make bench-lineage`` does the same)::

    .venv/bin/python bench/lineage.py

It creates fresh PostgreSQL databases (``tidemark_bench_lineage`` and
``tidemark_bench_lineage_watchdog``), migrates them, seeds a team that claims the job
namespace (so events are verified), a ``lineage`` key and a catalog dataset, starts
gunicorn with ``config.settings.bench`` on a free loopback port (the Procfile's web
process: 4 sync workers) and drives it with 16 concurrent ``wrk`` clients (a sync worker
closes each connection after its response).

Measured:

- ``accept``: ``POST /api/v1/lineage``, every request a new run's COMPLETE event with two
  inputs and one output (stored raw, doorbell rung after commit), alternating with
- ``floor``: ``POST /bench/floor``, the same body into a plain Django view doing one
  INSERT (bench/floor.py): the baseline of the same run;
- ``process``: N seeded pending events (START and COMPLETE of N/2 runs over 50 jobs, each
  reading a catalog dataset and an unknown one and writing one) processed by
  ``lineage_events_process_due`` in this one process, timed.

Targets: at least 500 accepted/s and 300 processed/s per worker process. It prints a
table with the targets and ratios, writes ``bench/results/lineage.json`` and drops the
bench databases at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    CpuMeter,
    Server,
    bench_env,
    check_services,
    clear_doorbells,
    drop_databases,
    machine_info,
    migrate,
    recreate_databases,
    run_wrk,
    wait_quiet,
    wrk_script,
    wrk_version,
)

TARGET_ACCEPTED = 500.0  # events/s through HTTP
TARGET_PROCESSED = 300.0  # events/s per worker process

LINEAGE_PATH = "/api/v1/lineage"
FLOOR_PATH = "/bench/floor"
JOB_NAMESPACE = "airflow://bench"
DATASET_NAMESPACE = "postgres://warehouse:5432"
CATALOGUED = "shop.public.orders"

# wrk script: every request a new run (runId from the thread id, a per-load salt and a
# counter). Args: path token salt.
WRK_LUA = r"""
local path, token, salt
local counter = 0

function init(args)
  path, token, salt = args[1], args[2], tonumber(args[3])
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if token ~= "-" then wrk.headers["Authorization"] = "Bearer " .. token end
end

function request()
  counter = counter + 1
  local run_id = string.format("%08x-%04x-4000-8000-%012d", salt, id, counter)
  local body = string.format(
    '{"eventType":"COMPLETE","eventTime":"2026-11-28T06:00:00Z","run":{"runId":"%s"},'
    .. '"job":{"namespace":"JOB_NAMESPACE","name":"job_%d"},'
    .. '"inputs":[{"namespace":"DATASET_NAMESPACE","name":"CATALOGUED"},'
    .. '{"namespace":"DATASET_NAMESPACE","name":"raw.events_%d"}],'
    .. '"outputs":[{"namespace":"DATASET_NAMESPACE","name":"marts.out_%d"}],'
    .. '"producer":"https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python",'
    .. '"schemaURL":"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"}',
    run_id, counter % 50, counter % 20, counter % 50)
  return wrk.format(nil, path, nil, body)
end
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (16)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds measured per run (10)")
    p.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before each run")
    p.add_argument("--rounds", type=int, default=2, help="floor+accept rounds (2)")
    p.add_argument("--workers", type=int, default=4, help="gunicorn workers (4)")
    p.add_argument(
        "--threads", type=int, default=1, help="gunicorn threads per worker (1; > 1: gthread)"
    )
    p.add_argument("--worker-class", default="sync", help="gunicorn worker class (sync)")
    p.add_argument("--events", type=int, default=4000, help="events seeded to process (4000)")
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server")
    p.add_argument("--db-name", default="tidemark_bench_lineage")
    p.add_argument("--broker-url", default="redis://127.0.0.1:6379/14")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "lineage.json")
    p.add_argument("--quiet-cores", type=float, default=0.25)
    p.add_argument("--quiet-wait", type=float, default=30.0)
    p.add_argument("--keep", action="store_true", help="keep the bench databases at the end")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    if args.clients < 1 or args.duration <= 0 or args.rounds < 1 or args.events < 2:
        p.error("--clients, --duration, --rounds and --events must be positive")
    if not args.db_name.isidentifier() or not args.db_name.islower():
        p.error("--db-name must be a lower-case identifier")
    return args


def seed() -> str:
    """Team ``bench-lineage`` claiming the job namespace, a lineage key (its token is
    returned), the catalog dataset its jobs read, and the floor's table."""
    from django.db import connection

    from bench.floor import CREATE_TABLE_SQL
    from catalog.actors import Actor
    from catalog.models import ApiKey
    from catalog.services import datasets, ownership, teams

    with connection.cursor() as cursor:
        cursor.execute(CREATE_TABLE_SQL)
    team = teams.team_create(slug="bench-lineage", name="Bench lineage")
    actor = Actor(team=team)
    ownership.claim_create(actor=actor, kind="job_namespace", pattern=JOB_NAMESPACE)
    datasets.dataset_register(actor=actor, namespace=DATASET_NAMESPACE, name=CATALOGUED)
    _, token = teams.api_key_create(team=team, name="bench", scopes=[ApiKey.Scope.LINEAGE])
    return token


def accept_runs(args: argparse.Namespace, server: Server, token: str, meter: CpuMeter) -> list:
    """Alternate floor and accept loads; each gets a warm-up, then a measured run."""
    script = wrk_script(
        WRK_LUA.replace("JOB_NAMESPACE", JOB_NAMESPACE)
        .replace("DATASET_NAMESPACE", DATASET_NAMESPACE)
        .replace("CATALOGUED", CATALOGUED)
    )
    runs = []
    try:
        for round_no in range(args.rounds):
            for target, path, key in (("floor", FLOOR_PATH, "-"), ("accept", LINEAGE_PATH, token)):
                salt = lambda: int.from_bytes(os.urandom(4), "big")  # noqa: E731
                run_wrk(
                    script,
                    server.base_url,
                    clients=args.clients,
                    threads=1,
                    seconds=args.warmup,
                    args=[path, key, str(salt())],
                )
                background = wait_quiet(args.quiet_cores, args.quiet_wait)
                start = meter.snapshot()
                result = run_wrk(
                    script,
                    server.base_url,
                    clients=args.clients,
                    threads=1,
                    seconds=args.duration,
                    args=[path, key, str(salt())],
                )
                result["cpu"] = meter.report(start, meter.snapshot(), result["requests"])
                result.update(target=target, round=round_no, background_cores=background)
                runs.append(result)
                print(
                    f"  {target:<7} round {round_no}: {result['rate']:>8.1f}/s {result['status']}"
                )
    finally:
        os.unlink(script)
    return runs


def process_run(n: int) -> dict[str, Any]:
    """Seed ``n`` pending events (START and COMPLETE of n/2 runs), then process them all
    in this process with ``lineage_events_process_due``; wall and CPU time."""
    from django.db import connection

    from catalog.actors import Actor
    from catalog.models import Team
    from lineage.models import LineageEvent
    from lineage.services import processing, receiving

    LineageEvent.objects.update(state=LineageEvent.State.PROCESSED)  # the HTTP runs' events
    actor = Actor(team=Team.objects.get(slug="bench-lineage"))
    base = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    for i in range(n // 2):
        run_id = str(uuid.uuid4())
        for event_type, minutes in (("START", 0), ("COMPLETE", 5)):
            receiving.lineage_event_receive(
                actor=actor,
                payload={
                    "eventType": event_type,
                    "eventTime": (base + timedelta(minutes=minutes + i)).isoformat(),
                    "run": {"runId": run_id},
                    "job": {"namespace": JOB_NAMESPACE, "name": f"job_{i % 50}"},
                    "inputs": [
                        {"namespace": DATASET_NAMESPACE, "name": CATALOGUED},
                        {"namespace": DATASET_NAMESPACE, "name": f"raw.events_{i % 20}"},
                    ],
                    "outputs": [{"namespace": DATASET_NAMESPACE, "name": f"marts.out_{i % 50}"}],
                    "producer": "https://github.com/OpenLineage/OpenLineage",
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
                },
                now=base,
            )
    pending = LineageEvent.objects.filter(state=LineageEvent.State.PENDING).count()
    wall, cpu = time.perf_counter(), time.process_time()
    processed = 0
    while True:
        summary = processing.lineage_events_process_due(max_batches=1000, max_seconds=600)
        processed += summary.by_state.get(LineageEvent.State.PROCESSED, 0)
        if not summary.more_due:
            break
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    connection.close()
    return {
        "events": pending,
        "processed": processed,
        "seconds": round(wall, 3),
        "rate": round(processed / wall, 1),
        "python_cpu_ms_per_event": round(cpu * 1000 / max(1, processed), 3),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_services(args.pg)
    databases = [args.db_name, f"{args.db_name}_watchdog"]
    recreate_databases(args.pg, databases)
    env = bench_env(args.pg, databases, args.broker_url)
    server = None
    try:
        migrate(env)
        os.environ.update(env)
        import django

        django.setup()
        token = seed()
        server = Server(
            env, workers=args.workers, worker_class=args.worker_class, threads=args.threads
        )
        server.start()
        meter = CpuMeter({"gunicorn": server.proc.pid}, databases)
        print(f"accept: {args.clients} clients, {args.rounds} rounds of {args.duration:g} s")
        runs = accept_runs(args, server, token, meter)
        server.stop()
        server = None
        print(f"process: {args.events} events in one process")
        processing = process_run(args.events)
        info = machine_info(
            args.pg,
            {"loadgen": wrk_version()},
            "wrk, gunicorn, PostgreSQL, Redis and the processing share the CPUs",
        )
    finally:
        if server is not None:
            server.stop()
        clear_doorbells(args.broker_url, extra=("lineage",))
        if not args.keep:
            from django.db import connections

            connections.close_all()
            drop_databases(args.pg, databases)

    best = {t: max(r["rate"] for r in runs if r["target"] == t) for t in ("floor", "accept")}
    ok_statuses = all(not any(n for k, n in r["status"].items() if k != "201") for r in runs)
    rows = [
        ("floor (baseline)", best["floor"], None, 1.0),
        ("accept", best["accept"], TARGET_ACCEPTED, best["accept"] / best["floor"]),
        (
            "process / worker",
            processing["rate"],
            TARGET_PROCESSED,
            processing["rate"] / best["floor"],
        ),
    ]
    print()
    print(f"{'measure':<18} {'events/s':>10} {'target':>8} {'vs target':>10} {'vs floor':>9}")
    for name, rate, target, ratio in rows:
        vs_target = f"{rate / target:.2f}x" if target else "-"
        print(f"{name:<18} {rate:>10.1f} {target or '-':>8} {vs_target:>10} {ratio:>8.2f}x")
    met = best["accept"] >= TARGET_ACCEPTED and processing["rate"] >= TARGET_PROCESSED
    print(f"targets {'met' if met else 'MISSED'}; all accept responses 201: {ok_statuses}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "targets": {
                    "accepted_per_s": TARGET_ACCEPTED,
                    "processed_per_s_per_worker": TARGET_PROCESSED,
                },
                "best": {**best, "process": processing["rate"]},
                "ratios": {
                    "accept_vs_floor": round(best["accept"] / best["floor"], 3),
                    "accept_vs_target": round(best["accept"] / TARGET_ACCEPTED, 3),
                    "process_vs_target": round(processing["rate"] / TARGET_PROCESSED, 3),
                },
                "targets_met": met,
                "config": {k: str(v) for k, v in vars(args).items()},
                "accept_runs": runs,
                "process": processing,
                "machine": info,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.output}")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
