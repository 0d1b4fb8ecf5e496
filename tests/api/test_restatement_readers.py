"""A staged 7-partition restatement promoted while readers poll the partition APIs in
threads, each on its own PostgreSQL connection, against committed data: every observation
is all the old revisions or all the new ones, never a mixture."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from catalog import restatements
from catalog.actors import Actor
from catalog.models import ApiKey, Restatement
from catalog.services.publishing import readiness_publish
from catalog.services.teams import api_key_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
KEYS = [f"2026-11-{day:02d}" for day in range(20, 27)]
READERS = 4
HOLD_SECONDS = 0.5  # the promotion's transaction stays open (uncommitted) this long
TIMEOUT = 60


class Observation:
    def __init__(self, started: float, finished: float, kind: str, versions: set[str]):
        self.started, self.finished, self.kind, self.versions = started, finished, kind, versions


def _reader(token: str, dataset_id: int, stop: threading.Event, seen: list, failures: list):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    base = f"/api/v1/datasets/{dataset_id}/partitions"
    turn = 0
    try:
        while not stop.is_set():
            kind = ("list", "latest", "detail")[turn % 3]
            started = time.monotonic()
            if kind == "list":
                response = client.get(f"{base}?page_size=50")
                rows = response.json()["results"]
                assert len(rows) == 7, rows
                versions = {row["current_revision"]["version"] for row in rows}
                codes = {row["current_revision"]["code_version"] for row in rows}
                assert codes == {"abc1" if versions == {"v1"} else "def2"}
            elif kind == "latest":
                response = client.get(f"{base}/latest")
                versions = {response.json()["current_revision"]["version"]}
            else:
                response = client.get(f"{base}/{KEYS[turn % 7]}")
                versions = {response.json()["current_revision"]["version"]}
            assert response.status_code == 200
            seen.append(Observation(started, time.monotonic(), kind, versions))
            turn += 1
    except BaseException as exc:
        failures.append(exc)
    finally:
        connection.close()


def _publish(actor, dataset, key, **fields):
    return readiness_publish(
        actor=actor,
        namespace=dataset.namespace,
        name=dataset.name,
        partition=key,
        now=NOW,
        **fields,
    )


def _wait_for(count: int, seen: list[list]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while any(len(s) < count for s in seen):
        assert time.monotonic() < deadline, "readers made no progress"
        time.sleep(0.01)


def test_readers_see_all_old_until_the_promotion_commits_then_all_new():
    owner = TeamFactory(slug="orders")
    key, _ = api_key_create(team=owner, name="owner", scopes=ApiKey.Scope.values)
    actor = Actor(team=owner, api_key=key)
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    for partition in KEYS:
        _publish(actor, dataset, partition, version="v1", code_version="abc1")
    _, token = api_key_create(
        team=TeamFactory(slug="analytics"), name="reader", scopes=[ApiKey.Scope.READ]
    )

    stop = threading.Event()
    seen: list[list[Observation]] = [[] for _ in range(READERS)]
    failures: list[BaseException] = []
    threads = [
        threading.Thread(
            target=_reader, args=(token, dataset.pk, stop, seen[i], failures), daemon=True
        )
        for i in range(READERS)
    ]
    for thread in threads:
        thread.start()
    try:
        _wait_for(3, seen)
        restatement = restatements.restatement_open(
            actor=actor,
            dataset=dataset,
            version="v2",
            first_partition=KEYS[0],
            last_partition=KEYS[-1],
            code_version="def2",
            now=NOW,
        )
        for partition in KEYS:  # staged while the readers read
            assert (
                _publish(actor, dataset, partition, restatement=restatement.pk).status_code == 201
            )
        staged_by = len(seen[0])
        _wait_for(staged_by + 3, [seen[0]])

        with transaction.atomic():
            restatements.restatement_promote(actor=actor, restatement=restatement, now=NOW)
            promoted_uncommitted = time.monotonic()
            time.sleep(HOLD_SECONDS)  # readers keep reading the uncommitted promotion
            commit_started = time.monotonic()
        committed = time.monotonic()
        counts = [len(s) for s in seen]
        _wait_for(max(counts) + 6, seen)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a reader hung"
    assert not failures, failures

    assert Restatement.objects.get().state == Restatement.State.PROMOTED
    observations = [o for s in seen for o in s]
    assert all(o.versions in ({"v1"}, {"v2"}) for o in observations), "a mixture was seen"
    before = [o for o in observations if o.finished < commit_started]
    after = [o for o in observations if o.started > committed]
    held = [o for o in before if o.started > promoted_uncommitted]
    assert before and after and held
    assert all(o.versions == {"v1"} for o in before)
    assert all(o.versions == {"v2"} for o in after)
    assert {o.kind for o in after} == {"list", "latest", "detail"}
    for reader in seen:  # never back to old once new was seen
        first_new = next((i for i, o in enumerate(reader) if o.versions == {"v2"}), len(reader))
        assert all(o.versions == {"v2"} for o in reader[first_new:])
