"""Set-based batch deletion (``pruning.cascade``) on PostgreSQL, with Django's deletion
collector as the oracle: the same rows deleted, the same columns set to NULL, the same
counts; and the cases it leaves to the collector."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, router, transaction
from django.db.models.signals import pre_delete
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.models import (
    Delivery,
    DeliveryAttempt,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    SchemaObservation,
    Team,
)
from pruning import cascade, engine
from tests.catalog.factories import DatasetFactory, EndpointFactory
from watchdog.models import Channel, Incident, Monitor, Page, PageGroup

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


def _state() -> dict[str, set]:
    """Every row the deletions below can reach, with the columns they can change."""
    return {
        "notifications": set(Notification.objects.values_list("pk", flat=True)),
        "deliveries": set(Delivery.objects.values_list("pk", "notification_id")),
        "attempts": set(DeliveryAttempt.objects.values_list("pk", "delivery_id")),
        "events": set(ReadinessEvent.objects.values_list("pk", flat=True)),
        "observations": set(SchemaObservation.objects.values_list("pk", "readiness_event_id")),
    }


def _both_ways(model, ids: list, *, state=None, alias: str = "default") -> tuple[tuple, tuple]:
    """(counts, state) after deleting ``ids`` set-based, then the same through the
    collector; each in a savepoint rolled back after."""
    state = state or _state
    results = []
    for set_based in (True, False):
        savepoint = transaction.savepoint(using=alias)
        if set_based:
            counts = dict(cascade.delete(model, ids, alias=alias))
        else:
            _, per_model = model._base_manager.using(alias).filter(pk__in=ids).delete()
            counts = {label: n for label, n in per_model.items() if n}
        results.append((counts, state()))
        transaction.savepoint_rollback(savepoint, using=alias)
    return results[0], results[1]


def _same_for_any_subset(model, *, state=None, alias: str = "default") -> None:
    every = sorted(model._base_manager.using(alias).values_list("pk", flat=True))
    assert every
    absent = uuid.uuid4() if isinstance(every[0], uuid.UUID) else max(every) + 1_000

    @settings(max_examples=25, deadline=None, derandomize=True)
    @given(st.lists(st.sampled_from([*every, absent]), unique=True))
    def same(ids):
        fast, oracle = _both_ways(model, ids, state=state, alias=alias)
        assert fast[1] == oracle[1]  # the rows left, with their columns
        assert fast[0] == oracle[0]  # the counts

    same()


@pytest.fixture
def history():
    """Notifications with 0-3 deliveries of 0-3 attempts each; readiness events, some
    named by a schema observation (SET_NULL)."""
    endpoints = [EndpointFactory() for _ in range(3)]
    for n in range(8):
        notification = Notification.objects.create(
            type="partition.ready", dedup_key=str(uuid.uuid4()), payload={}
        )
        for endpoint in endpoints[: n % 4]:
            delivery = Delivery.objects.create(
                notification=notification, endpoint=endpoint, next_attempt_at=NOW
            )
            for number in range(1, (n + endpoint.pk) % 4 + 1):
                DeliveryAttempt.objects.create(
                    delivery=delivery, number=number, started_at=NOW, duration_ms=5
                )
    dataset = DatasetFactory()
    for n in range(6):
        partition = Partition.objects.create(dataset=dataset, key=f"2025-01-0{n + 1}")
        revision = PartitionRevision.objects.create(partition=partition, version="v1")
        event = ReadinessEvent.objects.create(
            dataset=dataset, partition=partition, revision=revision, state="pending"
        )
        for _ in range(n % 3):
            SchemaObservation.objects.create(
                dataset=dataset,
                fingerprint=uuid.uuid4().hex,
                fields=[],
                observed_at=NOW,
                last_seen_at=NOW,
                source="readiness",
                readiness_event=event,
            )


@pytest.mark.parametrize("model", [Notification, Delivery, ReadinessEvent])
def test_deletes_what_the_collector_deletes_for_any_subset(history, model):
    _same_for_any_subset(model)


def _watchdog_state() -> dict[str, set]:
    return {
        "incidents": set(
            Incident.objects.values_list("pk", "part_of_id", "held_under_id", "held_via_id")
        ),
        "pages": set(Page.objects.values_list("pk", "incident_id", "group_id")),
        "groups": set(PageGroup.objects.values_list("pk", flat=True)),
    }


@pytest.mark.parametrize("model", [Incident, PageGroup])
def test_watchdog_incidents_and_groups_match_the_collector_self_references_included(model):
    monitor = Monitor.objects.create(name="m")
    channel = Channel.objects.create(name="c", kind="pagerduty", target="R" * 32)
    groups = [
        PageGroup.objects.create(channel=channel, summary="g", opened_at=NOW) for _ in range(3)
    ]
    incidents: list[Incident] = []
    for n in range(9):
        earlier = incidents[n // 2] if incidents else None
        incident = Incident.objects.create(
            monitor=monitor,
            deadline_at=NOW + timedelta(minutes=n),  # one incident per deadline
            partition=f"p{n}",
            summary="x",
            opened_at=NOW,
            part_of=earlier if n % 3 == 1 else None,
            held_under=earlier if n % 3 == 2 else None,
            held_via=earlier if n % 2 else None,
        )
        incidents.append(incident)
        for action in ("trigger", "resolve")[: n % 3]:
            Page.objects.create(
                incident=incident,
                group=groups[n % 3] if n % 2 else None,
                channel=channel,
                action=action,
                next_attempt_at=NOW,
            )

    _same_for_any_subset(model, state=_watchdog_state, alias=router.db_for_write(model))


def test_a_two_level_cascade_goes_children_first_and_counts_each_table(history):
    notification = (
        Notification.objects.filter(deliveries__attempt_log__isnull=False).order_by("pk").first()
    )
    deliveries = set(notification.deliveries.values_list("pk", flat=True))
    attempts = DeliveryAttempt.objects.filter(delivery__in=deliveries).count()

    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # an order error would show here
    counts = cascade.delete(Notification, [notification.pk], alias="default")

    assert attempts > 0
    assert counts == {
        "catalog.Notification": 1,
        "catalog.Delivery": len(deliveries),
        "catalog.DeliveryAttempt": attempts,
    }
    assert not Delivery.objects.filter(pk__in=deliveries).exists()


def test_every_retention_rule_is_deleted_set_based_on_postgresql():
    for rule in engine.rules():
        assert cascade.plannable(rule.model, rule.alias()), rule.table


def test_protect_and_delete_signals_are_left_to_the_collector():
    assert cascade.plan(Team) is None  # a dataset's owner is PROTECT
    assert cascade.plan(Delivery) is not None

    def listener(**kwargs):
        pass

    # A receiver connected at any time is seen, on the model or on one its deletion reaches.
    pre_delete.connect(listener, sender=DeliveryAttempt)
    try:
        assert cascade.plan(Delivery) is None
        assert cascade.plan(Notification) is None
        with pytest.raises(ValueError, match="set-based"):
            cascade.delete(Delivery, [1], alias="default")
    finally:
        pre_delete.disconnect(listener, sender=DeliveryAttempt)
    assert cascade.plan(Delivery) is not None
