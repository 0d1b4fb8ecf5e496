"""Schema observations from readiness publishes, and unannounced breaking changes: which
notice covers which date, telling the owner once, the timeline under late events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from catalog import change_notices, schema_changes, selectors
from catalog.actors import Actor
from catalog.errors import SchemaInvalid
from catalog.models import (
    ChangeNotice,
    Delivery,
    Notification,
    SchemaChange,
    SchemaObservation,
)
from catalog.notices import render_text
from catalog.services import publishing
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 1, 6, 0, tzinfo=UTC)
V1 = [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "numeric"}]
DROPPED = [{"name": "id", "type": "bigint"}]
RETYPED = [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "text"}]
ADDED = [*V1, {"name": "currency", "type": "text"}]


@pytest.fixture
def owner(db):
    return TeamFactory(slug="shop")


@pytest.fixture
def dataset(owner):
    return DatasetFactory(owner=owner, namespace="s3://lake", name="sales/orders")


def publish(owner, dataset, fields, *, at: datetime, partition: str | None = None, **kw):
    metadata = kw.pop("metadata", None) or {"schema": {"fields": fields}}
    return publishing.readiness_publish(
        actor=Actor(team=owner, username="ci"),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=partition or at.date().isoformat(),
        metadata=metadata,
        now=at,
        **kw,
    )


def announce(owner, dataset, *, at: datetime, kind=ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE):
    return change_notices.change_notice_announce(
        actor=Actor(team=owner, username="lead"),
        dataset=dataset,
        kind=kind,
        description="amount goes",
        effective_at=at + timedelta(days=dataset.change_notice_days),
        now=at,
    )


def told() -> list[Notification]:
    return list(Notification.objects.filter(type=Notification.Type.SCHEMA_UNANNOUNCED_CHANGE))


def test_a_published_schema_is_observed_once_and_widened_while_unchanged(owner, dataset):
    result = publish(owner, dataset, V1, at=T0)
    publish(owner, dataset, list(reversed(V1)), at=T0 + timedelta(days=1))  # same columns

    observation = SchemaObservation.objects.get()
    assert observation.fields == V1
    assert observation.source == SchemaObservation.Source.READINESS
    assert observation.readiness_event_id == result.body["event_id"]
    assert observation.team == owner
    assert (observation.observed_at, observation.last_seen_at) == (T0, T0 + timedelta(days=1))
    assert not SchemaChange.objects.exists()


def test_a_dropped_column_without_a_notice_is_unannounced_and_told_to_the_owner_once(
    owner, dataset
):
    publish(owner, dataset, V1, at=T0)
    publish(owner, dataset, DROPPED, at=T0 + timedelta(days=1))
    # The same publish again (a retry with another version label) tells nothing more.
    publish(owner, dataset, DROPPED, at=T0 + timedelta(days=1, hours=1), version="v2")

    [change] = selectors.unannounced_schema_changes()
    assert change.removed == ["amount"] and change.retyped == [] and change.covered_by is None
    assert change.observed_at == T0 + timedelta(days=1)
    assert selectors.unannounced_schema_changes(teams=[owner]).count() == 1
    assert selectors.unannounced_schema_changes(teams=[TeamFactory(slug="other")]).count() == 0

    [notification] = told()
    assert notification.dedup_key == f"schema-change:{change.pk}"
    assert notification.payload["data"]["removed"] == ["amount"]
    assert notification.payload["data"]["team"] == "shop"
    delivery = Delivery.objects.get(notification=notification)
    assert delivery.endpoint.url == "mailto:shop@example.com"
    subject, text = render_text(notification.payload)
    assert "unannounced breaking schema change of s3://lake/sales/orders" in subject
    assert "removed: amount" in text


def test_a_retyped_column_is_breaking_and_an_added_one_is_not(owner, dataset):
    publish(owner, dataset, V1, at=T0)
    publish(owner, dataset, ADDED, at=T0 + timedelta(days=1))
    assert SchemaObservation.objects.count() == 2
    assert not SchemaChange.objects.exists() and not told()

    publish(owner, dataset, RETYPED, at=T0 + timedelta(days=2))
    [change] = SchemaChange.objects.all()
    assert change.retyped == [{"name": "amount", "from": "numeric", "to": "text"}]
    assert change.removed == ["currency"]
    assert len(told()) == 1


def test_a_breaking_schema_notice_in_effect_covers_the_change(owner, dataset):
    publish(owner, dataset, V1, at=T0)
    notice = announce(owner, dataset, at=T0)
    publish(owner, dataset, DROPPED, at=notice.effective_at + timedelta(hours=1))

    change = SchemaChange.objects.get()
    assert change.covered_by == notice
    assert not selectors.unannounced_schema_changes().exists()
    assert not told()


@pytest.mark.parametrize(
    ("kind", "seen_after_effective"),
    [
        pytest.param(ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE, -timedelta(hours=1), id="early"),
        pytest.param(ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE, timedelta(days=8), id="stale"),
        pytest.param(ChangeNotice.Kind.LOCATION_MOVE, timedelta(hours=1), id="other-kind"),
        pytest.param(ChangeNotice.Kind.RETIREMENT, timedelta(hours=1), id="retirement"),
    ],
)
def test_a_notice_does_not_cover_a_change_seen_before_it_took_effect_long_after_or_of_another_kind(
    owner, dataset, kind, seen_after_effective
):
    publish(owner, dataset, V1, at=T0)
    notice = announce(owner, dataset, at=T0, kind=kind)
    publish(owner, dataset, DROPPED, at=notice.effective_at + seen_after_effective)

    assert SchemaChange.objects.get().covered_by is None
    assert len(told()) == 1


def test_a_notice_applied_early_covers_from_when_it_took_effect(owner, dataset):
    publish(owner, dataset, V1, at=T0)
    notice = announce(owner, dataset, at=T0)
    took_effect = T0 + timedelta(days=3)
    ChangeNotice.objects.filter(pk=notice.pk).update(
        state=ChangeNotice.State.EFFECTIVE, took_effect_at=took_effect
    )
    publish(owner, dataset, DROPPED, at=took_effect + timedelta(hours=1))
    assert SchemaChange.objects.get().covered_by_id == notice.pk


def test_the_covering_window_is_a_setting(owner, dataset, settings):
    settings.TIDEMARK_SCHEMA_CHANGES = {"notice_covers_days": 30}
    publish(owner, dataset, V1, at=T0)
    notice = announce(owner, dataset, at=T0)
    publish(owner, dataset, DROPPED, at=notice.effective_at + timedelta(days=20))
    assert SchemaChange.objects.get().covered_by == notice


def test_a_late_event_slots_into_the_timeline_and_is_diffed_with_both_neighbours(owner, dataset):
    publish(owner, dataset, V1, at=T0)
    publish(owner, dataset, ADDED, at=T0 + timedelta(days=2))
    # Arrives last, happened in between: V1 -> DROPPED -> ADDED.
    publish(owner, dataset, DROPPED, at=T0 + timedelta(days=1))

    timeline = list(
        SchemaObservation.objects.order_by("observed_at").values_list("fields", flat=True)
    )
    assert timeline == [V1, DROPPED, ADDED]
    [change] = SchemaChange.objects.all()  # DROPPED -> ADDED only adds
    assert change.removed == ["amount"] and change.previous.fields == V1


def test_a_late_event_showing_the_next_schema_earlier_moves_it_back(owner, dataset):
    publish(owner, dataset, V1, at=T0)
    publish(owner, dataset, DROPPED, at=T0 + timedelta(days=2))
    publish(owner, dataset, DROPPED, at=T0 + timedelta(days=1))

    assert SchemaObservation.objects.count() == 2
    assert SchemaObservation.objects.get(fields=DROPPED).observed_at == T0 + timedelta(days=1)
    assert SchemaChange.objects.count() == 1 and len(told()) == 1


def test_a_malformed_published_schema_is_refused_naming_the_field(owner, dataset):
    with pytest.raises(SchemaInvalid) as raised:
        publish(owner, dataset, [{"type": "int"}], at=T0)
    assert [e.field for e in raised.value.errors] == ["metadata.schema.fields.0.name"]
    assert not SchemaObservation.objects.exists()
    assert not dataset.partitions.exists()  # nothing of the publish was written


def test_metadata_schema_that_is_not_an_object_is_plain_metadata(owner, dataset):
    result = publish(owner, dataset, None, at=T0, metadata={"schema": "sales"})
    assert result.status_code == 201
    assert not SchemaObservation.objects.exists()


def test_a_failed_publish_records_no_schema(owner, dataset):
    publish(owner, dataset, V1, at=T0, state="failed")
    assert not SchemaObservation.objects.exists()


def test_sightings_of_unknown_datasets_or_from_strangers_record_nothing(owner, dataset):
    stranger = TeamFactory(slug="stranger")
    args = {"observed_at": T0, "source": "lineage", "now": T0}
    sighting = schema_changes.SchemaSighting(dataset.namespace, dataset.name, V1)
    unknown = schema_changes.SchemaSighting("s3://lake", "nope", V1)
    schema_changes.schema_sightings_record(
        sightings=[sighting, unknown], team=stranger, authorised=False, **args
    )
    assert not SchemaObservation.objects.exists()
    schema_changes.schema_sightings_record(
        sightings=[sighting, unknown], team=owner, authorised=False, **args
    )
    assert SchemaObservation.objects.get().dataset == dataset


@pytest.mark.django_db(transaction=True)
def test_two_workers_seeing_one_change_at_once_record_and_tell_it_once(owner, dataset):
    import threading
    import time

    from django.db import connection, transaction

    publish(owner, dataset, V1, at=T0)
    sighting = schema_changes.SchemaSighting(dataset.namespace, dataset.name, DROPPED)
    inside, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def record(at: datetime, hold: bool) -> None:
        try:
            with transaction.atomic():
                schema_changes.schema_sightings_record(
                    sightings=[sighting],
                    observed_at=at,
                    source=SchemaObservation.Source.LINEAGE,
                    team=owner,
                    authorised=True,
                    now=at,
                )
                if hold:
                    inside.set()
                    release.wait(10)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            connection.close()

    first = threading.Thread(target=record, args=(T0 + timedelta(days=1), True))
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=record, args=(T0 + timedelta(days=1, hours=2), False))
    second.start()
    time.sleep(0.5)
    assert second.is_alive()  # waiting for the dataset's schema lock
    release.set()
    first.join(10)
    second.join(10)
    assert not failures
    assert SchemaObservation.objects.count() == 2
    assert SchemaChange.objects.count() == 1
    assert len(told()) == 1
    latest = SchemaObservation.objects.get(fields=DROPPED)
    assert latest.last_seen_at == T0 + timedelta(days=1, hours=2)
