"""Poll benchmark: what the fallback poll costs in List requests, against a counting store.

Run from the repository root::

    .venv/bin/python bench/poll.py

It creates fresh PostgreSQL databases (``tmbench_poll`` and ``tmbench_poll_wd``), migrates
them and drives the real poll code in this process: ``polling.sweep_due`` (the beat's
every-minute pass, with ``boot_at`` after a restart) and ``publishing.readiness_publish`` for
readiness events, in simulated time (``now=`` everywhere, ``time_machine`` frozen at the
same instant for what reads the clock). Storage is an in-memory S3 stand-in
(``FakeS3.call_s3("list_objects_v2", ...)`` honouring Prefix, Delimiter, MaxKeys,
StartAfter and ContinuationToken) that counts every request; ``catalog.objectstore.Lister`` is
replaced, in this process only, by a subclass that lists it. Nothing in ``catalog`` is
changed.

Part 1, one simulated day (1,440 one-minute ticks): 2,000 daily datasets with a success
marker, partition ``2026-11-28`` landing at a uniformly random minute (seeded), 70% of them
also publishing a readiness event one minute after arrival; Tidemark is down from minute
700 to 900 (events due then are lost, no sweep runs) and the restart at 900 passes
``boot_at``. Each at Tidemark's default cadence and at the published design's (adaptive
from 1 minute backing off to 64, hourly safety net). Two layouts: all 2,000 under one
parent prefix (one storage group), and poll-only vs event datasets under two parents (two
groups). Per layout: ListObjectsV2
requests, events, their sum against the reference (1,859) and the naive per-prefix check
(2,000 x 1,440), arrivals missed at the end of the day, outage arrivals caught by the
restart sweep (reference: 266), detection latency, and the sweeps by kind (group, flat or
delimiter, full, with the recent-marker pass: sweeps and pages). An arrival missed at the
end of the day that landed after its group's last sweep, the next one due after the last
tick's pass could sweep it (``polling.DUE_SLACK`` after minute 1439), is counted as not
yet due (it still fails the last-minute check, and the summary says so). Each miss is
printed with its group's last sweep, next due sweep and interval, and a miss after which
a sweep of its group ran (that sweep failed to see it) is counted apart, never excused.

Part 2, one group of 100,000 partition prefixes (100 poll-only daily datasets x 1,000
days, 99,990 known ready, 10 with a marker but not recorded): a full sweep (pages,
listings inside, objects, wall time), a regular sweep of every dataset a minute later (as
due hourly), a narrow one a minute after that (nothing due), one the next day (every
dataset due, 10 with a new day landed; a sweep of every dataset), a narrow one a minute
later (the 90 still waiting) and a recovery sweep (as after downtime). Twice:
with the dataset name first in the segment (``t042_2026-11-28``) and with the date first
(``2026-11-28_t042``).

The stand-in store gives no ETag or modification time, so the hourly pass over recent
markers (``catalog.rewritten_markers``) reads what it would and records nothing: its cost
is in the counts (the sweeps that made it are counted in part 1 and marked ``+pass`` in
part 2).

It prints a table, writes ``bench/results/poll.json`` and drops the bench databases at the
end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import json
import os
import random
import statistics
import sys
import time
from bisect import bisect_left, bisect_right, insort
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    ROOT,
    bench_env,
    check_services,
    clear_doorbells,
    drop_databases,
    machine_info,
    migrate,
    percentile,
    recreate_databases,
)

BUCKET = "tidemark-bench-lake"
SOURCE = "lake"
NAMESPACE = "s3://tidemark-bench-lake"
DAY = datetime(2026, 11, 29, tzinfo=UTC)  # the simulated day, 00:00 UTC
KEY = "2026-11-28"  # the daily partition landing during it
MINUTES = 1440
REFERENCE = {"total": 1859, "restart_caught": 266, "poll_only_worst_min": 197}
# Tidemark's cadence as configured, and the published design's: adaptive poll-only sweeps
# from one minute backing off to 64 minutes, an hourly safety net (TIDEMARK_POLL overrides).
CADENCES = {
    "default": {},
    "published": {
        "min_interval_seconds": 60,
        "max_interval_seconds": 64 * 60,
        "safety_net_seconds": 3600,
        "page_interval_seconds": 180,
    },
}
MARKER = "_SUCCESS"
DATA_FILE = "part-00000.parquet"
DATA_SIZE = 64 * 1024 * 1024


# --- the store ----------------------------------------------------------------------------


class FakeS3:
    """An in-memory S3 bucket set with the one call the poll makes, counting requests.

    ``call_s3("list_objects_v2", ...)`` follows S3: keys in UTF-8 binary order, ``Prefix``,
    ``Delimiter`` (common prefixes count towards ``MaxKeys`` like keys), ``StartAfter``
    (keys strictly after it; ignored with a ``ContinuationToken``), opaque continuation
    tokens, ``IsTruncated``/``KeyCount``; ``Contents``/``CommonPrefixes`` omitted when empty.
    ``cat_file`` serves stored bodies (manifests).
    """

    def __init__(self) -> None:
        self._keys: dict[str, list[str]] = defaultdict(list)
        self._sizes: dict[str, int] = {}
        self._bodies: dict[str, bytes] = {}
        self.reset_counts()

    def reset_counts(self) -> None:
        self.requests = self.delimiter_requests = self.plain_requests = 0
        self.entries_returned = self.start_after_used = 0
        self.seconds = 0.0
        self.last_start_after: str | None = None

    def counts(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prefix_pages": self.delimiter_requests,
            "inner_pages": self.plain_requests,
            "entries": self.entries_returned,
            "start_after": self.start_after_used,
            "seconds": self.seconds,
        }

    def put(self, path: str, size: int = 0, body: bytes | None = None) -> None:
        bucket, _, key = path.partition("/")
        if path not in self._sizes:
            insort(self._keys[bucket], key)
        self._sizes[path] = size
        if body is not None:
            self._bodies[path] = body

    def put_many(self, bucket: str, items: list[tuple[str, int]]) -> None:
        keys = self._keys[bucket]
        for key, size in items:
            path = f"{bucket}/{key}"
            if path not in self._sizes:
                keys.append(key)
            self._sizes[path] = size
        keys.sort()

    def cat_file(self, path: str) -> bytes:
        if path not in self._bodies:
            raise FileNotFoundError(path)
        return self._bodies[path]

    def call_s3(self, method: str, **params: Any) -> dict[str, Any]:
        if method != "list_objects_v2":
            raise NotImplementedError(method)
        started = time.perf_counter()
        try:
            return self._list_objects_v2(**params)
        finally:
            self.seconds += time.perf_counter() - started

    def _list_objects_v2(
        self,
        Bucket: str,
        Prefix: str = "",
        Delimiter: str | None = None,
        MaxKeys: int = 1000,
        StartAfter: str | None = None,
        ContinuationToken: str | None = None,
    ) -> dict[str, Any]:
        if Bucket not in self._keys:
            raise FileNotFoundError(f"NoSuchBucket: {Bucket}")
        self.requests += 1
        if Delimiter:
            self.delimiter_requests += 1
        else:
            self.plain_requests += 1
        keys = self._keys[Bucket]
        if ContinuationToken is not None:
            i = bisect_left(keys, base64.urlsafe_b64decode(ContinuationToken).decode())
        else:
            i = bisect_left(keys, Prefix)
            if StartAfter is not None:
                self.start_after_used += 1
                self.last_start_after = StartAfter
                i = max(i, bisect_right(keys, StartAfter))
        contents: list[dict[str, Any]] = []
        prefixes: list[dict[str, str]] = []
        limit = min(MaxKeys, 1000)
        while i < len(keys) and len(contents) + len(prefixes) < limit:
            key = keys[i]
            if not key.startswith(Prefix):
                break
            if Delimiter:
                cut = key.find(Delimiter, len(Prefix))
                if cut >= 0:
                    common = key[: cut + len(Delimiter)]
                    prefixes.append({"Prefix": common})
                    # Skip every key under this common prefix: [common, successor).
                    successor = common[:-1] + chr(ord(common[-1]) + 1)
                    i = bisect_left(keys, successor, i)
                    continue
            contents.append({"Key": key, "Size": self._sizes[f"{Bucket}/{key}"]})
            i += 1
        truncated = i < len(keys) and keys[i].startswith(Prefix)
        self.entries_returned += len(contents) + len(prefixes)
        page: dict[str, Any] = {
            "Name": Bucket,
            "Prefix": Prefix,
            "MaxKeys": MaxKeys,
            "KeyCount": len(contents) + len(prefixes),
            "IsTruncated": truncated,
        }
        if Delimiter:
            page["Delimiter"] = Delimiter
        if contents:
            page["Contents"] = contents
        if prefixes:
            page["CommonPrefixes"] = prefixes
        if truncated:
            page["NextContinuationToken"] = base64.urlsafe_b64encode(keys[i].encode()).decode()
        if StartAfter is not None and ContinuationToken is None:
            page["StartAfter"] = StartAfter
        return page


STORE = FakeS3()


def install_lister() -> None:
    """Make every ``objectstore.Lister`` the poll builds list ``STORE`` (this process only)."""
    import objectstore

    original = objectstore.Lister
    if getattr(original, "bench_fake", False):
        return

    class BenchLister(original):
        bench_fake = True

        def __init__(self, source, *, fs=None):
            super().__init__(source, fs=fs if fs is not None else STORE)

    objectstore.Lister = BenchLister


def partition_objects(prefix: str) -> list[tuple[str, int]]:
    """What one landed partition holds: a data file and the success marker."""
    return [(f"{prefix}{DATA_FILE}", DATA_SIZE), (f"{prefix}{MARKER}", 0)]


# --- arguments ------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=20261129, help="RNG seed (20261129)")
    p.add_argument("--prefixes", type=int, default=2000, help="datasets/prefixes (2000)")
    p.add_argument(
        "--event-share", type=float, default=0.7, help="share that publishes events (0.7)"
    )
    p.add_argument("--outage", default="700-900", help="outage minutes START-END (700-900)")
    p.add_argument(
        "--history-days",
        type=int,
        default=1,
        help="also land N earlier days of every dataset, known ready, published by event "
        "for the event share (1: yesterday, as any running dataset has; 0: none)",
    )
    p.add_argument(
        "--layouts",
        default="one-group,split",
        help="comma-separated: one-group, split (both)",
    )
    p.add_argument(
        "--cadences",
        default="default,published",
        help="comma-separated: default (Tidemark's settings), published (1 to 64 min, hourly "
        "safety net); both",
    )
    p.add_argument("--skip-part2", action="store_true", help="skip the 100,000-prefix sweeps")
    p.add_argument("--big-datasets", type=int, default=100, help="part 2 datasets (100)")
    p.add_argument("--big-days", type=int, default=1000, help="part 2 days per dataset (1000)")
    p.add_argument("--big-unrecorded", type=int, default=10, help="part 2 not-yet-ready (10)")
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server")
    p.add_argument("--db-name", default="tmbench_poll")
    p.add_argument("--broker-url", default="redis://127.0.0.1:6379/13", help="CELERY_BROKER_URL")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "poll.json")
    p.add_argument("--keep", action="store_true", help="keep the bench databases at the end")
    args = p.parse_args(argv)
    start, _, end = args.outage.partition("-")
    args.outage_start, args.outage_end = int(start), int(end)
    if not 0 <= args.outage_start <= args.outage_end < MINUTES:
        p.error("--outage must be START-END within the day")
    if not args.db_name.isidentifier() or not args.db_name.islower():
        p.error("--db-name must be a lower-case identifier")
    args.layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    if set(args.layouts) - {"one-group", "split"}:
        p.error("--layouts takes one-group and/or split")
    args.cadences = [x.strip() for x in args.cadences.split(",") if x.strip()]
    if not args.cadences or set(args.cadences) - set(CADENCES):
        p.error("--cadences takes default and/or published")
    return args


# --- database helpers -----------------------------------------------------------------------


def reset_catalog() -> None:
    """Empty the catalog's tables (a fresh start per run, without migrating again)."""
    from django.core.management import call_command

    call_command("flush", interactive=False, database="default", verbosity=0)


class QueryCounter:
    """Counts statements on the default connection while installed."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


def seed_ready(rows: list[tuple[int, str, str, str, datetime]]) -> None:
    """Record ``(dataset id, partitioning, key, detected_by, ready_at)`` partitions as
    ready in bulk: partitions, revisions, then each partition's current revision."""
    from django.db import connection, transaction

    from catalog.models import Partition, PartitionRevision, ReadinessEvent
    from schedules.periods import parse_partition_key

    with transaction.atomic():
        for start in range(0, len(rows), 20_000):
            chunk = rows[start : start + 20_000]
            parts = []
            for dataset_id, partitioning, key, _, _ in chunk:
                interval = parse_partition_key(partitioning, key, "UTC")
                parts.append(
                    Partition(
                        dataset_id=dataset_id, key=key, start_at=interval.start, end_at=interval.end
                    )
                )
            parts = Partition.objects.bulk_create(parts, batch_size=5000)
            revisions = PartitionRevision.objects.bulk_create(
                [
                    PartitionRevision(
                        partition_id=part.pk,
                        version="",
                        state=PartitionRevision.State.READY,
                        detected_by=detected_by,
                        ready_at=ready_at,
                        metadata={},
                    )
                    for part, (_, _, _, detected_by, ready_at) in zip(parts, chunk, strict=True)
                ],
                batch_size=5000,
            )
            # What a producer that publishes events leaves behind: its readiness events
            # (how the poll tells missed events and safety-net groups apart).
            ReadinessEvent.objects.bulk_create(
                [
                    ReadinessEvent(
                        dataset_id=dataset_id,
                        partition_id=part.pk,
                        revision_id=part.current_revision_id or revision.pk,
                        state=PartitionRevision.State.READY,
                        source=ReadinessEvent.Source.API,
                    )
                    for part, revision, (dataset_id, _, _, detected_by, _) in zip(
                        parts, revisions, chunk, strict=True
                    )
                    if detected_by == "event"
                ],
                batch_size=5000,
            )
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {Partition._meta.db_table} p SET current_revision_id = r.id "  # noqa: S608
                f"FROM {PartitionRevision._meta.db_table} r "
                "WHERE r.partition_id = p.id AND p.current_revision_id IS NULL"
            )
            cursor.execute(f"ANALYZE {Partition._meta.db_table}")
            cursor.execute(f"ANALYZE {PartitionRevision._meta.db_table}")


def register_datasets(team, specs: list[tuple[str, str]], *, at: datetime) -> dict[str, Any]:
    """Register ``(name, location template)`` daily success-marker datasets through the
    real service (which creates and attaches the storage groups)."""
    import time_machine

    from catalog.actors import Actor
    from catalog.services import datasets as dataset_services

    actor = Actor(team=team)
    out = {}
    with time_machine.travel(at, tick=False):
        for name, template in specs:
            out[name] = dataset_services.dataset_register(
                actor=actor,
                namespace=NAMESPACE,
                name=name,
                partitioning="daily",
                completion_signal="success_marker",
                storage_source=SOURCE,
                location_template=template,
            )
    return out


# --- part 1: one simulated day ----------------------------------------------------------------


def scenario(args: argparse.Namespace) -> dict[str, Any]:
    """Who publishes events and when each partition lands (shared by the layouts)."""
    rng = random.Random(args.seed)
    n = args.prefixes
    names = [f"t{i:04d}" for i in range(n)]
    events = set(rng.sample(names, round(n * args.event_share)))
    arrival = {name: int(rng.random() * MINUTES) for name in names}
    return {"names": names, "events": events, "arrival": arrival}


def layout_template(layout: str, name: str, publishes: bool) -> str:
    if layout == "one-group":
        return f"landing/{name}_{{partition}}/"
    return f"{'landing-events' if publishes else 'landing-poll'}/{name}_{{partition}}/"


def run_day(args: argparse.Namespace, layout: str, sc: dict[str, Any]) -> dict[str, Any]:
    """Simulate the day for one layout; returns its figures."""
    import time_machine
    from django.db import connection

    from catalog import polling
    from catalog.actors import Actor
    from catalog.models import Dataset, Partition, StorageGroup, StorageSweep
    from catalog.services import publishing, teams

    global STORE
    STORE = FakeS3()
    STORE.put_many(BUCKET, [])
    reset_catalog()
    team = teams.team_create(slug="bench-producer", name="Bench producer")
    actor = Actor(team=team)
    names, events, arrival = sc["names"], sc["events"], sc["arrival"]
    started = time.perf_counter()
    datasets = register_datasets(
        team,
        [(n, layout_template(layout, n, n in events)) for n in names],
        at=DAY - timedelta(minutes=10),
    )
    history = []
    if args.history_days:
        store_items = []
        for name in names:
            for back in range(1, args.history_days + 1):
                key = (date.fromisoformat(KEY) - timedelta(days=back)).isoformat()
                prefix = layout_template(layout, name, name in events).replace("{partition}", key)
                store_items.extend(partition_objects(prefix))
                detected = "event" if name in events else "poll"
                history.append(
                    (datasets[name].pk, "daily", key, detected, DAY - timedelta(days=back))
                )
        STORE.put_many(BUCKET, store_items)
        seed_ready(history)
    setup_seconds = time.perf_counter() - started

    arrivals_at: dict[int, list[str]] = defaultdict(list)
    for name, minute in arrival.items():
        arrivals_at[minute].append(name)
    events_due: dict[int, list[str]] = defaultdict(list)
    for name in events:
        events_due[arrival[name] + 1].append(name)

    queries = QueryCounter()
    sweeps: list[dict[str, Any]] = []
    event_log = {"processed": 0, "lost": 0, "status": Counter(), "seconds": 0.0, "queries": 0}
    sweep_seconds = 0.0
    sweep_queries = 0

    def do_sweeps(now: datetime, minute: int, boot_at: datetime | None) -> None:
        nonlocal sweep_seconds, sweep_queries
        before_q, before_t = queries.count, time.perf_counter()
        reports = polling.sweep_due(now=now, boot_at=boot_at)
        sweep_seconds += time.perf_counter() - before_t
        sweep_queries += queries.count - before_q
        for r in reports:
            sweeps.append(
                {
                    "minute": minute,
                    "group": r.group,
                    "full": r.full,
                    "listing": str(r.listing),
                    "list_calls": r.list_calls,
                    "pages": r.pages,
                    "objects": r.objects_seen,
                    "checked": r.partitions_checked,
                    "found": r.partitions_found,
                    "missed_events": r.missed_events,
                    "recent_pass": r.recent_pass,
                    "error": r.error,
                    "ms": r.duration_ms,
                }
            )

    with connection.execute_wrapper(queries), time_machine.travel(DAY, tick=False) as clock:
        # One sweep before the day, so every group has a completed sweep to back off from.
        pre = DAY - timedelta(minutes=1)
        clock.move_to(pre)
        do_sweeps(pre, -1, None)
        pre_day = {"sweeps": list(sweeps), "store": STORE.counts()}
        sweeps.clear()
        STORE.reset_counts()
        sweep_seconds, sweep_queries = 0.0, 0

        day_started = time.perf_counter()
        for minute in range(MINUTES):
            if minute and minute % 240 == 0:
                print(
                    f"  minute {minute}: {len(sweeps)} sweeps, {STORE.requests} requests, "
                    f"{event_log['processed']} events, {time.perf_counter() - day_started:.0f} s",
                    flush=True,
                )
            now = DAY + timedelta(minutes=minute)
            clock.move_to(now)
            down = args.outage_start <= minute < args.outage_end
            if down:
                event_log["lost"] += len(events_due.get(minute, ()))
            else:
                before_q, before_t = queries.count, time.perf_counter()
                for name in events_due.get(minute, ()):
                    result = publishing.readiness_publish(
                        actor=actor, namespace=NAMESPACE, name=name, partition=KEY, now=now
                    )
                    event_log["processed"] += 1
                    event_log["status"][result.status_code] += 1
                event_log["seconds"] += time.perf_counter() - before_t
                event_log["queries"] += queries.count - before_q
                boot = now if minute == args.outage_end and args.outage_end > 0 else None
                do_sweeps(now, minute, boot)
            # What lands during this minute is in the store from the next tick on.
            for name in arrivals_at.get(minute, ()):
                prefix = layout_template(layout, name, name in events).replace("{partition}", KEY)
                for path, size in partition_objects(prefix):
                    STORE.put(f"{BUCKET}/{path}", size)
        day_seconds = time.perf_counter() - day_started
    event_log["pending_at_end"] = len(events_due.get(MINUTES, ()))

    # Outcome, read back from the database.
    rows = Partition.objects.filter(key=KEY, dataset__name__in=names).values_list(
        "dataset__name",
        "current_revision__state",
        "current_revision__ready_at",
        "current_revision__detected_by",
    )
    ready = {n: (at, by) for n, state, at, by in rows if state == "ready"}
    restart_at = DAY + timedelta(minutes=args.outage_end)
    latencies, poll_only_lat, event_ds_lat = [], [], []
    by_detector = Counter()
    restart_caught, restart_caught_window = 0, 0
    for name in names:
        if name not in ready:
            continue
        at, by = ready[name]
        lat = (at - (DAY + timedelta(minutes=arrival[name]))).total_seconds() / 60
        latencies.append(lat)
        (event_ds_lat if name in events else poll_only_lat).append(lat)
        by_detector[f"{'event' if name in events else 'poll-only'} dataset, by {by}"] += 1
        if by == "poll" and at == restart_at:
            restart_caught += 1
            if args.outage_start <= arrival[name] < args.outage_end:
                restart_caught_window += 1
    missed = sorted((arrival[n], n) for n in names if n not in ready)
    window = [n for n in names if args.outage_start <= arrival[n] < args.outage_end]

    store = STORE.counts()
    pages = sum(s["pages"] for s in sweeps)
    total = pages + event_log["processed"]
    groups = {}
    for g in StorageGroup.objects.order_by("prefix"):
        mine = [s for s in sweeps if s["group"] == str(g)]
        groups[str(g)] = {
            "datasets": g.datasets.count(),
            "mode_at_end": g.mode,
            "interval_at_end_s": g.interval_seconds,
            "next_sweep_minute": (
                round((g.next_sweep_at - DAY).total_seconds() / 60, 2) if g.next_sweep_at else None
            ),
            "last_sweep_minute": max((s["minute"] for s in mine), default=None),
            "sweeps": len(mine),
            "full_sweeps": sum(s["full"] for s in mine),
            "flat_sweeps": sum(s["listing"] == "flat" for s in mine),
            "sweeps_that_found": sum(1 for s in mine if s["found"]),
            "pages": sum(s["pages"] for s in mine),
            "list_calls": sum(s["list_calls"] for s in mine),
            "found": sum(s["found"] for s in mine),
            "missed_events_flagged": sum(s["missed_events"] for s in mine),
            "interval_histogram_min": dict(
                sorted(
                    Counter(b["minute"] - a["minute"] for a, b in itertools.pairwise(mine)).items()
                )
            ),
        }
    # A miss is "not yet due" when it landed at or after its group's last sweep of the day
    # and that group's next sweep is scheduled after the day: the cadence had not come
    # round yet, which is a later find, not a lost one.
    group_name = {g.pk: str(g) for g in StorageGroup.objects.all()}
    group_of = {
        n: group_name.get(g)
        for n, g in Dataset.objects.filter(name__in=names).values_list("name", "poll_group_id")
    }
    last_tick_reach = MINUTES - 1 + polling.DUE_SLACK.total_seconds() / 60
    not_yet_due = [
        (m, n)
        for m, n in missed
        if (g := groups.get(group_of[n]))
        and (g["last_sweep_minute"] is None or m >= g["last_sweep_minute"])
        # Due at no tick left: after the last one and its slack (a sweep may be due
        # between ticks; a pass sweeps what falls due within DUE_SLACK of it).
        and (g["next_sweep_minute"] is None or g["next_sweep_minute"] > last_tick_reach)
    ]
    # Each miss, with whether a sweep of its group ran after it landed (then that sweep
    # failed to see it: a real miss, never excused) and when its group was due next (after
    # the last tick and within the group's interval: the cadence had not come round).
    sweep_minutes: dict[str, list[int]] = defaultdict(list)
    for s in sweeps:
        sweep_minutes[s["group"]].append(s["minute"])
    miss_detail = []
    for m, n in missed:
        g = groups.get(group_of[n]) or {}
        miss_detail.append(
            {
                "minute": m,
                "dataset": n,
                "group": group_of[n],
                "sweeps_after": sum(1 for x in sweep_minutes.get(group_of[n], ()) if x > m),
                "last_sweep_minute": g.get("last_sweep_minute"),
                "next_sweep_minute": g.get("next_sweep_minute"),
                "interval_min": round(g.get("interval_at_end_s", 0) / 60, 2),
            }
        )
    breakdown: dict[str, dict[str, int]] = {}
    for s in sweeps:
        kind = f"{s['group']}: {'full ' if s['full'] else ''}{s['listing']}"
        kind += " +pass" if s["recent_pass"] else ""
        row = breakdown.setdefault(kind, {"sweeps": 0, "pages": 0, "list_calls": 0})
        row["sweeps"] += 1
        row["pages"] += s["pages"]
        row["list_calls"] += s["list_calls"]
    sorted_lat = sorted(latencies)
    sorted_poll = sorted(poll_only_lat)
    return {
        "layout": layout,
        "groups": groups,
        "setup_seconds": round(setup_seconds, 1),
        "day_wall_seconds": round(day_seconds, 1),
        "sweep_seconds": round(sweep_seconds, 1),
        "sweep_queries": sweep_queries,
        "sweeps": len(sweeps),
        "list_requests": pages,
        "list_calls_logical": sum(s["list_calls"] for s in sweeps),
        "store_counts": store,
        "store_matches_lister": store["requests"] == pages,
        "prefix_pages": store["prefix_pages"],
        "inner_listings": store["inner_pages"],
        "events_processed": event_log["processed"],
        "events_lost_in_outage": event_log["lost"],
        "events_pending_at_end": event_log["pending_at_end"],
        "event_status": dict(event_log["status"]),
        "event_seconds": round(event_log["seconds"], 1),
        "event_queries": event_log["queries"],
        "total_calls": total,
        "found_by_poll": sum(s["found"] for s in sweeps),
        "flat_sweeps": sum(s["listing"] == "flat" for s in sweeps),
        "recent_passes": sum(s["recent_pass"] for s in sweeps),
        "design_floor": event_log["processed"] + sum(s["found"] for s in sweeps),
        "vs_reference": round(total / REFERENCE["total"], 3),
        "vs_naive": round(total / (args.prefixes * MINUTES), 6),
        "naive_checks": args.prefixes * MINUTES,
        "ready": len(ready),
        "missed_at_end": len(missed),
        "missed_arrival_minutes": Counter(m for m, _ in missed),
        # The target's words: nothing missed but arrivals in the last simulated minute
        # (1439: they land after that minute's sweep, and no tick follows to see them).
        "missed_last_minute_only": all(m == MINUTES - 1 for m, _ in missed),
        "missed_before_last_minute": sorted(m for m, _ in missed if m != MINUTES - 1),
        "missed_not_yet_due": len(not_yet_due),
        "missed_not_yet_due_minutes": Counter(m for m, _ in not_yet_due),
        "missed_only_not_yet_due": len(not_yet_due) == len(missed),
        "missed_after_a_sweep": sum(1 for d in miss_detail if d["sweeps_after"]),
        "missed_detail": miss_detail,
        "sweep_breakdown": breakdown,
        "outage_window_arrivals": len(window),
        # What only the restart sweep can catch: the outage's arrivals, but those whose
        # event is due at the restart minute (processed before the sweep).
        "outage_window_arrivals_poll_needed": sum(
            1 for n in window if not (n in events and arrival[n] + 1 >= args.outage_end)
        ),
        "restart_sweep_found": restart_caught,
        "restart_caught_outage_arrivals": restart_caught_window,
        "detected": dict(by_detector),
        "latency_min": {
            "mean": round(statistics.fmean(sorted_lat), 2) if sorted_lat else None,
            "p50": percentile(sorted_lat, 50),
            "p95": percentile(sorted_lat, 95),
            "worst": sorted_lat[-1] if sorted_lat else None,
        },
        "latency_poll_only_min": {
            "mean": round(statistics.fmean(sorted_poll), 2) if sorted_poll else None,
            "p95": percentile(sorted_poll, 95),
            "worst": sorted_poll[-1] if sorted_poll else None,
        },
        "latency_poll_only_outside_outage_min": _outside_outage(
            args, names, events, arrival, ready
        ),
        "pre_day": pre_day,
        "stored_sweeps": StorageSweep.objects.count(),
        "sweep_log": sweeps,
    }


def _outside_outage(args, names, events, arrival, ready) -> dict[str, Any]:
    """Poll-only latency for arrivals the outage did not touch (landed after the restart,
    or detected before it began)."""
    lat = []
    outage_start = DAY + timedelta(minutes=args.outage_start)
    for name in names:
        if name in events or name not in ready:
            continue
        at, _ = ready[name]
        landed = DAY + timedelta(minutes=arrival[name])
        if arrival[name] >= args.outage_end or at <= outage_start:
            lat.append((at - landed).total_seconds() / 60)
    lat.sort()
    return {
        "count": len(lat),
        "mean": round(statistics.fmean(lat), 2) if lat else None,
        "p95": percentile(lat, 95),
        "worst": lat[-1] if lat else None,
    }


# --- part 2: a group of 100,000 partition prefixes ----------------------------------------------


def run_big(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Full then regular sweep of one group of ``datasets x days`` partition prefixes, for
    two segment namings."""
    import time_machine
    from django.conf import settings

    import objectstore
    from catalog import polling, storage
    from catalog.models import StorageGroup
    from catalog.services import teams

    global STORE
    STORE = FakeS3()
    reset_catalog()
    team = teams.team_create(slug="bench-history", name="Bench history")
    now = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    last = date.fromisoformat(KEY)
    keys = [(last - timedelta(days=d)).isoformat() for d in range(args.big_days - 1, -1, -1)]
    namings = {
        "dataset-first": ("hist-a/", "{name}_{{partition}}/"),
        "date-first": ("hist-b/", "{{partition}}_{name}/"),
    }
    results = []
    for naming, (parent, pattern) in namings.items():
        started = time.perf_counter()
        specs = [
            (f"{parent.rstrip('/')}-t{i:03d}", parent + pattern.format(name=f"t{i:03d}"))
            for i in range(args.big_datasets)
        ]
        datasets = register_datasets(team, specs, at=now - timedelta(days=1))
        items, ready_rows = [], []
        unrecorded = set()
        for index, (name, template) in enumerate(specs):
            ds = datasets[name]
            for key in keys:
                items.extend(partition_objects(template.replace("{partition}", key)))
                if key == keys[-1] and index < args.big_unrecorded:
                    unrecorded.add((name, key))
                    continue
                # Poll-only (no readiness events), so narrow sweeps list what is due.
                ready_rows.append((ds.pk, "daily", key, "poll", now - timedelta(days=1)))
        STORE.put_many(BUCKET, items)
        seed_ready(ready_rows)
        seed_seconds = time.perf_counter() - started
        group = StorageGroup.objects.get(source=SOURCE, prefix=parent)
        source = storage.sources()[SOURCE]
        runs = {}
        with time_machine.travel(now, tick=False) as clock:
            next_key = (last + timedelta(days=1)).isoformat()
            day = timedelta(days=1)
            for label, at, full, recovery in (
                ("full", now, True, False),
                ("regular", now + timedelta(minutes=1), False, False),
                ("narrow", now + timedelta(minutes=2), False, False),
                ("next day", now + day, False, False),
                ("next day, narrow", now + day + timedelta(minutes=1), False, False),
                ("recovery", now + day + timedelta(minutes=2), False, True),
            ):
                if label == "regular":
                    # A sweep of every dataset, as due hourly (the full sweep was one).
                    StorageGroup.objects.filter(pk=group.pk).update(last_wide_sweep_at=None)
                if label == "next day":
                    # The next day lands for the first `big_unrecorded` datasets; every
                    # dataset is due again (its next period has ended).
                    for _, template in specs[: args.big_unrecorded]:
                        for path, size in partition_objects(
                            template.replace("{partition}", next_key)
                        ):
                            STORE.put(f"{BUCKET}/{path}", size)
                clock.move_to(at)
                group.refresh_from_db()
                before = STORE.counts()
                lister = objectstore.Lister(source, fs=STORE)
                t0 = time.perf_counter()
                report = polling.sweep_group(
                    group, now=at, full=full, recovery=recovery, lister=lister
                )
                wall = time.perf_counter() - t0
                after = STORE.counts()
                delta = {k: after[k] - before[k] for k in after}
                runs[label] = {
                    "full": full,
                    "recovery": recovery,
                    "listing": str(report.listing) + ("+pass" if report.recent_pass else ""),
                    "narrow": report.narrow,
                    "datasets_listed": report.datasets_listed,
                    "pages": report.pages,
                    "list_calls": report.list_calls,
                    "prefix_pages": delta["prefix_pages"],
                    "inner_listings": delta["inner_pages"],
                    "objects": report.objects_seen,
                    "partitions_checked": report.partitions_checked,
                    "partitions_found": report.partitions_found,
                    "wall_seconds": round(wall, 3),
                    "store_seconds": round(delta["seconds"], 3),
                    "error": report.error,
                    "start_after": STORE.last_start_after if delta["start_after"] else None,
                }
        results.append(
            {
                "naming": naming,
                "example_prefix": parent
                + specs[42 % len(specs)][1][len(parent) :].replace("{partition}", keys[-1]),
                "datasets": args.big_datasets,
                "days": args.big_days,
                "prefixes": args.big_datasets * args.big_days,
                "known_ready": len(ready_rows),
                "unrecorded_with_marker": len(unrecorded),
                "seed_seconds": round(seed_seconds, 1),
                "lookback_days": settings.TIDEMARK_POLL["lookback_days"],
                **runs,
            }
        )
    return results


# --- output -------------------------------------------------------------------------------


def _f(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_day(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rows = [
        ("storage groups", lambda r: len(r["groups"])),
        ("sweeps (day)", lambda r: r["sweeps"]),
        ("  prefix-listing pages", lambda r: r["prefix_pages"]),
        ("  listings inside partitions", lambda r: r["inner_listings"]),
        ("ListObjectsV2 requests", lambda r: r["list_requests"]),
        ("events processed", lambda r: r["events_processed"]),
        (
            "  flat / delimiter sweeps",
            lambda r: f"{r['flat_sweeps']} / {r['sweeps'] - r['flat_sweeps']}",
        ),
        ("  sweeps with the recent-marker pass", lambda r: r["recent_passes"]),
        ("TOTAL calls + events", lambda r: r["total_calls"]),
        ("  floor: events + 1 listing/poll find", lambda r: r["design_floor"]),
        (f"  vs reference {REFERENCE['total']:,}", lambda r: f"{r['vs_reference']:.2f}x"),
        (
            f"  vs naive {args.prefixes * MINUTES:,}",
            lambda r: (
                f"{r['vs_naive'] * 100:.3f}% ({r['naive_checks'] / r['total_calls']:,.0f}x fewer)"
            ),
        ),
        ("events lost in outage", lambda r: r["events_lost_in_outage"]),
        ("missed at end of day", lambda r: r["missed_at_end"]),
        (f"  only arrivals of minute {MINUTES - 1}?", lambda r: r["missed_last_minute_only"]),
        (
            "  their arrival minutes",
            lambda r: ",".join(str(m) for m in sorted(r["missed_arrival_minutes"])) or "-",
        ),
        ("  landed after their group's last sweep", lambda r: r["missed_not_yet_due"]),
        ("  missed though a sweep came after", lambda r: r["missed_after_a_sweep"]),
        ("outage-window arrivals", lambda r: r["outage_window_arrivals"]),
        (
            f"  caught by restart sweep (ref {REFERENCE['restart_caught']})",
            lambda r: r["restart_caught_outage_arrivals"],
        ),
        ("restart sweep found (all)", lambda r: r["restart_sweep_found"]),
        ("latency mean (min)", lambda r: r["latency_min"]["mean"]),
        ("latency p95 (min)", lambda r: r["latency_min"]["p95"]),
        ("latency worst (min)", lambda r: r["latency_min"]["worst"]),
        ("poll-only mean (min)", lambda r: r["latency_poll_only_min"]["mean"]),
        ("poll-only p95 (min)", lambda r: r["latency_poll_only_min"]["p95"]),
        (
            f"poll-only worst (min) (ref {REFERENCE['poll_only_worst_min']})",
            lambda r: r["latency_poll_only_min"]["worst"],
        ),
        (
            "poll-only worst, outside outage",
            lambda r: r["latency_poll_only_outside_outage_min"]["worst"],
        ),
        (
            "poll-only mean/p95, outside outage",
            lambda r: (
                f"{r['latency_poll_only_outside_outage_min']['mean']} / "
                f"{r['latency_poll_only_outside_outage_min']['p95']}"
            ),
        ),
        (
            "sim wall s (sweeps / events)",
            lambda r: f"{r['day_wall_seconds']} ({r['sweep_seconds']} / {r['event_seconds']})",
        ),
        ("DB statements in sweeps", lambda r: r["sweep_queries"]),
    ]
    width = max(len(label) for label, _ in rows) + 2
    print()
    print(
        f"Part 1: {args.prefixes:,} prefixes, one day at 1-minute ticks, "
        f"{args.event_share:.0%} send events, outage {args.outage_start}-{args.outage_end}, "
        f"seed {args.seed}, history {args.history_days} day(s)"
    )
    header = "".ljust(width) + "".join((" " + r["layout"]).rjust(22) for r in results)
    print(header)
    print("-" * len(header))
    for label, fn in rows:
        print(label.ljust(width) + "".join((" " + _f(fn(r))).rjust(22) for r in results))
    print()
    print(
        f"Against the published design ({REFERENCE['total']:,} calls + events, every outage "
        f"arrival caught at restart, poll-only latency up to {REFERENCE['poll_only_worst_min']} "
        "min):"
    )
    for r in results:
        outside = r["latency_poll_only_outside_outage_min"]["mean"] or 0.0
        checks = [
            f"total {r['total_calls']:,} <= {REFERENCE['total']:,}: "
            f"{_f(r['total_calls'] <= REFERENCE['total'])}",
            "outage arrivals all caught at restart: "
            + _f(r["restart_caught_outage_arrivals"] >= r["outage_window_arrivals_poll_needed"]),
            f"nothing missed but arrivals of the last simulated minute ({MINUTES - 1}): "
            f"{_f(r['missed_last_minute_only'])}"
            + (
                " (missed earlier: minute "
                + ", ".join(str(m) for m in r["missed_before_last_minute"])
                + f"; {r['missed_not_yet_due']} of {r['missed_at_end']} missed landed after "
                "their group's last sweep, the next one due after the day: not yet due)"
                if not r["missed_last_minute_only"]
                else ""
            ),
            f"poll-only mean outside the outage {outside} min <= 5: {_f(outside <= 5)} "
            f"({r['latency_poll_only_min']['mean']} with the outage's arrivals)",
        ]
        print(f"  [{r['layout']}] " + "; ".join(checks))
    for r in results:
        for name, g in r["groups"].items():
            print(
                f"  [{r['layout']}] {name}: {g['datasets']} datasets, {g['sweeps']} sweeps "
                f"({g['full_sweeps']} full, {g['flat_sweeps']} flat, "
                f"{g['sweeps_that_found']} found something), "
                f"{g['pages']} pages, {g['found']} found, mode at end {g['mode_at_end']} "
                f"({g['interval_at_end_s']} s), last sweep at minute {g['last_sweep_minute']}, "
                f"next at {g['next_sweep_minute']}"
            )
    print("Missed at the end of the day: arrival minute, its group's last sweep, next due:")
    for r in results:
        for d in r["missed_detail"]:
            print(
                f"  [{r['layout']}] {d['dataset']} landed in minute {d['minute']}: "
                f"{d['sweeps_after']} sweeps of {d['group']} after it; last sweep at minute "
                f"{d['last_sweep_minute']}, next due at {d['next_sweep_minute']} "
                f"(interval {d['interval_min']} min)"
            )
    print("Sweeps by kind (group: listing, +pass: with the recent-marker pass):")
    for r in results:
        for kind, row in r["sweep_breakdown"].items():
            print(
                f"  [{r['layout']}] {kind}: {row['sweeps']} sweeps, {row['pages']} pages "
                f"({row['pages'] / row['sweeps']:.1f} per sweep), {row['list_calls']} listings"
            )


def print_big(results: list[dict[str, Any]]) -> None:
    print()
    first = results[0]
    print(
        f"Part 2: one group, {first['datasets']} daily datasets x {first['days']:,} days = "
        f"{first['prefixes']:,} partition prefixes ({first['known_ready']:,} known ready, "
        f"{first['unrecorded_with_marker']} with a marker not yet recorded); "
        f"lookback {first['lookback_days']} days"
    )
    cols = {
        "datasets_listed": "datasets",
        "pages": "requests",
        "prefix_pages": "prefix pages",
        "inner_listings": "inside",
        "objects": "objects",
        "partitions_found": "found",
    }
    head = f"{'naming / sweep':<34}" + "".join(c.rjust(13) for c in cols.values())
    head += "listing".rjust(16) + "wall s".rjust(9) + "  StartAfter"
    print(head)
    print("-" * len(head))
    for r in results:
        for label in ("full", "regular", "narrow", "next day", "next day, narrow", "recovery"):
            run = r[label]
            print(
                f"{r['naming'] + ' / ' + label:<34}"
                + "".join(_f(run[c]).rjust(13) for c in cols)
                + f"{run['listing']:>16}{run['wall_seconds']:>9.2f}  {run['start_after'] or '-'}"
            )
        print(f"  e.g. {r['example_prefix']}")
    for r in results:
        full = r["full"]
        bound = -(-r["prefixes"] // 1000) + r["unrecorded_with_marker"]
        print(
            f"  [{r['naming']}] full sweep: {full['pages']:,} requests ({full['prefix_pages']} "
            f"pages of prefixes + {full['inner_listings']} listings inside); at most "
            f"{bound:,} (a page per 1,000 prefixes + one per partition not yet ready): "
            f"{_f(full['pages'] <= bound)}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(ROOT)
    check_services(args.pg)
    databases = [args.db_name, f"{args.db_name}_wd"]
    env = bench_env(
        args.pg,
        databases,
        args.broker_url,
        TIDEMARK_STORAGE_SOURCES=json.dumps({SOURCE: {"url": f"s3://{BUCKET}"}}),
    )
    os.environ.update(env)
    started_at = datetime.now(UTC)
    try:
        print(f"creating databases {', '.join(databases)} and migrating")
        recreate_databases(args.pg, databases)
        migrate(env)

        import django

        django.setup()
        import logging

        logging.getLogger("catalog.polling").setLevel(logging.WARNING)
        from catalog import polling

        install_lister()
        sc = scenario(args)
        days = []
        configured = dict(polling.settings.TIDEMARK_POLL)
        for cadence in args.cadences:
            polling.settings.TIDEMARK_POLL = {**configured, **CADENCES[cadence]}
            for layout in args.layouts:
                print(
                    f"part 1, layout {layout}, {cadence} cadence: registering "
                    f"{args.prefixes} datasets, simulating"
                )
                t0 = time.perf_counter()
                day = run_day(args, layout, sc)
                day["cadence"] = cadence
                day["cadence_settings"] = dict(polling.settings.TIDEMARK_POLL)
                day["layout"] = f"{layout} @{cadence}"
                days.append(day)
                print(f"  done in {time.perf_counter() - t0:.0f} s")
        polling.settings.TIDEMARK_POLL = configured
        big = []
        if not args.skip_part2:
            print(
                f"part 2: seeding 2 x {args.big_datasets * args.big_days:,} partition "
                "prefixes, sweeping"
            )
            t0 = time.perf_counter()
            big = run_big(args)
            print(f"  done in {time.perf_counter() - t0:.0f} s")

        report = {
            "benchmark": "tidemark fallback poll: List requests against a counting fake S3",
            "started_at": started_at.isoformat(),
            "finished_at": datetime.now(UTC).isoformat(),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "settings": {
                "seed": args.seed,
                "prefixes": args.prefixes,
                "event_share": args.event_share,
                "outage_minutes": [args.outage_start, args.outage_end],
                "history_days": args.history_days,
                "day": DAY.isoformat(),
                "partition_key": KEY,
                "poll_settings": dict(polling.settings.TIDEMARK_POLL),
                "page_size": 1000,
                "tick_order": "events due (arrival + 1 min), then sweep_due(now), then this "
                "minute's arrivals land (seen from the next tick on)",
                "outage": "events due in [start, end) are lost, no sweep runs; at `end` "
                "sweep_due(now, boot_at=now)",
                "reference": REFERENCE,
                "databases": databases,
            },
            "part1": [{k: v for k, v in d.items() if k != "sweep_log"} for d in days],
            "part1_sweep_logs": {d["layout"]: d["sweep_log"] for d in days},
            "part2": big,
            "machine": machine_info(args.pg, {}, "in-process, fake S3; no gunicorn"),
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2, default=str) + "\n")
        if days:
            print_day(days, args)
        if big:
            print_big(big)
        print(f"\nwrote {args.output}")
    finally:
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if not args.keep:
            drop_databases(args.pg, databases)
        clear_doorbells(args.broker_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
