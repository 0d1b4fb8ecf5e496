"""The catalog's and lineage's retention rules on PostgreSQL: what each deletes at its
boundary instant, what it always keeps, batches, ``manage.py prune`` and its dry run."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.db import OperationalError, connection

from catalog.models import (
    Delivery,
    DeliveryAttempt,
    EndpointSuccessHour,
    IdempotencyRecord,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    RunConflict,
    SchemaObservation,
)
from lineage.models import LineageEvent
from pruning import engine
from tests.catalog.factories import DatasetFactory, EndpointFactory, TeamFactory

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)


def _prune(table: str, *, batch_size: int = 1000) -> engine.Outcome:
    [outcome] = engine.prune(engine.rules([table]), now=NOW, batch_size=batch_size)
    return outcome


def _notification(created_at: datetime = NOW, type: str = "partition.ready") -> Notification:
    with time_machine.travel(created_at, tick=False):
        return Notification.objects.create(type=type, dedup_key=str(uuid.uuid4()), payload={})


def _delivery(state: str, finished_at: datetime | None, *, created_at: datetime = NOW):
    with time_machine.travel(created_at, tick=False):
        delivery = Delivery.objects.create(
            notification=_notification(created_at),
            endpoint=EndpointFactory(),
            state=state,
            next_attempt_at=created_at,
            finished_at=finished_at,
        )
    DeliveryAttempt.objects.create(
        delivery=delivery, number=1, started_at=created_at, duration_ms=5, decision="done"
    )
    return delivery


def test_deliveries_go_at_their_window_and_work_still_to_send_stays():
    month, quarter = NOW - timedelta(days=30), NOW - timedelta(days=90)
    old = NOW - timedelta(days=400)
    succeeded_out = _delivery("succeeded", month - TICK)
    succeeded_in = _delivery("succeeded", month)
    dead_out = _delivery("dead", quarter - TICK)
    rejected_in = _delivery("rejected", quarter)  # still replayable
    dead_in = _delivery("dead", month - TICK)
    pending = _delivery("pending", None, created_at=old)
    retrying = _delivery("retrying", None, created_at=old)

    outcome = _prune("deliveries")

    assert outcome.deleted == 2
    assert outcome.cascaded["catalog.DeliveryAttempt"] == 2
    left = set(Delivery.objects.values_list("pk", flat=True))
    assert left == {d.pk for d in (succeeded_in, rejected_in, dead_in, pending, retrying)}
    assert not left & {succeeded_out.pk, dead_out.pk}
    assert not DeliveryAttempt.objects.filter(delivery_id=succeeded_out.pk).exists()
    assert DeliveryAttempt.objects.filter(delivery_id=pending.pk).exists()
    assert _prune("deliveries").deleted == 0  # idempotent


def test_a_dead_letter_replayed_is_not_pruned():
    dead = _delivery("dead", NOW - timedelta(days=365))
    Delivery.objects.filter(pk=dead.pk).update(state="pending", finished_at=None)
    assert _prune("deliveries").deleted == 0


def test_notifications_go_once_no_delivery_names_them():
    quarter = NOW - timedelta(days=90)
    orphan_out = _notification(quarter - TICK)
    orphan_in = _notification(quarter)
    named = _delivery("dead", NOW - timedelta(days=1), created_at=quarter - TICK).notification
    monitor = _notification(quarter - timedelta(days=1), type="watchdog.monitor")

    assert _prune("notifications").deleted == 1

    left = set(Notification.objects.values_list("pk", flat=True))
    assert orphan_out.pk not in left
    assert {orphan_in.pk, named.pk, monitor.pk} <= left


def test_one_run_deletes_the_notifications_its_deliveries_freed():
    """The notifications rule waits for the deliveries rule: its first batch would
    otherwise find only what one batch of deliveries freed, come back short and end the
    run, leaving the quarter's notifications to later runs."""
    old = NOW - timedelta(days=120)
    for _ in range(5):
        _delivery("succeeded", old + timedelta(hours=1), created_at=old)
    deliveries, notifications = engine.prune(
        engine.rules(["deliveries", "notifications"]), now=NOW, batch_size=2
    )
    assert (deliveries.deleted, notifications.deleted) == (5, 5)
    assert not Notification.objects.exists()


def test_notifications_are_pruned_oldest_first_along_their_index():
    """Notification ids are random: batches walk notification_created from the oldest,
    not the primary key (which would step over every notification kept, each batch)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for days in range(91, 95):
        _notification(NOW - timedelta(days=days))
    with CaptureQueriesContext(connection) as queries:
        _prune("notifications", batch_size=2)
    pick = next(q["sql"] for q in queries if "FOR UPDATE" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_notification")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + pick)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "notification_created" in plan, plan
    assert "Sort" not in plan, plan


def test_idempotency_records_go_when_their_window_ends():
    team = TeamFactory()
    ended = IdempotencyRecord.objects.create(
        team=team, key="a", fingerprint="f", expires_at=NOW - TICK
    )
    ending = IdempotencyRecord.objects.create(team=team, key="b", fingerprint="f", expires_at=NOW)
    assert _prune("idempotency_records").deleted == 1
    assert list(IdempotencyRecord.objects.values_list("pk", flat=True)) == [ending.pk]
    assert not IdempotencyRecord.objects.filter(pk=ended.pk).exists()


def _success_hour(hour: datetime, endpoint=None) -> EndpointSuccessHour:
    return EndpointSuccessHour.objects.create(
        endpoint=endpoint or EndpointFactory(), hour=hour, succeeded=3
    )


def test_endpoint_success_hours_go_35_days_after_their_hour_began():
    cutoff = NOW - timedelta(days=35)  # NOW is on the hour
    endpoint = EndpointFactory()
    old = _success_hour(cutoff - timedelta(hours=1), endpoint)
    kept = [_success_hour(cutoff, endpoint), _success_hour(NOW, endpoint)]
    assert _prune("endpoint_success_hours").deleted == 1
    assert not EndpointSuccessHour.objects.filter(pk=old.pk).exists()
    assert set(EndpointSuccessHour.objects.values_list("pk", flat=True)) == {r.pk for r in kept}
    assert _prune("endpoint_success_hours").deleted == 0  # idempotent


def test_endpoint_success_hours_of_the_health_window_stay_however_short_the_setting(settings):
    settings.TIDEMARK_RETENTION = {**settings.TIDEMARK_RETENTION, "endpoint_success_hours_days": 0}
    endpoint = EndpointFactory()
    window = [_success_hour(NOW - timedelta(hours=h), endpoint) for h in (0, 1, 24)]
    _success_hour(NOW - timedelta(hours=25), endpoint)  # before the window (06:00 - 24 h)
    assert _prune("endpoint_success_hours").deleted == 1
    assert set(EndpointSuccessHour.objects.values_list("pk", flat=True)) == {r.pk for r in window}


def test_endpoint_success_hours_are_pruned_oldest_first_along_their_index():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    endpoint = EndpointFactory()
    for days in range(36, 40):
        _success_hour(NOW - timedelta(days=days), endpoint)
    with CaptureQueriesContext(connection) as queries:
        assert _prune("endpoint_success_hours", batch_size=2).deleted == 4
    pick = next(q["sql"] for q in queries if "FOR UPDATE" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_endpointsuccesshour")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + pick)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "endpoint_success_hour_by_hour" in plan, plan


def _event(revision: PartitionRevision, received_at: datetime, state: str = "ready"):
    with time_machine.travel(received_at, tick=False):
        return ReadinessEvent.objects.create(
            dataset=revision.partition.dataset,
            partition=revision.partition,
            revision=revision,
            state=state,
        )


def test_readiness_events_keep_the_current_revisions_and_what_schemas_name():
    dataset = DatasetFactory()
    partition = Partition.objects.create(dataset=dataset, key="2025-01-01")
    v1 = PartitionRevision.objects.create(partition=partition, version="v1", state="pending")
    v2 = PartitionRevision.objects.create(
        partition=partition, version="v2", state="ready", ready_at=NOW
    )
    Partition.objects.filter(pk=partition.pk).update(current_revision=v2)
    cutoff = NOW - timedelta(days=400)
    superseded_out = _event(v1, cutoff - TICK, state="pending")
    superseded_in = _event(v1, cutoff, state="failed")
    current_old = _event(v2, cutoff - timedelta(days=30))
    other = Partition.objects.create(dataset=dataset, key="2025-01-02")
    other_v1 = PartitionRevision.objects.create(partition=other, version="v1", state="failed")
    schema_named = _event(other_v1, cutoff - timedelta(days=30), state="failed")
    SchemaObservation.objects.create(
        dataset=dataset,
        fingerprint="x",
        fields=[],
        observed_at=NOW,
        last_seen_at=NOW,
        source="readiness",
        readiness_event=schema_named,
    )

    assert _prune("readiness_events").deleted == 1

    left = set(ReadinessEvent.objects.values_list("pk", flat=True))
    assert superseded_out.pk not in left
    assert {superseded_in.pk, current_old.pk, schema_named.pk} <= left


def _lineage_event(team, state: str, processed_at: datetime | None) -> LineageEvent:
    return LineageEvent.objects.create(
        team=team,
        kind="run",
        event_time=NOW,
        payload={},
        fingerprint=uuid.uuid4().hex,
        next_attempt_at=NOW,
        state=state,
        processed_at=processed_at,
    )


def test_processed_lineage_events_go_after_their_window_pending_and_failed_stay():
    team = TeamFactory()
    month = NOW - timedelta(days=30)
    out = _lineage_event(team, "processed", month - TICK)
    at_boundary = _lineage_event(team, "processed", month)
    pending = _lineage_event(team, "pending", None)
    failed = _lineage_event(team, "failed", month - timedelta(days=300))
    evidence = _lineage_event(team, "processed", month - timedelta(days=300))
    dataset = DatasetFactory(owner=team)
    SchemaObservation.objects.create(
        dataset=dataset,
        fingerprint="x",
        fields=[],
        observed_at=NOW,
        last_seen_at=NOW,
        source="lineage",
        lineage_event_id=evidence.pk,
    )

    assert _prune("lineage_events").deleted == 1

    left = set(LineageEvent.objects.values_list("pk", flat=True))
    assert out.pk not in left
    assert {at_boundary.pk, pending.pk, failed.pk, evidence.pk} <= left


def test_a_run_conflict_keeps_its_event():
    from catalog.models import Job

    team = TeamFactory()
    event = _lineage_event(team, "processed", NOW - timedelta(days=365))
    job = Job.objects.create(
        namespace="ns", name="job", team=team, first_seen_at=NOW, last_seen_at=NOW
    )
    RunConflict.objects.create(
        run_id=uuid.uuid4(),
        run_job=job,
        run_team=team,
        run_verified=True,
        event_id=event.pk,
        event_job=job,
        event_team=team,
        event_verified=False,
        event_time=NOW,
        detected_at=NOW,
        reason=RunConflict.Reason.values[0],
    )
    assert _prune("lineage_events").deleted == 0


def test_pruning_runs_in_batches_of_the_size_asked():
    for _ in range(7):
        _delivery("succeeded", NOW - timedelta(days=31))
    outcome = _prune("deliveries", batch_size=3)
    assert (outcome.deleted, outcome.batches, outcome.more) == (7, 3, False)
    assert not Delivery.objects.exists()


def test_a_budget_stops_a_run_and_the_next_one_resumes():
    for _ in range(4):
        _delivery("succeeded", NOW - timedelta(days=31))
    [first] = engine.prune(engine.rules(["deliveries"]), now=NOW, batch_size=1, budget_seconds=0)
    assert (first.deleted, first.more) == (0, True)
    assert Delivery.objects.count() == 4
    assert _prune("deliveries", batch_size=1).deleted == 4


def test_prune_command_dry_run_counts_and_deletes_nothing():
    for _ in range(3):
        _delivery("succeeded", NOW - timedelta(days=31))
    _notification(NOW - timedelta(days=91))
    out = StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("prune", "--dry-run", stdout=out)
    lines = out.getvalue().splitlines()
    assert "deliveries: would delete 3" in lines
    assert "notifications: would delete 1" in lines
    assert "lineage_events: would delete 0" in lines
    assert Delivery.objects.count() == 3

    out = StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("prune", "--only", "deliveries", "--batch-size", "2", stdout=out)
    assert out.getvalue().splitlines() == [
        "deliveries: deleted 3 (with 3 catalog.DeliveryAttempt) in 2 batch(es)"
    ]
    assert not Delivery.objects.exists()
    assert Notification.objects.count() == 4  # --only: the notifications wait


def test_prune_command_names_the_tables_when_one_is_unknown():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"no retention rule for pongs.*deliveries"):
        call_command("prune", "--only", "pongs")


def test_prune_command_on_an_unmigrated_database_says_to_migrate():
    from django.core.management.base import CommandError

    table = Delivery._meta.db_table
    with connection.cursor() as cursor:  # as if its migration had not run (rolled back)
        cursor.execute(f"ALTER TABLE {table} RENAME TO not_migrated")
    with pytest.raises(CommandError, match=f"no table {table}: run manage.py migrate first"):
        call_command("prune", "--dry-run")


@pytest.mark.parametrize(
    ("sqlstate", "gives_way"), [("40P01", True), ("55P03", True), ("57014", False)]
)
def test_a_batch_rolled_back_by_a_deadlock_gives_way_and_the_next_run_prunes(sqlstate, gives_way):
    """PostgreSQL ends one side of a deadlock (two prunes nulling each other's locked
    rows) with 40P01, as it ends a lock wait past the timeout with 55P03: the batch rolled
    back whole, the run goes on and the next one prunes. Any other error fails the run."""
    old = _delivery("succeeded", NOW - timedelta(days=60), created_at=NOW - timedelta(days=61))
    table = Delivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER refuse BEFORE DELETE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.refuse()"
        )
    if gives_way:
        assert _prune("deliveries").deleted == 0
    else:
        with pytest.raises(OperationalError):
            _prune("deliveries")
    assert Delivery.objects.filter(pk=old.pk).exists()  # nothing half-deleted
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TRIGGER refuse ON {table}")

    assert _prune("deliveries").deleted == 1
    assert not Delivery.objects.filter(pk=old.pk).exists()
