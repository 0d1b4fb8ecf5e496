"""The embedded SQLite settings (WAL, ``BEGIN IMMEDIATE``, 20 s timeout) hold up under what
``make run`` puts on one file: several processes publishing at once while others read, with
no "database is locked" and nothing lost or doubled."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from .helpers import REPO_ROOT, embedded_env, wait_until

SETTINGS = "config.settings.test_embedded"
PER_WRITER = 150
DISTINCT_WRITERS = 3  # publish disjoint partitions; one more repeats writer 0's

SETUP = """
import django; django.setup()
from catalog.actors import Actor
from catalog.models import ApiKey
from catalog.services import datasets, subscriptions, teams
team = teams.team_create(slug="orders", name="Orders")
reader = teams.team_create(slug="analytics", name="Analytics")
dataset = datasets.dataset_register(
    actor=Actor(team=team, username="test"), namespace="s3://lake", name="raw/orders"
)
subscriptions.subscription_create(
    actor=Actor(team=reader, username="test"), dataset=dataset,
    endpoint_url="http://127.0.0.1:9/analytics",  # refused at once: the worker records retries
)
teams.api_key_create(team=team, name="writers", scopes=ApiKey.Scope.values)
"""

# argv: process name, role ("publish", "republish", "read" or "work"), first partition index, count
# (for a reader: the partitions to wait for), work dir.
PROCESS = """
import json, sys, time
from datetime import date, timedelta
from pathlib import Path
import django; django.setup()
from django.db import transaction
from django.utils import timezone
from catalog import selectors, tasks
from catalog.actors import Actor
from catalog.models import ApiKey, Dataset, Delivery, Partition, ReadinessEvent
from catalog.services import publishing

name, role, first, count, work = sys.argv[1:]
first, count, work = int(first), int(count), Path(work)
key = ApiKey.objects.select_related("team").get(name="writers")
actor = Actor(team=key.team, api_key=key)
dataset = Dataset.objects.get(name="raw/orders")
(work / f"{name}.ready").touch()
deadline = time.monotonic() + 60
while not (work / "go").exists():
    if time.monotonic() > deadline:
        sys.exit("no go signal within 60 s")
    time.sleep(0.005)

summary = {"errors": [], "status": {}, "started": time.time()}
if role in ("publish", "republish"):
    for i in range(first, first + count):
        partition = (date(2025, 1, 1) + timedelta(days=i)).isoformat()
        try:
            result = publishing.readiness_publish(
                actor=actor, namespace="s3://lake", name="raw/orders", partition=partition,
                idempotency_key=f"again-{partition}" if role == "republish" else None,
                now=timezone.now(),
            )
            code = str(result.status_code)
            summary["status"][code] = summary["status"].get(code, 0) + 1
        except Exception as exc:
            summary["errors"].append(f"{partition}: {type(exc).__name__}: {exc}")
else:
    seen, reads = [], 0
    while time.monotonic() < deadline:
        try:
            partitions = Partition.objects.filter(dataset=dataset).count()
            events = ReadinessEvent.objects.count()
            selectors.partition_latest_ready(dataset=dataset, now=timezone.now())
            if role == "work":
                tasks.deliver_due()  # the worker task: claims, sends, records retries
                with transaction.atomic():  # BEGIN IMMEDIATE: competes for the write lock
                    Delivery.objects.filter(state="pending").count()
            reads += 1
        except Exception as exc:
            summary["errors"].append(f"{type(exc).__name__}: {exc}")
            continue
        seen.append([partitions, events])
        if partitions >= count:
            break
    summary["reads"] = reads
    summary["seen"] = seen
summary["finished"] = time.time()
print(json.dumps(summary))
"""


def _run(args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"{args[:2]} failed\n{proc.stdout}\n{proc.stderr}"


def _counts(db_file: Path) -> dict[str, int]:
    tables = (
        "partition",
        "partitionrevision",
        "readinessevent",
        "notification",
        "delivery",
        "idempotencyrecord",
    )
    queries = {t: f"SELECT count(*) FROM catalog_{t}" for t in tables}  # noqa: S608
    with closing(sqlite3.connect(db_file)) as db:
        return {t: db.execute(sql).fetchone()[0] for t, sql in queries.items()}


def test_sqlite_concurrent_publishers_and_readers_never_lock(tmp_path):
    var_dir, work = tmp_path / "var", tmp_path / "work"
    work.mkdir()
    env = embedded_env(var_dir, DJANGO_SETTINGS_MODULE=SETTINGS, TIDEMARK_LOG_LEVEL="ERROR")
    _run(["manage.py", "migrate", "--noinput", "-v", "0"], env)
    _run(["manage.py", "migrate", "--database", "watchdog", "--noinput", "-v", "0"], env)
    _run(["-c", SETUP], env)
    total = DISTINCT_WRITERS * PER_WRITER
    roles = [("publish", w * PER_WRITER, PER_WRITER) for w in range(DISTINCT_WRITERS)]
    # A reader only reads (WAL: never blocked); a worker also delivers and takes the write
    # lock, which it may wait for while the four writers hold it in turn.
    roles += [("republish", 0, PER_WRITER), ("read", 0, total), ("work", 0, total)]
    procs = []
    try:
        for n, (role, first, count) in enumerate(roles):
            args = [f"p{n}", role, str(first), str(count), str(work)]
            with open(work / f"p{n}.out", "w") as out, open(work / f"p{n}.err", "w") as err:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", PROCESS, *args],
                        cwd=REPO_ROOT,
                        env=env,
                        stdout=out,
                        stderr=err,
                    )
                )
        wait_until(
            lambda: (
                len(list(work.glob("*.ready"))) == len(procs)
                or any(p.poll() is not None for p in procs)
            ),
            60,
            "every process to set up Django",
        )
        (work / "go").touch()
        for p in procs:
            p.wait(timeout=120)
    finally:
        for p in procs:
            p.kill()

    outputs = [(work / f"p{n}.out").read_text() for n in range(len(procs))]
    report = "\n".join(
        f"p{n} {roles[n]}: rc={p.returncode}\n{outputs[n]}\n{(work / f'p{n}.err').read_text()}"
        for n, p in enumerate(procs)
    )
    assert all(p.returncode == 0 for p in procs), report
    assert "database is locked" not in report
    summaries = [json.loads(out) for out in outputs]
    assert [s["errors"] for s in summaries] == [[]] * len(procs), report
    # They really ran at the same time, and the readers saw writes in progress.
    assert max(s["started"] for s in summaries) < min(s["finished"] for s in summaries[:4]), report
    seen = [pair for s in summaries[4:] for pair in s["seen"]]
    assert any(0 < partitions < total for partitions, _ in seen), report
    for s in summaries[4:]:
        for column in zip(*s["seen"], strict=True):
            assert list(column) == sorted(column), "a reader saw a count go backwards"
        assert s["seen"][-1] == [total, total], report
    # Disjoint partitions are all new; each repeated one is new for exactly one of the two.
    created = sum(s["status"].get("201", 0) for s in summaries[:4])
    unchanged = sum(s["status"].get("200", 0) for s in summaries[:4])
    assert (created, unchanged) == (total, PER_WRITER), report
    assert _counts(var_dir / "catalog.sqlite3") == {
        "partition": total,
        "partitionrevision": total,
        "readinessevent": total,
        "notification": total,
        "delivery": total,
        "idempotencyrecord": PER_WRITER,
    }
