"""How the fallback poll lists a group, against moto's S3 server on loopback: flat (no
delimiter) or by partition prefix, chosen from the objects per partition its sweeps
measured; and where each listing starts, so a sweep costs what is new, not what exists.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from catalog import polling
from catalog.actors import Actor
from catalog.models import (
    Dataset,
    Delivery,
    Partition,
    StorageGroup,
    StorageSweep,
)
from catalog.services import publishing
from tests.catalog.factories import SubscriptionFactory
from tests.catalog.polling_helpers import NOW, ready_keys, register, stored_history, sweep

TODAY = NOW.date()  # 2026-11-29: 2026-11-28 is the newest partition due


pytestmark = pytest.mark.usefixtures("frozen_clock")


def land(s3, template: str, day, files: int = 1) -> None:
    base = template.format(partition=day.isoformat())
    s3.put_many([f"{base}part-{i}.parquet" for i in range(files)])
    s3.put(base + "_SUCCESS", b"")


def listings(dataset) -> list[tuple[str, float | None]]:
    return list(
        StorageSweep.objects.filter(group_id=dataset.poll_group_id)
        .order_by("started_at")
        .values_list("listing", "objects_per_partition")
    )


TEMPLATE = "sales/orders/dt={partition}/"


# --- choosing the listing ---------------------------------------------------------------------


def test_small_partitions_switch_the_group_to_a_flat_listing(s3, producer, consumer_endpoint):
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)
    land(s3, TEMPLATE, TODAY - timedelta(days=2))

    first = sweep(dataset)
    # Never measured: the partition prefixes, then inside the new one (2 objects).
    assert (first.listing, first.list_calls, first.partitions_found) == ("delimiter", 2, 1)

    land(s3, TEMPLATE, TODAY - timedelta(days=1))
    second = sweep(dataset, now=NOW + timedelta(minutes=5))

    # Flat: one listing returns the marker itself, no listing inside the partition.
    assert (second.listing, second.error) == ("flat", "")
    assert (second.list_calls, second.pages, second.partitions_found) == (1, 1, 1)
    assert second.objects_seen == 2  # after the newest ready day: the new day's two objects
    assert ready_keys(dataset) == {"2026-11-27", "2026-11-28"}
    assert listings(dataset) == [("delimiter", 2.0), ("flat", 2.0)]
    # Told once each, as with the delimiter listing.
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 2
    assert sweep(dataset, now=NOW + timedelta(minutes=6)).partitions_found == 0
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 2


def test_a_flat_listing_judges_a_manifest_from_the_listed_objects(s3, producer):
    dataset = register(producer, completion_signal="manifest")
    base = TEMPLATE.format(partition="2026-11-27")
    s3.put(base + "_manifest.json", b'{"expected_files": 1}')
    s3.put(base + "part-0.parquet")
    assert sweep(dataset).partitions_found == 1  # delimiter; learns 2 objects per partition

    base = TEMPLATE.format(partition="2026-11-28")
    manifest = {"expected_files": 1, "files": [{"name": "part-0.parquet", "size": 3}]}
    s3.put(base + "_manifest.json", json.dumps(manifest).encode())
    s3.put(base + "part-0.parquet", b"abc")
    report = sweep(dataset, now=NOW + timedelta(minutes=5))

    assert (report.listing, report.list_calls, report.partitions_found) == ("flat", 1, 1)
    revision = Partition.objects.get(dataset=dataset, key="2026-11-28").current_revision
    assert revision.manifest == manifest  # read from the listed name and size


def test_large_partitions_keep_the_delimiter_listing(s3, producer, settings):
    settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 5}
    dataset = register(producer)
    land(s3, TEMPLATE, TODAY - timedelta(days=2), files=9)
    sweep(dataset)

    land(s3, TEMPLATE, TODAY - timedelta(days=1), files=9)
    report = sweep(dataset, now=NOW + timedelta(minutes=5))

    assert listings(dataset) == [("delimiter", 10.0), ("delimiter", 10.0)]
    assert (report.list_calls, report.partitions_found) == (1 + 1, 1)


def test_the_group_switches_back_when_its_partitions_grow(s3, producer, settings):
    settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 5}
    dataset = register(producer)
    land(s3, TEMPLATE, TODAY - timedelta(days=2))
    sweep(dataset)  # delimiter, measures 2
    land(s3, TEMPLATE, TODAY - timedelta(days=1), files=30)
    sweep(dataset, now=NOW + timedelta(minutes=5))  # flat: the new day holds 31
    land(s3, TEMPLATE, TODAY)
    third = sweep(dataset, now=NOW + timedelta(days=1))  # mean 16.5 > 5

    assert listings(dataset) == [("delimiter", 2.0), ("flat", 31.0), ("delimiter", 2.0)]
    # The parent, inside the new day, and (a day after the first sweep) one flat listing of
    # the recent ready partitions' markers (rewritten_markers).
    assert third.recent_pass
    assert (third.list_calls, third.partitions_found) == (1 + 1 + 1, 1)
    assert ready_keys(dataset) == {"2026-11-27", "2026-11-28", "2026-11-29"}


def test_a_full_sweep_lists_prefixes_even_in_a_flat_group(s3, producer):
    dataset = register(producer)
    land(s3, TEMPLATE, TODAY - timedelta(days=2))
    sweep(dataset)
    land(s3, TEMPLATE, TODAY - timedelta(days=1))

    full = sweep(dataset, now=NOW + timedelta(minutes=5), full=True)

    assert (full.listing, full.full, full.partitions_found) == ("delimiter", True, 1)
    assert full.objects_per_partition == 2.0  # measured inside the new partition


# --- dataset-first and date-first layouts with years of history -------------------------------

HISTORY_DAYS = 1200
OLDEST = TODAY - timedelta(days=HISTORY_DAYS + 1)


def _history(s3, producer, pattern: str, newest: dict[str, int]):
    """Three datasets sharing ``datasets/``, each with every day from ``OLDEST`` to
    ``newest[name]`` days ago stored and recorded ready."""
    templates = {name: "datasets/" + pattern.format(name=name) for name in newest}
    days = {name: TODAY - timedelta(days=ago) for name, ago in newest.items()}
    return stored_history(s3, producer, templates, oldest=OLDEST, newest=days)


def test_dataset_first_each_dataset_is_listed_only_after_its_newest_ready_day(s3, producer):
    sets = _history(s3, producer, "{name}_{{partition}}/", {"t0": 1, "t1": 2, "t2": 1})
    land(s3, "datasets/t1_{partition}/", TODAY - timedelta(days=1))

    report = sweep(sets["t1"])

    # One short listing per dataset (1,200 days of history separate them), each after its
    # newest ready day: three pages for three datasets, not 3,600 prefixes; then inside
    # t1's new day.
    assert (report.error, report.partitions_found) == ("", 1)
    assert (report.list_calls, report.pages) == (3 + 1, 3 + 1)
    assert ready_keys(sets["t1"]) >= {"2026-11-28"}


def test_a_partition_published_before_its_period_ends_is_found_by_the_next_sweep(s3, producer):
    # t0 is ready for 2026-11-28; its producer writes today's partition early (at 08:00).
    sets = _history(s3, producer, "{name}_{{partition}}/", {"t0": 1, "t1": 1})
    land(s3, "datasets/t0_{partition}/", TODAY)

    report = sweep(sets["t0"])

    assert (report.error, report.partitions_found) == ("", 1)
    assert "2026-11-29" in ready_keys(sets["t0"])


def test_a_late_partition_filling_a_gap_is_found_by_the_next_sweep(s3, producer):
    sets = _history(s3, producer, "{name}_{{partition}}/", {"t0": 1, "t1": 1})
    gap = TODAY - timedelta(days=5)
    Partition.objects.filter(dataset=sets["t0"], key=gap.isoformat()).delete()

    report = sweep(sets["t0"])

    # t0 has a day missing within the lookback window: its listing starts at the horizon
    # (35 prefixes, one page) and finds the gap's marker, still in storage.
    assert (report.error, report.partitions_found) == ("", 1)
    assert gap.isoformat() in ready_keys(sets["t0"])
    assert (report.list_calls, report.pages) == (2 + 1, 2 + 1)


def test_dataset_first_a_long_history_between_datasets_is_skipped(s3, producer):
    sets = _history(s3, producer, "{name}_{{partition}}/", {"t0": 2, "t1": 1, "t2": 2})
    land(s3, "datasets/t0_{partition}/", TODAY - timedelta(days=1))
    land(s3, "datasets/t2_{partition}/", TODAY - timedelta(days=1))

    report = sweep(sets["t0"])

    # Three listings (each dataset's 1,200 days of history cost more than a new listing
    # with StartAfter), one page each, then inside the two new days.
    assert (report.error, report.partitions_found) == ("", 2)
    assert (report.list_calls, report.pages) == (3 + 2, 3 + 2)


def test_date_first_one_listing_starts_at_the_oldest_day_not_ready(s3, producer):
    sets = _history(s3, producer, "{{partition}}_{name}/", {"t0": 2, "t1": 3, "t2": 2})
    for name in sets:
        land(s3, f"datasets/{{partition}}_{name}/", TODAY - timedelta(days=1))

    report = sweep(sets["t0"])

    # One listing from after t1's newest ready day (2026-11-26): a handful of prefixes,
    # not 3,600; then inside the three new days.
    assert (report.error, report.partitions_found) == ("", 3)
    assert (report.list_calls, report.pages) == (1 + 3, 1 + 3)
    assert report.objects_seen == 6 + 3 * 2
    assert all("2026-11-28" in ready_keys(d) for d in sets.values())


def test_dataset_first_flat_sweeps_cost_what_is_new(s3, producer):
    sets = _history(s3, producer, "{name}_{{partition}}/", {"t0": 2, "t1": 2, "t2": 2})
    land(s3, "datasets/t1_{partition}/", TODAY - timedelta(days=1))
    assert sweep(sets["t1"]).partitions_found == 1  # delimiter; learns 2 per partition
    for name in ("t0", "t2"):
        land(s3, f"datasets/{name}_{{partition}}/", TODAY - timedelta(days=1))

    report = sweep(sets["t1"], now=NOW + timedelta(minutes=5))

    # Flat and narrow: one listing for each of the two datasets with a day due (1,200 days
    # of history lie between them); t1, ready, is not listed.
    assert (report.listing, report.partitions_found) == ("flat", 2)
    assert (report.narrow, report.datasets_listed) == (True, 2)
    assert (report.list_calls, report.pages) == (2, 2)
    assert StorageSweep.objects.order_by("started_at").last().objects_per_partition == 2.0


# --- narrow sweeps: only the datasets with a day due, every dataset hourly ---------------------


def _publish(team, dataset, day) -> None:
    """A readiness event over the API: the dataset publishes events from then on."""
    publishing.readiness_publish(
        actor=Actor(team=team),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=day.isoformat(),
        now=NOW,
    )


def test_narrow_sweeps_list_the_datasets_with_a_day_due_and_hourly_every_dataset(
    s3, producer, settings
):
    settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "restate_interval_seconds": 0}
    # t0 is ready for 2026-11-28 and t1 is not; t2 publishes events.
    sets = _history(s3, producer, "{name}_{{partition}}/", {"t0": 1, "t1": 2, "t2": 2})
    _publish(producer, sets["t2"], TODAY - timedelta(days=1))
    wide = sweep(sets["t0"])
    assert (wide.narrow, wide.datasets_listed, wide.list_calls) == (False, 3, 3)

    # t1's day lands; t0's producer writes today's partition early; t2's event for today's
    # early partition is lost.
    land(s3, "datasets/t1_{partition}/", TODAY - timedelta(days=1))
    land(s3, "datasets/t0_{partition}/", TODAY)
    land(s3, "datasets/t2_{partition}/", TODAY)
    narrow = sweep(sets["t0"], now=NOW + timedelta(minutes=5))

    # Only t1 is listed (its 1,200 days of history apart from the others'), then inside its
    # new day; t0 and t2 wait for the sweep of every dataset.
    assert (narrow.narrow, narrow.datasets_listed) == (True, 1)
    assert (narrow.list_calls, narrow.partitions_found) == (1 + 1, 1)
    assert "2026-11-28" in ready_keys(sets["t1"])
    assert "2026-11-29" not in ready_keys(sets["t0"]) | ready_keys(sets["t2"])
    group = StorageGroup.objects.get(pk=sets["t0"].poll_group_id)
    assert group.last_wide_sweep_at == NOW
    assert group.next_sweep_at <= NOW + timedelta(hours=1)

    # Nothing is due now: the sweeps in between list nothing.
    idle = sweep(sets["t0"], now=NOW + timedelta(minutes=30))
    assert (idle.narrow, idle.datasets_listed, idle.list_calls) == (True, 0, 0)
    group.refresh_from_db()
    assert group.next_sweep_at <= NOW + timedelta(hours=1)

    # An hour after the last sweep of every dataset (less the beat's slack), the next one.
    hourly = sweep(sets["t0"], now=NOW + timedelta(minutes=59, seconds=30))
    assert (hourly.narrow, hourly.datasets_listed) == (False, 3)
    assert (hourly.partitions_found, hourly.missed_events) == (2, 1)
    assert "2026-11-29" in ready_keys(sets["t0"]) & ready_keys(sets["t2"])
    assert list(
        StorageSweep.objects.filter(group=group)
        .order_by("started_at")
        .values_list("narrow", "datasets_listed")
    ) == [(False, 3), (True, 1), (True, 0), (False, 3)]


def test_a_narrow_sweep_lists_a_dataset_whose_sla_check_is_next(s3, producer):
    sets = _history(s3, producer, "{name}_{{partition}}/", {"t0": 2, "t1": 3})
    _publish(producer, sets["t1"], TODAY - timedelta(days=2))
    sweep(sets["t0"])
    # t1 publishes events, but its 2026-11-28 event is lost just before its SLA check.
    land(s3, "datasets/t1_{partition}/", TODAY - timedelta(days=1))
    at = NOW + timedelta(minutes=5)
    Dataset.objects.filter(pk=sets["t1"].pk).update(next_check_at=at + polling.CHECK_MARGIN)

    report = sweep(sets["t0"], now=at)

    assert (report.narrow, report.datasets_listed) == (True, 2)  # t0 due, t1 checked next
    assert (report.partitions_found, report.missed_events) == (1, 1)
    assert "2026-11-28" in ready_keys(sets["t1"])
