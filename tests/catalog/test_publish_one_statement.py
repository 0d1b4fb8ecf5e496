"""On PostgreSQL a publish writes a new revision and everything it owes in one statement
(``_create_partition_with_revision``, ``_insert_revision_with_outbox``). The rows must be
those of the statement-by-statement path SQLite takes, which these tests run on
PostgreSQL too by turning ``_writes_in_one_statement`` off."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from catalog import errors
from catalog.actors import Actor
from catalog.models import (
    ApiKey,
    Dataset,
    Delivery,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    Subscription,
)
from catalog.services import one_statement, publish_targets
from catalog.services.publishing import readiness_found, readiness_publish
from catalog.services.teams import api_key_create
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
ONE_STATEMENT = "2026-11-27"  # partition published through the one-statement writes
ONE_BY_ONE = "2026-11-28"  # the same publishes, statement by statement


@pytest.fixture
def dataset(team):
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")
    SubscriptionFactory(dataset=dataset)  # everything
    SubscriptionFactory(dataset=dataset, event_types=["partition.ready"])
    SubscriptionFactory(dataset=dataset, partition_pattern="2026-11-2*")
    SubscriptionFactory(dataset=dataset, partition_pattern="2025-*")  # never these keys
    SubscriptionFactory(dataset=dataset, endpoint=None)  # nowhere to deliver
    return dataset


@pytest.fixture
def actor(team) -> Actor:
    key, _ = api_key_create(team=team, name="publisher", scopes=[ApiKey.Scope.PUBLISH])
    return Actor(team=team, api_key=key)


def _scenario(actor: Actor, dataset, key: str) -> list[tuple[int, dict[str, Any]]]:
    """Create, restate, fail a newer version, repeat: every kind of write a publish does."""
    results = []
    for step, (version, state) in enumerate(
        [(None, "ready"), ("v2", "ready"), ("v3", "failed"), ("v2", "ready"), ("v3", "ready")]
    ):
        result = readiness_publish(
            actor=actor,
            namespace="s3://lake",
            name="raw/orders",
            partition=key,
            version=version,
            state=state,
            manifest={"expected_files": step} if step % 2 else None,
            metadata={"step": step},
            code_version=f"c{step}",
            now=NOW + timedelta(minutes=step),
        )
        body = {k: v for k, v in result.body.items() if k not in ("partition", "event_id")}
        body["logical_start"] = body["logical_start"][10:]  # the time of day, not the date
        body["logical_end"] = body["logical_end"][10:]
        results.append((result.status_code, body))
    return results


def _rows(dataset, key: str) -> dict[str, Any]:
    """The partition's rows, without what differs by key or by id."""
    part = Partition.objects.get(dataset=dataset, key=key)
    events = list(ReadinessEvent.objects.filter(partition=part).order_by("id"))
    notifications = []
    for event in events:
        notification = Notification.objects.get(dedup_key=f"readiness-event:{event.pk}")
        payload = dict(notification.payload)
        assert payload.pop("id") == str(notification.id)
        data = dict(payload.pop("data"))
        assert (data.pop("partition"), data.pop("logical_start")[:10]) == (key, key)
        data.pop("logical_end")
        deliveries = sorted(
            (d.endpoint_id, d.state, d.attempts, d.next_attempt_at, d.claim_token)
            for d in Delivery.objects.filter(notification=notification)
        )
        notifications.append(
            (notification.type, notification.dataset_id, payload, data, deliveries)
        )
    return {
        "partition": (part.start_at.time(), part.end_at - part.start_at),
        "current": (part.current_revision.version, part.current_revision.state),
        "revisions": [
            (
                r.version,
                r.state,
                r.manifest,
                r.metadata,
                r.code_version,
                r.detected_by,
                r.ready_at,
            )
            for r in PartitionRevision.objects.filter(partition=part).order_by("id")
        ],
        "events": [
            (
                e.revision.version,
                e.state,
                e.source,
                e.published_by_id,
                e.api_key_id,
                e.restated_version,
                e.payload,
                e.dataset_id,
            )
            for e in events
        ],
        "notifications": notifications,
    }


def test_one_statement_writes_the_rows_the_statement_by_statement_path_writes(
    actor, dataset, monkeypatch
):
    fast = _scenario(actor, dataset, ONE_STATEMENT)
    monkeypatch.setattr(publish_targets, "writes_in_one_statement", lambda: False)
    slow = _scenario(actor, dataset, ONE_BY_ONE)

    assert [status for status, _ in fast] == [201, 201, 201, 200, 201]
    assert fast == slow
    assert _rows(dataset, ONE_STATEMENT) == _rows(dataset, ONE_BY_ONE)
    # Each event was told to the subscribers whose filters let it through.
    notifications = _rows(dataset, ONE_STATEMENT)["notifications"]
    assert [n[0] for n in notifications] == [
        "partition.ready",
        "partition.restated",
        "partition.failed",
        "partition.restated",
    ]
    assert [len(n[4]) for n in notifications] == [3, 2, 2, 2]


def test_a_poll_find_writes_the_same_rows_either_way(dataset, monkeypatch):
    found = {"files": 3, "reason": "manifest complete"}
    manifest = {"expected_files": 3}
    assert readiness_found(
        dataset=dataset,
        partition=ONE_STATEMENT,
        manifest=manifest,
        found=found,
        missed_event=True,
        now=NOW,
    )
    monkeypatch.setattr(publish_targets, "writes_in_one_statement", lambda: False)
    assert readiness_found(
        dataset=dataset,
        partition=ONE_BY_ONE,
        manifest=manifest,
        found=found,
        missed_event=True,
        now=NOW,
    )

    rows = _rows(dataset, ONE_STATEMENT)
    assert rows == _rows(dataset, ONE_BY_ONE)
    assert rows["events"][0][2] == ReadinessEvent.Source.POLL
    assert rows["notifications"][0][3]["missed_event"] is True


def test_a_new_partition_takes_two_statements_and_a_repeat_two(
    actor, dataset, django_assert_num_queries
):
    def publish():
        return readiness_publish(
            actor=actor, namespace="s3://lake", name="raw/orders", partition=ONE_STATEMENT, now=NOW
        )

    # The dataset with its subscribers, then the one statement, which commits alone (no
    # transaction around it; here only the test's own).
    with django_assert_num_queries(2):
        assert publish().status_code == 201
    # The kept target's statement (current, but the partition exists: nothing written),
    # then the current revision, read without a lock.
    with django_assert_num_queries(2):
        assert publish().status_code == 200


def test_a_partition_created_meanwhile_is_left_to_the_lock(actor, dataset, monkeypatch):
    """The dataset's row said the partition was missing, but a concurrent publish created
    it before the one statement ran: that statement writes nothing, the lock path goes on."""
    readiness_publish(
        actor=actor, namespace="s3://lake", name="raw/orders", partition=ONE_STATEMENT, now=NOW
    )
    read = publish_targets.publish_target
    monkeypatch.setattr(
        publish_targets,
        "publish_target",
        lambda *args: publish_targets.PublishTarget(
            read(*args).dataset, False, read(*args).subscribers
        ),
    )

    result = readiness_publish(
        actor=actor,
        namespace="s3://lake",
        name="raw/orders",
        partition=ONE_STATEMENT,
        version="v2",
        now=NOW,
    )

    assert (result.status_code, result.body["current_version"]) == (201, "v2")
    assert Partition.objects.filter(dataset=dataset).count() == 1
    assert list(
        PartitionRevision.objects.filter(partition__dataset=dataset)
        .order_by("id")
        .values_list("version", flat=True)
    ) == ["", "v2"]


# --- the kept publish target ---------------------------------------------------------


def _publish_new(actor: Actor, key: str):
    return readiness_publish(
        actor=actor, namespace="s3://lake", name="raw/orders", partition=key, now=NOW
    )


def _delivered(key: str) -> set[int]:
    return set(
        Delivery.objects.filter(notification__payload__data__partition=key).values_list(
            "endpoint_id", flat=True
        )
    )


def test_a_kept_target_makes_a_new_partition_one_statement(
    actor, dataset, django_assert_num_queries
):
    _publish_new(actor, "2026-11-20")  # reads the target, and keeps it

    with django_assert_num_queries(1):
        assert _publish_new(actor, "2026-11-21").status_code == 201

    assert _delivered("2026-11-21") == _delivered("2026-11-20")
    assert len(_delivered("2026-11-21")) == 3


def test_a_subscriber_added_since_the_target_was_kept_is_told(
    actor, dataset, django_assert_num_queries
):
    _publish_new(actor, "2026-11-20")
    late = SubscriptionFactory(dataset=dataset)

    # The kept target's statement finds it out of date and writes nothing; the target is
    # read again and the statement tried again.
    with django_assert_num_queries(3):
        assert _publish_new(actor, "2026-11-21").status_code == 201

    assert _delivered("2026-11-21") == _delivered("2026-11-20") | {late.endpoint_id}
    with django_assert_num_queries(1):  # kept again, as read
        _publish_new(actor, "2026-11-22")
    assert late.endpoint_id in _delivered("2026-11-22")


def test_a_filter_changed_since_the_target_was_kept_is_honoured(actor, dataset):
    _publish_new(actor, "2026-11-20")
    changed = dataset.subscriptions.get(event_types=["partition.ready"])
    Subscription.objects.filter(pk=changed.pk).update(event_types=["partition.failed"])

    _publish_new(actor, "2026-11-21")

    assert changed.endpoint_id in _delivered("2026-11-20")
    assert changed.endpoint_id not in _delivered("2026-11-21")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"lifecycle": "retired"}, errors.DatasetRetired),
        ({"owner": "other"}, errors.PublishNotAllowed),
    ],
)
def test_a_dataset_changed_since_the_target_was_kept_is_judged_as_it_is(
    actor, dataset, change, error
):
    _publish_new(actor, "2026-11-20")
    if change.get("owner"):
        change = {"owner": TeamFactory(slug="other")}
    Dataset.objects.filter(pk=dataset.pk).update(**change)

    with pytest.raises(error):
        _publish_new(actor, "2026-11-21")

    assert not Partition.objects.filter(key="2026-11-21").exists()


@pytest.mark.parametrize("version", [None, "v1"])
def test_a_repeat_is_answered_as_the_transactional_way_answers_it(
    actor, dataset, monkeypatch, django_assert_num_queries, version
):
    publish = functools.partial(
        readiness_publish,
        actor=actor,
        namespace="s3://lake",
        name="raw/orders",
        partition="2026-11-20",
        version=version,
        now=NOW,
    )
    publish()
    with django_assert_num_queries(2):
        quick = publish(now=NOW + timedelta(hours=1))
    monkeypatch.setattr(one_statement, "_publish_repeat", lambda *args, **kwargs: None)
    slow = publish(now=NOW + timedelta(hours=1))

    assert quick == slow
    assert quick.status_code == 200
    assert quick.body["event_id"] == ReadinessEvent.objects.get(partition__key="2026-11-20").pk
    assert ReadinessEvent.objects.filter(partition__key="2026-11-20").count() == 1


@pytest.mark.parametrize(
    ("first", "then", "outcome"),
    [
        ({}, {"state": "failed"}, errors.RevisionAlreadyReady),
        ({"state": "failed"}, {}, 201),  # failed, then ready: a new event
        ({"version": "v1"}, {"version": "v2"}, 201),  # a restatement
        ({"version": "v2"}, {"version": "v1"}, 201),  # another version, ready: current
    ],
)
def test_anything_but_a_plain_repeat_takes_the_transactional_way(
    actor, dataset, first, then, outcome
):
    publish = functools.partial(
        readiness_publish, actor=actor, namespace="s3://lake", name="raw/orders", now=NOW
    )
    publish(partition="2026-11-20", **first)
    if isinstance(outcome, int):
        assert publish(partition="2026-11-20", **then).status_code == outcome
        assert ReadinessEvent.objects.filter(partition__key="2026-11-20").count() == 2
    else:
        with pytest.raises(outcome):
            publish(partition="2026-11-20", **then)


def test_the_kept_targets_are_bounded(actor, team, monkeypatch):
    monkeypatch.setattr(publish_targets, "PUBLISH_TARGETS_KEPT", 2)
    for name in ("a", "b", "c"):
        DatasetFactory(owner=team, namespace="s3://lake", name=name)
        readiness_publish(
            actor=actor, namespace="s3://lake", name=name, partition="2026-11-20", now=NOW
        )

    assert list(publish_targets._publish_targets) == [("s3://lake", "b"), ("s3://lake", "c")]
