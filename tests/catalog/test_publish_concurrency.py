"""Readiness publishing under real concurrency on PostgreSQL: threads released together by
a barrier, each on its own database connection, against committed data."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from catalog import errors
from catalog.actors import Actor
from catalog.models import (
    ApiKey,
    Delivery,
    IdempotencyRecord,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
)
from catalog.services.publish_steps import PublishResult
from catalog.services.publishing import readiness_publish
from catalog.services.teams import api_key_create
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
THREAD_TIMEOUT = 60  # seconds a whole race may take before the test calls it a hang


def _race(count: int, work: Callable[[int], Any]) -> list[tuple[str, Any]]:
    """Run ``work(i)`` in ``count`` threads released at once by a barrier.

    Returns ``[("ok", value) | ("error", exception), ...]`` in thread order.
    """
    barrier = threading.Barrier(count)
    outcomes: list[tuple[str, Any]] = [("missing", None)] * count

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            outcomes[index] = ("ok", work(index))
        except BaseException as exc:
            outcomes[index] = ("error", exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=THREAD_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a publisher hung"
    return outcomes


def _errors(outcomes: list[tuple[str, Any]]) -> list[BaseException]:
    return [value for kind, value in outcomes if kind != "ok"]


def _actor(team, name: str = "publisher", **kwargs) -> Actor:
    key, _ = api_key_create(team=team, name=name, scopes=[ApiKey.Scope.PUBLISH], **kwargs)
    return Actor(team=team, api_key=key)


def _token(team) -> str:
    _, token = api_key_create(team=team, name="http", scopes=[ApiKey.Scope.PUBLISH])
    return token


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _post(client: APIClient, payload: dict, idempotency_key: str | None = None):
    headers = {"HTTP_IDEMPOTENCY_KEY": idempotency_key} if idempotency_key else {}
    return client.post("/api/v1/readiness", payload, format="json", **headers)


def _row_counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (
            Partition,
            PartitionRevision,
            ReadinessEvent,
            Notification,
            Delivery,
            IdempotencyRecord,
        )
    }


@pytest.fixture
def dataset(team):
    return DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")


@pytest.fixture
def subscriber_endpoints(dataset):
    """Two consumer teams subscribed with a webhook each: every event owes two deliveries."""
    return {SubscriptionFactory(dataset=dataset).endpoint_id for _ in range(2)}


def test_readiness_publish_different_partitions_at_the_same_instant_both_land(
    team, dataset, subscriber_endpoints
):
    producers = [
        _actor(team, name="daily-job"),
        _actor(
            TeamFactory(slug="backfill"),
            name="backfill-job",
            delegated_datasets=[dataset],
        ),
    ]
    rounds = [("2026-11-27", "2026-11-28"), ("2026-11-25", "2026-11-26")]

    for keys in rounds:
        outcomes = _race(
            2,
            lambda i, keys=keys: readiness_publish(
                actor=producers[i],
                namespace="s3://lake",
                name="raw/orders",
                partition=keys[i],
                now=NOW,
            ),
        )

        assert _errors(outcomes) == []
        results: list[PublishResult] = [value for _, value in outcomes]
        assert [r.status_code for r in results] == [201, 201]
        assert [r.body["partition"] for r in results] == list(keys)
        for key, result in zip(keys, results, strict=True):
            event = ReadinessEvent.objects.get(partition__dataset=dataset, partition__key=key)
            assert result.body["event_id"] == event.pk
            assert event.state == PartitionRevision.State.READY
            notification = Notification.objects.get(dedup_key=f"readiness-event:{event.pk}")
            assert {d.endpoint_id for d in notification.deliveries.all()} == subscriber_endpoints

    published = [key for keys in rounds for key in keys]
    assert sorted(
        Partition.objects.filter(dataset=dataset).values_list("key", flat=True)
    ) == sorted(published)
    assert ReadinessEvent.objects.filter(dataset=dataset).count() == len(published)
    assert Delivery.objects.count() == len(published) * len(subscriber_endpoints)


def test_readiness_publish_different_partitions_over_http_at_the_same_instant_both_land(
    team, dataset
):
    clients = [_client(_token(team)), _client(_token(team))]
    keys = ["2026-11-27", "2026-11-28"]

    outcomes = _race(
        2,
        lambda i: _post(
            clients[i], {"namespace": "s3://lake", "name": "raw/orders", "partition": keys[i]}
        ),
    )

    assert _errors(outcomes) == []
    responses = [value for _, value in outcomes]
    assert [r.status_code for r in responses] == [201, 201], [r.json() for r in responses]
    assert [r.json()["partition"] for r in responses] == keys
    assert sorted(Partition.objects.values_list("key", flat=True)) == keys
    assert ReadinessEvent.objects.count() == 2


def test_readiness_publish_twenty_identical_concurrent_publishes_record_one_event(
    team, dataset, subscriber_endpoints
):
    token = _token(team)  # one producer retrying over 20 connections
    payload = {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"}

    outcomes = _race(20, lambda i: _post(_client(token), payload))

    assert _errors(outcomes) == []
    responses = [value for _, value in outcomes]
    statuses = Counter(r.status_code for r in responses)
    assert statuses[201] == 1, [(r.status_code, r.json()) for r in responses]
    assert statuses[200] == 19, [(r.status_code, r.json()) for r in responses]
    bodies = [r.json() for r in responses]
    assert all(body == bodies[0] for body in bodies), bodies
    assert bodies[0]["state"] == "ready"

    partition = Partition.objects.get(dataset=dataset)
    revision = PartitionRevision.objects.get(partition=partition)
    event = ReadinessEvent.objects.get(partition=partition)
    notification = Notification.objects.get(dataset=dataset)
    assert partition.current_revision_id == revision.pk
    assert (partition.key, revision.version, revision.state) == ("2026-11-28", "", "ready")
    assert bodies[0]["event_id"] == event.pk
    assert notification.dedup_key == f"readiness-event:{event.pk}"
    assert sorted(
        Delivery.objects.filter(notification=notification).values_list("endpoint_id", flat=True)
    ) == sorted(subscriber_endpoints)
    assert _row_counts() == {
        "Partition": 1,
        "PartitionRevision": 1,
        "ReadinessEvent": 1,
        "Notification": 1,
        "Delivery": 2,
        "IdempotencyRecord": 0,
    }


def _publish_20_times_at_once(actor: Actor, **request: Any) -> list[PublishResult]:
    outcomes = _race(
        20,
        lambda _: readiness_publish(
            actor=actor, namespace="s3://lake", name="raw/orders", now=NOW, **request
        ),
    )
    assert _errors(outcomes) == []
    return [value for _, value in outcomes]


@pytest.mark.parametrize(
    ("first_state", "restated_version"),
    [(PartitionRevision.State.READY, "v1"), (PartitionRevision.State.FAILED, None)],
)
def test_readiness_publish_twenty_concurrent_publishes_of_a_new_version_record_one_event(
    team, dataset, subscriber_endpoints, first_state, restated_version
):
    # The partition row exists, so the row lock (not the unique index) serialises these.
    actor = _actor(team)
    readiness_publish(
        actor=actor,
        namespace="s3://lake",
        name="raw/orders",
        partition="2026-11-28",
        version="v1",
        state=first_state,
        now=NOW,
    )

    results = _publish_20_times_at_once(actor, partition="2026-11-28", version="v2")

    assert all(r.body == results[0].body for r in results), [r.body for r in results]
    assert (results[0].body["version"], results[0].body["current_version"]) == ("v2", "v2")
    partition = Partition.objects.get(dataset=dataset)
    v2 = PartitionRevision.objects.get(partition=partition, version="v2")
    assert (partition.current_revision_id, v2.state) == (v2.pk, PartitionRevision.State.READY)
    event = ReadinessEvent.objects.get(revision=v2)
    assert event.restated_version == restated_version
    assert results[0].body["event_id"] == event.pk
    notification = Notification.objects.get(dedup_key=f"readiness-event:{event.pk}")
    assert set(notification.deliveries.values_list("endpoint_id", flat=True)) == (
        subscriber_endpoints
    )
    assert _row_counts() == {
        "Partition": 1,
        "PartitionRevision": 2,
        "ReadinessEvent": 2,
        "Notification": 2,
        "Delivery": 4,
        "IdempotencyRecord": 0,
    }


def test_readiness_publish_twenty_concurrent_publishes_of_a_new_version_answer_201_once(
    team, dataset
):
    actor = _actor(team)
    readiness_publish(
        actor=actor,
        namespace="s3://lake",
        name="raw/orders",
        partition="2026-11-28",
        version="v1",
        now=NOW,
    )

    results = _publish_20_times_at_once(actor, partition="2026-11-28", version="v2")

    assert Counter(r.status_code for r in results) == {201: 1, 200: 19}


def test_readiness_publish_twenty_concurrent_ready_publishes_after_a_failure_record_one_event(
    team, dataset, subscriber_endpoints
):
    actor = _actor(team)
    readiness_publish(
        actor=actor,
        namespace="s3://lake",
        name="raw/orders",
        partition="2026-11-28",
        state=PartitionRevision.State.FAILED,
        now=NOW,
    )

    results = _publish_20_times_at_once(actor, partition="2026-11-28")

    assert Counter(r.status_code for r in results) == {201: 1, 200: 19}
    assert all(r.body == results[0].body for r in results)
    revision = PartitionRevision.objects.get()
    assert revision.state == PartitionRevision.State.READY
    assert ReadinessEvent.objects.filter(revision=revision, state="ready").count() == 1
    assert Notification.objects.filter(type=Notification.Type.PARTITION_READY).count() == 1


def test_readiness_publish_concurrent_repeats_of_one_idempotency_key_never_fail_with_500(
    team, dataset, subscriber_endpoints
):
    actor = _actor(team)

    def publish(_: int) -> PublishResult:
        return readiness_publish(
            actor=actor,
            namespace="s3://lake",
            name="raw/orders",
            partition="2026-11-28",
            manifest={"files": 3},
            idempotency_key="run-42",
            now=NOW,
        )

    outcomes = _race(20, publish)

    in_progress = [
        exc for exc in _errors(outcomes) if isinstance(exc, errors.IdempotencyKeyInProgress)
    ]
    assert [exc for exc in _errors(outcomes) if exc not in in_progress] == []
    assert all(exc.status == 409 for exc in in_progress)
    results: list[PublishResult] = [value for kind, value in outcomes if kind == "ok"]
    originals = [r for r in results if not r.replayed]
    assert len(originals) == 1, results
    original = originals[0]
    assert original.status_code == 201
    replays = [r for r in results if r.replayed]
    assert all((r.status_code, r.body) == (201, original.body) for r in replays)
    assert len(originals) + len(replays) + len(in_progress) == 20

    event = ReadinessEvent.objects.get()
    assert original.body["event_id"] == event.pk
    record = IdempotencyRecord.objects.get(team=team, key="run-42")
    assert (record.status_code, record.response_body) == (201, original.body)
    assert _row_counts() == {
        "Partition": 1,
        "PartitionRevision": 1,
        "ReadinessEvent": 1,
        "Notification": 1,
        "Delivery": 2,
        "IdempotencyRecord": 1,
    }
    # Whoever was told 409 may retry now and gets the first response back.
    retry = publish(0)
    assert (retry.replayed, retry.status_code, retry.body) == (True, 201, original.body)


def test_readiness_publish_same_idempotency_key_while_the_first_is_uncommitted_is_409(
    team, dataset
):
    actor = _actor(team)
    request = {
        "actor": actor,
        "namespace": "s3://lake",
        "name": "raw/orders",
        "partition": "2026-11-28",
        "idempotency_key": "run-7",
        "now": NOW,
    }
    claimed, release = threading.Event(), threading.Event()
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}

    def a_holds_the_key_uncommitted() -> None:
        try:
            with transaction.atomic():
                first["result"] = readiness_publish(**request)
                claimed.set()
                assert release.wait(THREAD_TIMEOUT), "never released"
        except BaseException as exc:
            first["error"] = exc
        finally:
            claimed.set()
            connection.close()

    def b_sends_the_same_key() -> None:
        started = time.monotonic()
        try:
            second["result"] = readiness_publish(**request)
        except BaseException as exc:
            second["error"] = exc
        finally:
            second["took"] = time.monotonic() - started
            connection.close()

    a = threading.Thread(target=a_holds_the_key_uncommitted, daemon=True)
    b = threading.Thread(target=b_sends_the_same_key, daemon=True)
    a.start()
    try:
        assert claimed.wait(THREAD_TIMEOUT)
        assert "error" not in first, first
        b.start()
        b.join(5)  # a B that waits for A's commit would still be blocked here
        b_finished_while_a_was_open = not b.is_alive()
    finally:
        release.set()
        a.join(THREAD_TIMEOUT)
        b.join(THREAD_TIMEOUT)
    assert not a.is_alive()
    assert not b.is_alive()

    assert b_finished_while_a_was_open, "B waited for A's transaction instead of answering 409"
    assert isinstance(second.get("error"), errors.IdempotencyKeyInProgress), second
    assert second["error"].status == 409
    assert second["took"] < 1.0
    assert "error" not in first, first
    original: PublishResult = first["result"]
    assert (original.status_code, original.replayed) == (201, False)

    retry = readiness_publish(**request)

    assert (retry.replayed, retry.status_code, retry.body) == (True, 201, original.body)
    assert ReadinessEvent.objects.count() == 1


def test_readiness_publish_same_idempotency_key_with_another_body_is_422_and_writes_nothing(
    team, dataset, subscriber_endpoints
):
    client = _client(_token(team))
    payload = {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"}
    first = _post(client, payload, idempotency_key="run-9")
    assert first.status_code == 201
    before = _row_counts()
    record_before = IdempotencyRecord.objects.values().get(key="run-9")

    response = _post(client, {**payload, "partition": "2026-11-29"}, idempotency_key="run-9")

    assert response.status_code == 422
    assert response.json()["code"] == errors.IdempotencyKeyReused.code
    assert _row_counts() == before
    assert not Partition.objects.filter(key="2026-11-29").exists()
    assert IdempotencyRecord.objects.values().get(key="run-9") == record_before
    # The original request under that key still replays its first answer.
    replay = _post(client, payload, idempotency_key="run-9")
    assert (replay.status_code, replay.json()) == (201, first.json())
    assert replay.headers["Idempotent-Replayed"] == "true"
