"""The fallback poll against a real local store (``file://`` in a temp dir)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

import objectstore
from catalog import polling, selectors
from catalog.actors import Actor
from catalog.models import (
    Dataset,
    Delivery,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    StorageGroup,
    StorageSweep,
)
from catalog.services import datasets, publishing
from tests.catalog.factories import SubscriptionFactory
from tests.catalog.polling_helpers import NOW, register, sweep

pytestmark = pytest.mark.usefixtures("frozen_clock")


def put(root, relative: str, body: bytes = b"x") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def publish(team, dataset, key):
    return publishing.readiness_publish(
        actor=Actor(team=team),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=key,
        now=NOW,
    )


def test_a_lost_event_is_found_once_and_told_once(lake, producer, consumer_endpoint):
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)
    put(lake, "sales/orders/dt=2026-11-28/part-0.parquet")
    put(lake, "sales/orders/dt=2026-11-28/_SUCCESS", b"")

    first = sweep(dataset)
    again = sweep(dataset, now=NOW + timedelta(minutes=1))

    assert (first.partitions_found, again.partitions_found) == (1, 0)
    revision = Partition.objects.get(dataset=dataset, key="2026-11-28").current_revision
    assert revision.state == PartitionRevision.State.READY
    assert revision.detected_by == PartitionRevision.DetectedBy.POLL
    event = ReadinessEvent.objects.get(revision=revision)
    assert event.source == ReadinessEvent.Source.POLL
    notification = Notification.objects.get(type=Notification.Type.PARTITION_READY)
    assert notification.payload["data"]["detected_by"] == "poll"
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 1
    # The second sweep is narrow: the latest day is ready, nothing is due, nothing listed
    # (an early 2026-11-29 waits for the hourly sweep of every dataset).
    assert (again.narrow, again.datasets_listed) == (True, 0)
    assert (again.list_calls, again.partitions_checked) == (0, 0)


def test_published_then_found_is_told_once(lake, producer, consumer_endpoint):
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)
    publish(producer, dataset, "2026-11-28")
    put(lake, "sales/orders/dt=2026-11-28/_SUCCESS", b"")

    report = sweep(dataset)

    assert report.partitions_found == 0
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 1


def test_found_then_published_with_a_version_is_not_a_restatement(
    lake, producer, consumer_endpoint
):
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)
    put(lake, "sales/orders/dt=2026-11-28/_SUCCESS", b"")
    sweep(dataset)

    late = publishing.readiness_publish(
        actor=Actor(team=producer),
        namespace=dataset.namespace,
        name=dataset.name,
        partition="2026-11-28",
        version="run-42",
        now=NOW,
    )

    assert late.status_code == 200
    assert late.body["version"] == "run-42"
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 1
    assert not Notification.objects.filter(type=Notification.Type.PARTITION_RESTATED).exists()


def test_a_manifest_partition_is_ready_only_when_every_expected_file_is_there(lake, producer):
    dataset = register(producer, completion_signal=Dataset.CompletionSignal.MANIFEST)
    base = "sales/orders/dt=2026-11-28/"
    put(lake, base + "_manifest.json", json.dumps({"expected_files": 3}).encode())
    put(lake, base + "part-0.parquet")
    put(lake, base + "part-1.parquet")
    put(lake, base + "_SUCCESS", b"")  # bookkeeping files are not data

    first = sweep(dataset)
    partition = Partition.objects.get(dataset=dataset, key="2026-11-28")
    assert first.partitions_found == 0 and first.incomplete == 1
    assert partition.current_revision.state == PartitionRevision.State.PENDING
    assert partition.current_revision.metadata["poll"]["reason"] == "2 of 3 expected files present"

    put(lake, base + "part-2.parquet")
    second = sweep(dataset, now=NOW + timedelta(minutes=1))

    partition.refresh_from_db()
    assert second.partitions_found == 1
    assert partition.current_revision.state == PartitionRevision.State.READY
    assert partition.current_revision.manifest == {"expected_files": 3}


def test_a_manifest_naming_files_needs_those_files_with_those_sizes(lake, producer):
    dataset = register(producer, completion_signal=Dataset.CompletionSignal.MANIFEST)
    base = "sales/orders/dt=2026-11-28/"
    manifest = {"expected_files": 2, "files": [{"name": "a.csv", "size": 3}, "b.csv"]}
    put(lake, base + "_manifest.json", json.dumps(manifest).encode())
    put(lake, base + "a.csv", b"ab")
    put(lake, base + "b.csv")
    assert sweep(dataset).partitions_found == 0

    put(lake, base + "a.csv", b"abc")
    assert sweep(dataset, now=NOW + timedelta(minutes=1)).partitions_found == 1


def test_names_that_are_not_partition_keys_are_ignored(lake, producer):
    dataset = register(producer)
    put(lake, "sales/orders/dt=yesterday/_SUCCESS", b"")
    put(lake, "sales/orders/tmp/_SUCCESS", b"")
    report = sweep(dataset)
    assert report.partitions_found == 0
    assert not Partition.objects.filter(dataset=dataset).exists()


def test_a_partition_from_the_future_in_storage_is_not_recorded(lake, producer):
    """A mistyped path (2027 for 2026) would otherwise become the latest ready partition."""
    dataset = register(producer, completion_signal=Dataset.CompletionSignal.MANIFEST)
    put(lake, "sales/orders/dt=2026-11-28/_SUCCESS", b"")
    put(lake, "sales/orders/dt=2026-11-28/_manifest.json", b'{"expected_files": 0}')
    put(lake, "sales/orders/dt=2027-06-01/_manifest.json", b'{"expected_files": 0}')
    put(lake, "sales/orders/dt=2026-11-30/_manifest.json", b'{"expected_files": 1}')  # pending

    report = sweep(dataset, full=True)

    assert (report.partitions_found, report.partitions_checked, report.incomplete) == (1, 1, 0)
    assert set(Partition.objects.values_list("key", flat=True)) == {"2026-11-28"}
    assert selectors.partition_latest_ready(dataset=dataset, now=NOW).key == "2026-11-28"

    # Its clock-skew allowance: 2026-11-30 starts within five minutes.
    late = datetime(2026, 11, 29, 23, 55, 1, tzinfo=UTC)
    assert sweep(dataset, now=late, full=True).incomplete == 1


def test_a_dataset_accepting_future_partitions_has_them_found_but_not_latest(lake, producer):
    dataset = register(
        producer,
        completion_signal=Dataset.CompletionSignal.MANIFEST,
        accepts_future_partitions=True,
    )
    put(lake, "sales/orders/dt=2026-11-28/_manifest.json", b'{"expected_files": 0}')
    put(lake, "sales/orders/dt=2027-06-01/_manifest.json", b'{"expected_files": 0}')

    assert sweep(dataset, full=True).partitions_found == 2
    assert selectors.partition_latest_ready(dataset=dataset, now=NOW).key == "2026-11-28"
    later = datetime(2027, 6, 1, tzinfo=UTC)
    assert selectors.partition_latest_ready(dataset=dataset, now=later).key == "2027-06-01"


def test_datasets_sharing_a_parent_share_one_listing(lake, producer):
    orders = register(producer, "orders", location_template="exports/orders_{partition}/")
    refunds = register(producer, "refunds", location_template="exports/refunds_{partition}/")
    assert orders.poll_group_id == refunds.poll_group_id
    put(lake, "exports/orders_2026-11-28/_SUCCESS", b"")
    put(lake, "exports/refunds_2026-11-28/_SUCCESS", b"")

    report = sweep(orders)

    assert report.partitions_found == 2
    assert report.list_calls == 1 + 2  # the parent once, then inside each new partition


def test_a_poll_only_group_backs_off_and_resets_when_something_lands(lake, producer, settings):
    dataset = register(producer)
    group = dataset.poll_group
    at = NOW
    intervals = []
    for _ in range(8):
        sweep(dataset, now=at)
        group.refresh_from_db()
        intervals.append(group.interval_seconds)
        at = group.next_sweep_at
    assert intervals == [120, 240, 480, 960, 1920, 3600, 3600, 3600]
    assert group.mode == StorageGroup.Mode.ADAPTIVE

    put(lake, "sales/orders/dt=2026-11-28/_SUCCESS", b"")
    sweep(dataset, now=at)
    group.refresh_from_db()
    assert group.interval_seconds == 60
    assert group.next_sweep_at == at + timedelta(seconds=60)


def test_a_group_whose_datasets_publish_events_gets_the_hourly_safety_net(lake, producer):
    dataset = register(producer)
    publish(producer, dataset, "2026-11-27")
    put(lake, "sales/orders/dt=2026-11-27/_SUCCESS", b"")
    put(lake, "sales/orders/dt=2026-11-28/_SUCCESS", b"")

    report = sweep(dataset)

    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.mode == StorageGroup.Mode.SAFETY_NET
    assert group.interval_seconds == 3600
    assert report.missed_events == 1
    notification = Notification.objects.get(
        dedup_key__startswith="readiness-event:", payload__data__partition="2026-11-28"
    )
    assert notification.payload["data"]["missed_event"] is True


def test_a_poll_only_dataset_is_swept_before_its_sla_check(lake, producer):
    dataset = register(producer, sla_cron="30 6 * * *", sla_timezone="UTC")
    dataset.refresh_from_db()
    StorageGroup.objects.filter(pk=dataset.poll_group_id).update(interval_seconds=3600)

    # Backing off would put the next sweep after the 06:30 check; it comes just before.
    sweep(dataset, now=dataset.next_check_at - timedelta(minutes=40))

    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.next_sweep_at == dataset.next_check_at - polling.CHECK_MARGIN


def test_sweep_due_claims_each_group_once_and_records_the_sweep(lake, producer):
    register(producer)
    first = polling.sweep_due(now=NOW)
    second = polling.sweep_due(now=NOW)
    assert len(first) == 1 and second == []
    sweep_row = StorageSweep.objects.get()
    assert sweep_row.full is True  # a group's first sweep lists everything
    assert sweep_row.list_calls == 1


def test_sweep_due_sweeps_a_group_falling_due_within_half_a_beat(lake, producer):
    dataset = register(producer)
    polling.sweep_due(now=NOW)
    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    due = NOW + timedelta(minutes=16, seconds=17)
    StorageGroup.objects.filter(pk=group.pk).update(next_sweep_at=due)

    # The pass 31 s before leaves it; the one 17 s before sweeps it, not a whole beat late.
    assert polling.sweep_due(now=due - polling.DUE_SLACK - timedelta(seconds=1)) == []
    assert len(polling.sweep_due(now=due - timedelta(seconds=17))) == 1


def test_boot_sweeps_every_group_not_swept_since_the_boot(lake, producer):
    dataset = register(producer)
    polling.sweep_due(now=NOW)
    for day in range(20, 29):  # landed while Tidemark was down
        put(lake, f"sales/orders/dt=2026-11-{day}/_SUCCESS", b"")
    boot = NOW + timedelta(hours=3)

    reports = polling.sweep_due(now=boot, boot_at=boot)

    assert [r.partitions_found for r in reports] == [9]
    # Not a full listing (the group had one three hours ago): every dataset from its
    # newest ready partition, none left out.
    assert not reports[0].full
    assert Partition.objects.filter(dataset=dataset).count() == 9


def test_a_storage_error_is_recorded_and_does_not_stop_other_groups(lake, producer):
    broken = register(producer, "broken", storage_source="lake")
    register(producer, "fine", location_template="other/fine/dt={partition}/")
    StorageGroup.objects.filter(pk=broken.poll_group_id).update(source="gone")
    put(lake, "other/fine/dt=2026-11-28/_SUCCESS", b"")

    reports = {r.group.split(":")[0]: r for r in polling.sweep_due(now=NOW)}

    assert "not configured" in reports["gone"].error
    assert reports["lake"].partitions_found == 1


@pytest.mark.parametrize(
    ("template", "partitioned", "message"),
    [
        ("/etc/passwd/{partition}", True, "relative"),
        ("s3://other/{partition}", True, "relative"),
        ("a/../b/{partition}", True, "'..'"),
        ("a/*/{partition}", True, "glob"),
        ("a/b/", True, "exactly once"),
        ("a/{partition}/{partition}", True, "exactly once"),
        ("a/{date}/{partition}", True, "only placeholder"),
        ("a/{partition}", False, "unpartitioned"),
    ],
)
def test_templates_that_could_escape_the_root_are_refused(template, partitioned, message):
    with pytest.raises(objectstore.TemplateError, match=message):
        objectstore.parse_template(template, partitioned=partitioned)


def test_a_polled_signal_needs_a_source_and_a_template(db, producer, lake):
    from problems import ValidationProblem

    with pytest.raises(ValidationProblem) as caught:
        datasets.dataset_register(
            actor=Actor(team=producer),
            namespace="s3://lake",
            name="x",
            completion_signal=Dataset.CompletionSignal.MANIFEST,
        )
    fields = {e.field for e in caught.value.errors}
    assert fields == {"storage_source", "location_template"}


def test_a_lost_event_is_flagged_even_when_no_published_partition_is_in_storage(lake, producer):
    dataset = register(producer)
    publish(producer, dataset, "2026-11-27")  # its files live elsewhere, or were cleaned up
    put(lake, "sales/orders/dt=2026-11-28/_SUCCESS", b"")

    report = sweep(dataset)

    assert (report.partitions_found, report.missed_events) == (1, 1)
    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.mode == StorageGroup.Mode.SAFETY_NET
