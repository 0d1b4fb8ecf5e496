"""Concurrent sending (``catalog.sending``) in real Celery worker processes, against a
real HTTP receiver on loopback and the test's PostgreSQL database.

What the receiver sees is the proof: how many requests were in flight at once (in total
and per endpoint), that a hung endpoint holds up no other, that a worker which loses its
database stops sending, and that a worker killed mid-batch loses nothing and repeats a
delivery only with its own ``webhook-id`` and bytes. A request is in flight at the
receiver from its arrival until the receiver decides its answer: a worker can send the
next one to that endpoint only once the answer reached it, later.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter, defaultdict

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone
from psycopg import sql

from catalog import doorbell
from catalog.models import Delivery, DeliveryAttempt
from tests.catalog.worker_helpers import (
    Hit,
    all_succeeded,
    expected_deliveries,
    ring_deliveries,
    subscribers,
    wait_until,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),  # workers see committed rows only
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(120),
]

DELIVERED_WITHIN = 30.0  # seconds the workers get to finish what a test expects


@pytest.fixture(autouse=True)
def doorbell_not_quiet(monkeypatch):
    """Each test starts with a doorbell that has not failed yet."""
    monkeypatch.setattr(doorbell, "_quiet_until", 0.0)


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of the ``(start, end)`` spans that overlap at one instant."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in edges:  # at a tie an end (-1) sorts first: touching spans do not overlap
        now += step
        most = max(most, now)
    return most


def test_sends_in_flight_stay_within_the_total_and_the_per_endpoint_caps(start_worker, receiver):
    paths = [f"/hook/{i}" for i in range(5)]
    answered: dict[int, float] = {}

    def respond(hit: Hit) -> int:
        time.sleep(0.2)  # slow enough that the caps, not the receiver, bound what overlaps
        answered[id(hit)] = time.monotonic()
        return 200

    receiver.respond = respond
    publish, _ = subscribers(receiver, paths)
    worker = start_worker(
        "capped", TIDEMARK_DELIVERY_CONCURRENCY="6", TIDEMARK_DELIVERY_ENDPOINT_CONCURRENCY="2"
    )
    worker.wait_ready()
    with transaction.atomic():  # 40 deliveries commit at once
        for day in range(1, 9):
            publish(f"2026-11-{day:02d}")

    wait_until(all_succeeded(40), DELIVERED_WITHIN, "40 deliveries to succeed")
    hits = receiver.snapshot()
    assert len(hits) == 40 and len(answered) == 40
    spans = [(hit.started, answered[id(hit)]) for hit in hits]
    by_path = defaultdict(list)
    for hit in hits:
        by_path[hit.path].append((hit.started, answered[id(hit)]))
    # Five endpoints of two slots each could take ten: the total cap of six binds, and is
    # reached; no endpoint ever has more than its two.
    assert _most_at_once(spans) == 6
    per_endpoint = {path: _most_at_once(s) for path, s in by_path.items()}
    assert max(per_endpoint.values()) == 2 and set(per_endpoint.values()) <= {1, 2}
    assert set(Delivery.objects.values_list("attempts", flat=True)) == {1}


@pytest.mark.parametrize(
    "pass_seconds",
    [
        pytest.param("45", id="within-its-budget"),
        # Out of time at once: the pass, which must wait for the hung send anyway, goes
        # on claiming for the endpoints that answer (it drains).
        pytest.param("0", id="draining"),
    ],
)
def test_an_endpoint_that_hangs_holds_up_no_other(start_worker, receiver, pass_seconds):
    release = threading.Event()

    def respond(hit: Hit) -> int:
        if hit.path == "/hang":  # answers only when the test says so (or at teardown)
            release.wait(30)
        return 200

    receiver.respond = respond
    publish, _ = subscribers(receiver, ["/hang", "/ok/0", "/ok/1", "/ok/2"])
    # A send may take 10 s (the read timeout): the hang outlasts the whole test phase.
    worker = start_worker(
        "hung",
        lease=30,
        TIDEMARK_DELIVERY_DEADLINE="10",
        TIDEMARK_DELIVERY_PASS_SECONDS=pass_seconds,
    )
    worker.wait_ready()

    def arrived(path_prefix: str, partition_count: int):
        return lambda: (
            sum(1 for h in receiver.snapshot() if h.path.startswith(path_prefix) and h.finished)
            == 3 * partition_count
        )

    publish("2026-11-01")
    wait_until(lambda: any(h.path == "/hang" for h in receiver.snapshot()), 15, "the hang")
    wait_until(arrived("/ok/", 1), 15, "the other endpoints' first deliveries")
    # Published while the hung request is still in flight: its pass claims and sends them
    # at once, beside the hung request, not after it.
    publish("2026-11-02")
    publish("2026-11-03")
    wait_until(arrived("/ok/", 3), 15, "the other endpoints' later deliveries")
    hung = [h for h in receiver.snapshot() if h.path == "/hang"]
    assert len(hung) == 1 and not hung[0].finished  # one request, still held
    ok = Delivery.objects.exclude(endpoint__url__endswith="/hang")
    wait_until(lambda: set(ok.values_list("state", flat=True)) == {"succeeded"}, 10, "records")
    assert ok.count() == 9

    release.set()
    wait_until(all_succeeded(12), DELIVERED_WITHIN, "the hung endpoint's deliveries too")
    hang_hits = Counter(h.webhook_id for h in receiver.snapshot() if h.path == "/hang")
    assert len(hang_hits) == 3 and set(hang_hits.values()) == {1}


def _allow_connections(database: str, allowed: bool) -> None:
    """ALTER DATABASE ... ALLOW_CONNECTIONS, said from the server's maintenance database
    (a database cannot refuse connections while the session saying so is in it)."""
    params = connection.get_connection_params()
    params["dbname"] = "postgres"
    params.pop("cursor_factory", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                sql.Identifier(database), sql.SQL("true" if allowed else "false")
            )
        )


def _cut_off_other_sessions(database: str) -> None:
    """The database stops answering every other session: new connections are refused and
    open ones are ended (this test's own stays)."""
    _allow_connections(database, False)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def test_a_worker_that_loses_its_database_mid_batch_sends_nothing_more(start_worker, receiver):
    third_arrived, go_on = threading.Event(), threading.Event()
    database = connection.settings_dict["NAME"]

    def respond(hit: Hit) -> int:
        so_far = receiver.snapshot()
        if len(so_far) >= 3 and hit is so_far[2]:
            third_arrived.set()
            go_on.wait(30)  # answered once the worker's database is gone
        return 200

    receiver.respond = respond
    publish, _ = subscribers(receiver, [f"/hook/{i}" for i in range(4)])
    # One send at a time, and no claim while one is held: the first claim takes every
    # delivery (three per endpoint, within four times its one slot) and sends them one by
    # one. A lease long enough that none is handed back for want of one.
    worker = start_worker(
        "cut-off",
        lease=30,
        TIDEMARK_DELIVERY_CONCURRENCY="1",
        TIDEMARK_DELIVERY_ENDPOINT_CONCURRENCY="1",
    )
    worker.wait_ready()
    with transaction.atomic():  # twelve deliveries
        for day in range(1, 4):
            publish(f"2026-11-{day:02d}")
    expected = expected_deliveries(receiver)

    try:
        wait_until(third_arrived.is_set, DELIVERED_WITHIN, "the third send")
        _cut_off_other_sessions(database)
        go_on.set()
        wait_until(
            lambda: "the database stopped answering" in worker.log(), 15, "the worker to notice"
        )
        wait_until(lambda: "unsent 9 (database lost)" in worker.log(), 15, "the pass to end")
        # The send in flight finished; none of the nine other claims it held was sent.
        assert len(receiver.snapshot()) == 3
    finally:
        _allow_connections(database, True)

    assert worker.alive
    # Back. The lost pass's leases run out (the database clock cannot be travelled), and
    # beat's sweep (rung here) has the same worker send the rest.
    Delivery.objects.filter(claimed_until__isnull=False).update(claimed_until=timezone.now())
    wait_until(all_succeeded(12), DELIVERED_WITHIN, "every delivery", every=ring_deliveries)
    hits = receiver.snapshot()
    assert {(h.webhook_id, h.path) for h in hits} == expected
    sends = Counter((h.webhook_id, h.path) for h in hits)
    # Only the send that was in flight when the database went is sent again (its outcome
    # could not be recorded), with its own webhook-id.
    assert {key: n for key, n in sends.items() if n > 1} == {(hits[2].webhook_id, hits[2].path): 2}
    assert DeliveryAttempt.objects.count() == 12


def test_a_worker_killed_mid_batch_loses_nothing_and_repeats_only_what_was_in_flight(
    start_worker, receiver
):
    paths = [f"/hook/{i}" for i in range(4)]
    killed = threading.Event()
    proven: set[str] = set()

    def respond(hit: Hit) -> int:
        if not killed.is_set() and hit.path in proven:
            receiver.closing.wait(60)  # held in flight until the worker is killed
        proven.add(hit.path)  # each endpoint's first request is answered at once
        return 200

    receiver.respond = respond
    publish, _ = subscribers(receiver, paths)
    worker = start_worker("doomed", lease=30, TIDEMARK_DELIVERY_DEADLINE="10")
    worker.wait_ready()
    with transaction.atomic():
        for day in range(1, 6):
            publish(f"2026-11-{day:02d}")
    expected = expected_deliveries(receiver)
    assert len(expected) == 20

    def held() -> list[Hit]:
        return [h for h in receiver.snapshot() if not h.finished and h.status == 0]

    # Four endpoints, each with four slots once its first request was answered: the other
    # sixteen requests are held in flight.
    wait_until(lambda: len(held()) == 16, DELIVERED_WITHIN, "sixteen sends in flight")
    in_flight = {(h.webhook_id, h.path) for h in held()}
    worker.kill()  # SIGKILL, mid-batch: nothing more is written back
    killed.set()
    # The dead worker's leases run out (the database clock cannot be travelled).
    Delivery.objects.filter(claimed_until__isnull=False).update(claimed_until=timezone.now())
    second = start_worker("heir")
    second.wait_ready()
    wait_until(all_succeeded(20), DELIVERED_WITHIN, "every delivery", every=ring_deliveries)

    hits = receiver.snapshot()
    assert {(h.webhook_id, h.path) for h in hits} == expected  # nothing lost
    by_key = defaultdict(list)
    for hit in hits:
        by_key[(hit.webhook_id, hit.path)].append(hit)
    repeated = {key for key, tries in by_key.items() if len(tries) > 1}
    assert repeated == in_flight  # only what was in flight is sent again...
    for key in repeated:  # ...once more, with the same webhook-id and the same bytes
        first, again = by_key[key]
        assert (first.webhook_id, first.body) == (again.webhook_id, again.body)
    assert Counter(Delivery.objects.values_list("attempts", flat=True)) == {1: 4, 2: 16}
    assert DeliveryAttempt.objects.count() == 20  # the killed attempts left no record
