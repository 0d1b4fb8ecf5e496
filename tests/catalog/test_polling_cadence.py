"""A poll-only group's cadence follows its datasets' learned arrivals (``poll_schedule``,
``poll_cadence``), against a real local store."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from catalog.actors import Actor
from catalog.models import PartitionRevision, StorageGroup, StorageSweep
from catalog.services import publishing
from tests.catalog.polling_helpers import NOW, record_ready, register, sweep

pytestmark = pytest.mark.usefixtures("frozen_clock")

# 14 days of history, each ready between 08:20 and 08:46 after its period's end (by default).
HISTORY = [date(2026, 11, 27) - timedelta(days=d) for d in range(14)]


def with_arrivals(dataset, *, at_minute: int = 8 * 60 + 20) -> None:
    record_ready(dataset, HISTORY)
    for i, revision in enumerate(
        PartitionRevision.objects.filter(partition__dataset=dataset).select_related("partition")
    ):
        revision.ready_at = revision.partition.end_at + timedelta(minutes=at_minute + 2 * i)
        revision.save(update_fields=["ready_at"])


def backed_off(group_id: int) -> None:
    StorageGroup.objects.filter(pk=group_id).update(interval_seconds=1920)


def test_before_its_datasets_are_expected_a_group_sleeps_until_the_first_is(lake, producer):
    dataset = register(producer)
    with_arrivals(dataset)
    backed_off(dataset.poll_group_id)

    # 08:00: the 2026-11-28 partition is pending and expected from 08:22 (p10) to 08:46;
    # the backoff would sleep an hour.
    sweep(dataset, now=NOW)

    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.interval_seconds == 3600
    assert group.next_sweep_at == NOW + timedelta(minutes=22)


def test_inside_the_expected_window_a_group_stays_dense_without_a_find(lake, producer):
    dataset = register(producer)
    with_arrivals(dataset)
    backed_off(dataset.poll_group_id)

    at = NOW + timedelta(minutes=30)
    sweep(dataset, now=at)

    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.interval_seconds == 60
    assert group.next_sweep_at == at + timedelta(minutes=1)


def test_without_a_profile_the_group_keeps_the_plain_backoff(lake, producer):
    dataset = register(producer)
    record_ready(dataset, HISTORY[:3])  # fewer arrivals than a profile needs
    backed_off(dataset.poll_group_id)

    sweep(dataset, now=NOW)

    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.next_sweep_at == NOW + timedelta(hours=1)


def test_a_dataset_publishing_events_needs_no_poll_only_sweeps(lake, producer):
    polled = register(producer, "orders", location_template="exports/orders_{partition}/")
    with_arrivals(polled)
    eventful = register(producer, "refunds", location_template="exports/refunds_{partition}/")
    publishing.readiness_publish(
        actor=Actor(team=producer),
        namespace=eventful.namespace,
        name=eventful.name,
        partition="2026-11-27",
        now=NOW - timedelta(days=1),
    )
    backed_off(polled.poll_group_id)

    # refunds' 2026-11-28 is pending with no profile; it publishes events, so only orders'
    # window counts.
    sweep(polled, now=NOW)

    group = StorageGroup.objects.get(pk=polled.poll_group_id)
    assert group.mode == StorageGroup.Mode.ADAPTIVE
    assert group.next_sweep_at == NOW + timedelta(minutes=22)


def test_when_every_poll_only_dataset_is_ready_the_group_sleeps_until_the_next_period(
    lake, producer
):
    dataset = register(producer)
    with_arrivals(dataset, at_minute=10)
    record_ready(dataset, [date(2026, 11, 28)])
    backed_off(dataset.poll_group_id)

    # 23:30: 2026-11-29 closes at midnight and is expected from 00:10 on (p10 of 15
    # arrivals: 0 for 2026-11-28, 10 to 36 minutes before); nothing is pending, so the
    # hour's backoff is cut short there.
    at = NOW + timedelta(hours=15, minutes=30)
    sweep(dataset, now=at)
    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.interval_seconds == 3600
    assert group.next_sweep_at == NOW + timedelta(hours=16, minutes=10)


def test_a_busy_group_waits_about_a_page_per_partition_it_finds(lake, producer):
    dataset = register(producer)
    group = dataset.poll_group
    # The hour's first find, at 07:30 (what it found had landed before), then 9 more by
    # the sweeps since and one by this one: 10 in 30 minutes.
    for minutes_ago, found in ((30, 4), (20, 5), (10, 4)):
        StorageSweep.objects.create(
            group=group,
            started_at=NOW - timedelta(minutes=minutes_ago),
            finished_at=NOW - timedelta(minutes=minutes_ago),
            partitions_found=found,
        )
    StorageSweep.objects.create(
        group=group,
        started_at=NOW - timedelta(minutes=90),
        finished_at=NOW - timedelta(minutes=90),
        partitions_found=50,  # older than the hour: not counted
    )
    (lake / "sales/orders/dt=2026-11-28").mkdir(parents=True)
    (lake / "sales/orders/dt=2026-11-28/_SUCCESS").write_bytes(b"")

    report = sweep(dataset, now=NOW)

    assert (report.partitions_found, report.listing_pages) == (1, 1)
    group.refresh_from_db()
    # One every 3 minutes, for a listing of one page.
    assert group.interval_seconds == 180
    assert group.next_sweep_at == NOW + timedelta(minutes=3)
