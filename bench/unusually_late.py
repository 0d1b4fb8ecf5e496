"""What a later-than-usual pass costs: idle, with many datasets none of which is due, and
with a full batch of due datasets that each have a month of history.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tidemark_bench_unusual \\
        .venv/bin/python bench/unusually_late.py --datasets 100000 --due 200

DATABASE_URL must name an empty database (it is migrated). Datasets and history are
seeded with SQL (``generate_series``); prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

NOW = datetime(2026, 11, 2, 6, tzinfo=UTC)  # a Monday, 06:00


def seed(datasets: int, due: int) -> None:
    from django.db import connection

    from catalog.models import Team

    team = Team.objects.create(slug="bench", name="Bench", contact_email="b@example.com").pk
    with connection.cursor() as cursor:
        # Every dataset watched; all but ``due`` checked next month.
        cursor.execute(
            """
            INSERT INTO catalog_dataset (namespace, name, owner_id, description, criticality,
              partitioning, partition_timezone, completion_signal, success_marker,
              manifest_name, storage_source, location_template, accepts_future_partitions,
              sla_cron, sla_timezone, sla_grace_seconds, unusual_check_key,
              next_unusual_check_at, change_notice_days, lifecycle, badge_token,
              created_at, updated_at)
            SELECT 's3://bench', 'raw/t' || n, %s, '', 'medium', 'daily', 'UTC', 'event',
              '_SUCCESS', '_manifest.json', '', '', false, '', 'UTC', 0,
              CASE WHEN n <= %s THEN '2026-11-01' ELSE '' END,
              CASE WHEN n <= %s THEN %s::timestamptz - interval '1 minute'
                   ELSE %s::timestamptz + interval '30 days' END,
              14, 'active', 'bench-' || n, now(), now()
            FROM generate_series(1, %s) AS n
            """,
            [team, due, due, NOW, NOW, datasets],
        )
        # 35 days of history for the due ones, each ready at 05:00 after its day.
        cursor.execute(
            """
            INSERT INTO catalog_partition (key, start_at, end_at, created_at, updated_at,
              dataset_id)
            SELECT to_char(day, 'YYYY-MM-DD'), day, day + interval '1 day', now(), now(), d.id
            FROM catalog_dataset d,
              generate_series(%s::timestamptz - interval '36 days',
                              %s::timestamptz - interval '2 days', interval '1 day') AS day
            WHERE d.unusual_check_key <> ''
            """,
            [NOW.replace(hour=0), NOW.replace(hour=0)],
        )
        cursor.execute(
            """
            INSERT INTO catalog_partitionrevision (version, state, metadata, code_version,
              detected_by, ready_at, created_at, partition_id)
            SELECT '', 'ready', '{}', '', 'event', p.end_at + interval '5 hours', now(), p.id
            FROM catalog_partition p
            """
        )
        cursor.execute(
            "UPDATE catalog_partition p SET current_revision_id = r.id "
            "FROM catalog_partitionrevision r WHERE r.partition_id = p.id"
        )
        cursor.execute("ANALYZE")


def timed(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=200)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from catalog import unusually_late

    call_command("migrate", verbosity=0)
    seed(args.datasets, args.due)
    idle_before = timed(lambda: unusually_late.check_batch(now=NOW.replace(hour=0)), 20)
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        result = unusually_late.check_batch(now=NOW, limit=args.due)
        due_ms = (time.perf_counter() - started) * 1000
    by_kind: dict[str, float] = {}
    for query in queries.captured_queries:
        kind = " ".join(query["sql"].split()[:4])[:60]
        by_kind[kind] = by_kind.get(kind, 0.0) + float(query["time"]) * 1000
    slowest = sorted(by_kind.items(), key=lambda kv: -kv[1])[:5]
    print(
        json.dumps(
            {
                "datasets": args.datasets,
                "idle_batch_ms_median": round(statistics.median(idle_before), 2),
                "due_datasets": result.checked,
                "told": len(result.told),
                "due_batch_ms": round(due_ms, 1),
                "due_batch_queries": len(queries.captured_queries),
                "ms_per_due_dataset": round(due_ms / max(result.checked, 1), 2),
                "slowest_statements_ms": {k: round(v, 1) for k, v in slowest},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
