"""Delivery through real Celery worker processes, a real Redis broker and a real HTTP
receiver on loopback, on the test's PostgreSQL database.

The workers are ``celery worker -P solo`` subprocesses sharing pytest-django's test
database (hence ``transaction=True``: they only see committed rows) and a private
redis-server that the tests may kill. Celery beat is not running: where a test needs
beat's 30 s sweep it re-rings the doorbell itself (``ring_deliveries``), which is all beat does.
"""

from __future__ import annotations

import itertools
import re
import shutil
import threading
import time
from collections import Counter, defaultdict

import pytest
from django.db import transaction
from standardwebhooks import Webhook

from catalog import doorbell
from catalog.models import Delivery, DeliveryAttempt
from tests.catalog.worker_helpers import (
    all_succeeded,
    delivery_states,
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

PUBLISH_BUDGET = 5.0  # seconds a publish may take while the broker is down
DELIVERED_WITHIN = 30.0  # seconds the workers get to finish what a test expects


@pytest.fixture(autouse=True)
def doorbell_not_quiet(monkeypatch):
    """Each test starts with a doorbell that has not failed yet."""
    monkeypatch.setattr(doorbell, "_quiet_until", 0.0)


def test_worker_killed_mid_delivery_completes_after_lease_with_same_webhook_id(
    start_worker, receiver
):
    publish, secrets = subscribers(receiver, ["/hook"])
    first_arrived = threading.Event()

    def respond(hit) -> int:
        if hit is receiver.snapshot()[0]:  # hold the first attempt until the test ends
            first_arrived.set()
            receiver.closing.wait(60)
        return 200

    receiver.respond = respond
    first = start_worker("first")
    first.wait_ready()

    publish("2026-11-28")  # its doorbell wakes the worker, which claims and sends
    wait_until(first_arrived.is_set, DELIVERED_WITHIN, "the first attempt at the receiver")
    held = Delivery.objects.get()
    assert (held.state, held.attempts) == (Delivery.State.PENDING, 1)
    assert held.claim_token is not None and held.claimed_until is not None  # mid-send

    first.kill()  # SIGKILL, mid-send: nothing is written back
    assert not first.alive
    second = start_worker("second")
    second.wait_ready()
    # Rung every 0.5 s (standing in for beat): the worker is ready in about a second, so
    # it is rung while the dead worker's lease still holds, and must leave it alone.
    wait_until(all_succeeded(1), DELIVERED_WITHIN, "the delivery to succeed", every=ring_deliveries)

    row = Delivery.objects.get()
    assert (row.state, row.attempts, row.claim_token) == (Delivery.State.SUCCEEDED, 2, None)
    # The killed attempt left no record; the second is numbered 2 and was sent only once
    # the first claim's lease had run out.
    [attempt] = DeliveryAttempt.objects.all()
    assert (attempt.number, attempt.status_code, attempt.decision) == (2, 200, "succeeded")
    assert attempt.started_at >= held.claimed_until
    hits = receiver.snapshot()
    assert len(hits) == 2, [(h.path, h.webhook_id) for h in hits]
    assert [h.webhook_id for h in hits] == [str(row.notification_id)] * 2
    assert hits[0].body == hits[1].body  # byte-identical resend
    Webhook(secrets["/hook"]).verify(hits[1].body, hits[1].headers)
    wait_until(lambda: second.claimed() != (0, 0), 10, "the second worker to log its pass")
    assert second.claimed() == (1, 0), second.log()[-3000:]


def test_two_workers_on_one_backlog_never_deliver_concurrently_and_lose_nothing(
    start_worker, receiver
):
    paths = [f"/hook/{i}" for i in range(4)]
    partitions = [f"2026-11-{day:02d}" for day in range(1, 21)]
    total = len(paths) * len(partitions)

    def respond(hit) -> int:
        time.sleep(0.03)  # a receiver that takes a while, so the workers overlap
        return 200

    receiver.respond = respond
    publish, _ = subscribers(receiver, paths)
    # Long lease: no claim may expire here, so any second send would be a double claim.
    # Small batches, so both workers keep coming back to the same backlog.
    # Two sends in flight, one per endpoint: a worker claims again only once it holds
    # fewer than two, so neither takes the whole backlog while the other waits.
    workers = [
        start_worker(
            name,
            lease=60,
            TIDEMARK_DELIVERY_BATCH="5",
            TIDEMARK_DELIVERY_CONCURRENCY="2",
            TIDEMARK_DELIVERY_ENDPOINT_CONCURRENCY="1",
        )
        for name in ("a", "b")
    ]
    for worker in workers:
        worker.wait_ready()

    with transaction.atomic():  # the whole backlog commits at once; then 20 doorbells ring
        for partition in partitions:
            publish(partition)
    expected = expected_deliveries(receiver)
    assert len(expected) == total

    wait_until(all_succeeded(total), DELIVERED_WITHIN, f"{total} deliveries to succeed")
    # A worker records right after the response arrives; let the receiver note its end.
    wait_until(lambda: all(h.finished for h in receiver.snapshot()), 5, "responses to finish")

    hits = receiver.snapshot()
    by_key = defaultdict(list)
    for hit in hits:
        by_key[(hit.webhook_id, hit.path)].append(hit)
    assert set(by_key) == expected  # every (notification, endpoint) arrived; nothing else
    in_flight_twice = [
        key
        for key, tries in by_key.items()
        for before, after in itertools.pairwise(sorted(tries, key=lambda h: h.started))
        if after.started < before.finished
    ]
    assert in_flight_twice == []
    assert {key: len(tries) for key, tries in by_key.items() if len(tries) != 1} == {}
    assert set(Delivery.objects.values_list("attempts", flat=True)) == {1}
    assert DeliveryAttempt.objects.filter(number=1).count() == total
    # The workers really ran side by side: requests from both overlapped in time.
    spans = sorted((h.started, h.finished) for h in hits)
    assert any(b_start < a_end for (_, a_end), (b_start, _) in itertools.pairwise(spans)), (
        "no two requests overlapped: the workers never ran at the same time"
    )
    # Each pass logs its summary after its last write-back: wait for the logs to catch up.
    wait_until(
        lambda: sum(worker.claimed()[0] for worker in workers) >= total, 10, "pass summaries"
    )
    claimed = {worker.name: worker.claimed() for worker in workers}
    assert sum(n for n, _ in claimed.values()) == total, claimed
    assert all(n > 0 and lost == 0 for n, lost in claimed.values()), claimed


def test_publishes_while_redis_is_down_are_delivered_after_it_returns(
    start_worker, receiver, broker, monkeypatch
):
    publish, _ = subscribers(receiver, ["/hook/a", "/hook/b"])
    worker = start_worker("only")
    worker.wait_ready()
    pid = worker.process.pid
    publish("2026-11-27")  # before the outage the doorbell alone gets it delivered
    wait_until(all_succeeded(2), DELIVERED_WITHIN, "the pre-outage deliveries")
    # The pass that sent them must have ended too: one still running would claim the
    # outage's publishes itself, and nothing here would need the broker back.
    wait_until(lambda: worker.claimed()[0] >= 2, 10, "the pre-outage pass's summary")

    broker.kill()
    during = [f"2026-11-{day}" for day in (28, 29, 30)]
    for partition in during:
        started = time.monotonic()
        result = publish(partition)
        took = time.monotonic() - started
        assert result.status_code == 201
        assert took < PUBLISH_BUDGET, f"publish of {partition} took {took:.1f}s"
    assert delivery_states() == Counter({Delivery.State.SUCCEEDED: 2, Delivery.State.PENDING: 6})

    broker.start()  # same port, empty: the doorbells rung during the outage are gone
    # The failed rings made this process's doorbell keep quiet for a few seconds; beat
    # (another process) would not be quiet, so neither is our stand-in for it.
    monkeypatch.setattr(doorbell, "_quiet_until", 0.0)
    done = all_succeeded(8)
    wait_until(
        lambda: not worker.alive or done(),
        DELIVERED_WITHIN,
        "the outage's deliveries",
        every=ring_deliveries,
    )

    assert worker.alive, f"the worker died:\n{worker.log()[-3000:]}"
    assert worker.process.pid == pid and done()  # the same worker reconnected and delivered
    connected = re.findall(rf"Connected to redis://\S*127\.0\.0\.1:{broker.port}/", worker.log())
    assert len(connected) >= 2, worker.log()[-3000:]  # at start, and again after the outage
    received = Counter(hit.webhook_id for hit in receiver.snapshot())
    expected = {webhook_id for webhook_id, _ in expected_deliveries(receiver)}
    assert set(received) == expected and len(expected) == 4
    assert set(received.values()) == {2}  # once per endpoint, no duplicates
    assert set(Delivery.objects.values_list("attempts", flat=True)) == {1}
