"""A rewritten success marker or manifest under a ready partition is a restatement, found by
the poll's pass over recent markers (``catalog.rewritten_markers``): against moto's S3
server (real s3fs, ``ListObjectsV2`` over HTTP) and against a ``file://`` store.

The pass runs with a group's sweep every ``restate_interval_seconds`` (hourly by default)
counted from its first sweep, over ready partitions of the last ``restate_window_days``.
Every notification payload is checked against its schema (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

import objectstore
from catalog import rewritten_markers
from catalog.actors import Actor
from catalog.models import (
    Dataset,
    Delivery,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    StorageGroup,
)
from catalog.services import publishing
from tests.catalog.factories import SubscriptionFactory
from tests.catalog.polling_helpers import NOW, register, sweep

TODAY = NOW.date()
DAY = "2026-11-28"
BASE = f"sales/orders/dt={DAY}/"
HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def frozen_clock():
    with time_machine.travel(NOW, tick=False):
        yield


def restated(dataset) -> list[Notification]:
    return list(
        Notification.objects.filter(
            dataset=dataset, type=Notification.Type.PARTITION_RESTATED
        ).order_by("pk")
    )


def current(dataset, key=DAY) -> PartitionRevision:
    return Partition.objects.get(dataset=dataset, key=key).current_revision


def at(moment: datetime):
    """Write to moto as of ``moment`` (its LastModified follows this process's clock)."""
    return time_machine.travel(moment, tick=False)


# --- S3 (moto) ------------------------------------------------------------------------------


def test_a_rewritten_marker_is_told_once_as_restated(s3, producer, consumer_endpoint):
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)
    s3.put(BASE + "part-0.parquet")
    s3.put(BASE + "_SUCCESS", b"")
    found = sweep(dataset)
    first = current(dataset)
    # The find keeps the marker as it saw it: moto's ETag of an empty body, and its time.
    assert (found.partitions_found, found.recent_pass) == (1, False)
    assert first.marker_etag == "d41d8cd98f00b204e9800998ecf8427e"
    assert first.marker_modified_at == NOW

    # Rewritten (the same empty body: only its time says so) half an hour later.
    with at(NOW + HOUR / 2):
        s3.put(BASE + "_SUCCESS", b"")
    report = sweep(dataset, now=NOW + HOUR)

    assert (report.error, report.recent_pass, report.partitions_restated) == ("", True, 1)
    # One flat listing, from the oldest ready day of the window rather than after the
    # newest: the pass reads the marker from it.
    assert (report.list_calls, report.pages) == (1, 1)
    [told] = restated(dataset)
    data = told.payload["data"]
    new = current(dataset)
    assert new.version == "storage-20261129T083000Z-d41d8cd98f00b204e9800998ecf8427e"
    assert (data["version"], data["previous_version"]) == (new.version, None)
    assert (data["detected_by"], data["partition"]) == ("poll", DAY)
    assert (new.detected_by, new.marker_modified_at) == ("poll", NOW + HOUR / 2)
    assert ReadinessEvent.objects.get(revision=new).restated_version == ""
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 2

    # The same marker listed again by the next pass: nothing.
    again = sweep(dataset, now=NOW + 2 * HOUR)
    assert (again.recent_pass, again.partitions_restated) == (True, 0)
    assert len(restated(dataset)) == 1
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 2


def test_the_pass_runs_at_its_cadence_only(s3, producer):
    dataset = register(producer)
    s3.put(BASE + "_SUCCESS", b"")
    sweep(dataset)
    with at(NOW + HOUR / 6):
        s3.put(BASE + "_SUCCESS", b"")

    soon = sweep(dataset, now=NOW + HOUR / 2)  # the pass is hourly: not yet

    # Nor is the sweep of every dataset: nothing is due, so this narrow sweep lists nothing.
    assert (soon.recent_pass, soon.narrow, soon.list_calls) == (False, True, 0)
    assert restated(dataset) == []
    assert sweep(dataset, now=NOW + HOUR).partitions_restated == 1
    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    assert group.last_recent_pass_at == NOW + HOUR


def test_a_rewrite_newer_than_the_settle_time_waits_for_the_next_pass(s3, producer):
    dataset = register(producer)
    s3.put(BASE + "_SUCCESS", b"")
    sweep(dataset)
    with at(NOW + HOUR - timedelta(minutes=5)):
        s3.put(BASE + "_SUCCESS", b"")

    assert sweep(dataset, now=NOW + HOUR).partitions_restated == 0
    assert sweep(dataset, now=NOW + 2 * HOUR).partitions_restated == 1


def test_a_producer_publishing_the_new_version_itself_is_told_once(s3, producer, consumer_endpoint):
    """The producer rewrites its marker, then publishes the new version (its event a
    minute later): the pass waits out the settle time, then finds the producer's revision
    and takes the marker as its baseline."""
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)

    def publish(version, now):
        publishing.readiness_publish(
            actor=Actor(team=producer),
            namespace=dataset.namespace,
            name=dataset.name,
            partition=DAY,
            version=version,
            now=now,
        )

    s3.put(BASE + "_SUCCESS", b"")
    publish("v1", NOW)
    sweep(dataset)
    sweep(dataset, now=NOW + HOUR)  # v1 takes the marker as its baseline
    rewrite = NOW + 2 * HOUR - timedelta(minutes=2)
    with at(rewrite):
        s3.put(BASE + "_SUCCESS", b"")

    settling = sweep(dataset, now=NOW + 2 * HOUR)
    publish("v2", NOW + 2 * HOUR + timedelta(minutes=1))
    later = sweep(dataset, now=NOW + 3 * HOUR)

    assert (settling.partitions_restated, later.partitions_restated) == (0, 0)
    [told] = restated(dataset)
    assert (told.payload["data"]["version"], told.payload["data"]["detected_by"]) == (
        "v2",
        "event",
    )
    assert (current(dataset).version, current(dataset).marker_modified_at) == ("v2", rewrite)


def test_a_published_partition_takes_the_marker_it_has_as_its_baseline(s3, producer):
    dataset = register(producer)
    publishing.readiness_publish(
        actor=Actor(team=producer),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=DAY,
        version="v1",
        now=NOW,
    )
    s3.put(BASE + "_SUCCESS", b"")
    sweep(dataset)  # lists after the newest ready day: the marker is not seen
    assert current(dataset).marker_modified_at is None

    adopted = sweep(dataset, now=NOW + HOUR)

    assert (adopted.recent_pass, adopted.partitions_restated) == (True, 0)
    assert current(dataset).marker_modified_at == NOW
    with at(NOW + HOUR):
        s3.put(BASE + "_SUCCESS", b"")
    assert sweep(dataset, now=NOW + 2 * HOUR).partitions_restated == 1
    [told] = restated(dataset)
    assert told.payload["data"]["previous_version"] == "v1"


def test_a_partition_older_than_the_window_is_not_looked_at(s3, producer):
    dataset = register(producer)
    days = [TODAY - timedelta(days=n) for n in range(10, 0, -1)]  # no gap: 11-19 to 11-28
    for day in days:
        s3.put(f"sales/orders/dt={day}/part-0.parquet")
        s3.put(f"sales/orders/dt={day}/_SUCCESS", b"")
    assert sweep(dataset).partitions_found == 10
    with at(NOW + HOUR / 2):
        for day in days:
            s3.put(f"sales/orders/dt={day}/_SUCCESS", b"")

    report = sweep(dataset, now=NOW + HOUR)

    # The window is 7 days back from 09:00 on 11-29: the days from 11-23 on.
    window = [d for d in days if d >= TODAY - timedelta(days=6)]
    assert len(window) == 6
    assert report.partitions_restated == 6
    assert {n.payload["data"]["partition"] for n in restated(dataset)} == {
        d.isoformat() for d in window
    }
    assert current(dataset, days[0].isoformat()).version == ""
    # One flat listing from the window's oldest ready day: its 6 x 2 objects, none of the
    # older days'.
    assert (report.list_calls, report.objects_seen) == (1, 6 * 2)


def test_a_group_listed_by_prefix_gets_one_flat_listing_for_the_pass(s3, producer, settings):
    """Partitions too large for a flat sweep: the sweep lists partition prefixes after the
    newest ready day, and the pass one flat listing of the window."""
    settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 1}
    dataset = register(producer)
    s3.put(BASE + "part-0.parquet")
    s3.put(BASE + "_SUCCESS", b"")
    sweep(dataset)
    with at(NOW + HOUR / 2):
        s3.put(BASE + "_SUCCESS", b"")

    report = sweep(dataset, now=NOW + HOUR)

    assert (report.listing, report.partitions_restated) == ("delimiter", 1)
    assert (report.list_calls, report.objects_seen) == (1 + 1, 0 + 2)


def test_the_pass_measures_a_group_whose_partitions_all_came_by_event(s3, producer):
    """Nothing found by the poll is ever listed inside, so only the pass's flat listing
    measures the group: its next sweeps list flat instead of by prefix."""
    dataset = register(producer)
    publishing.readiness_publish(
        actor=Actor(team=producer),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=DAY,
        now=NOW,
    )
    s3.put(BASE + "part-0.parquet")
    s3.put(BASE + "_SUCCESS", b"")
    first = sweep(dataset)
    assert (first.listing, first.objects_per_partition) == ("delimiter", None)

    measured = sweep(dataset, now=NOW + HOUR)
    assert (measured.listing, measured.recent_pass, measured.objects_per_partition) == (
        "delimiter",
        True,
        2.0,
    )

    assert sweep(dataset, now=NOW + HOUR + timedelta(minutes=1)).listing == "flat"


def test_a_deleted_marker_is_not_a_restatement(s3, producer):
    """Deleting a marker retracts nothing and restates nothing: the partition stays ready
    with its baseline, so a marker written back later is told as a restatement."""
    dataset = register(producer)
    s3.put(BASE + "_SUCCESS", b"")
    sweep(dataset)
    s3.client.delete_object(Bucket=s3.bucket, Key=s3.key(BASE + "_SUCCESS"))

    gone = sweep(dataset, now=NOW + HOUR)

    assert (gone.recent_pass, gone.partitions_restated) == (True, 0)
    assert current(dataset).state == PartitionRevision.State.READY
    assert current(dataset).marker_modified_at == NOW
    with at(NOW + HOUR):
        s3.put(BASE + "_SUCCESS", b"")
    assert sweep(dataset, now=NOW + 2 * HOUR).partitions_restated == 1


def test_a_rewritten_manifest_is_judged_by_the_manifest_rules(s3, producer):
    dataset = register(producer, completion_signal=Dataset.CompletionSignal.MANIFEST)
    s3.put(BASE + "_manifest.json", json.dumps({"expected_files": 2}).encode())
    s3.put(BASE + "part-0.parquet")
    s3.put(BASE + "part-1.parquet")
    assert sweep(dataset).partitions_found == 1
    with at(NOW + HOUR / 2):
        s3.put(BASE + "_manifest.json", json.dumps({"expected_files": 3}).encode())

    short = sweep(dataset, now=NOW + HOUR)  # 2 of 3 files: not told, readers keep the old

    assert (short.partitions_restated, short.error) == (0, "")
    assert (current(dataset).version, current(dataset).manifest) == ("", {"expected_files": 2})
    s3.put(BASE + "part-2.parquet")
    complete = sweep(dataset, now=NOW + 2 * HOUR)

    assert complete.partitions_restated == 1
    new = current(dataset)
    assert new.manifest == {"expected_files": 3}
    assert new.metadata["poll"]["reason"] == (
        "_manifest.json rewritten; 3 of 3 expected files present"
    )
    [told] = restated(dataset)
    assert told.payload["data"]["manifest"] == {"expected_files": 3}


# --- a local store (file://) ----------------------------------------------------------------


def put(root, relative: str, body: bytes = b"x", *, mtime: datetime = NOW) -> None:
    """Write a file under ``root`` with modification time ``mtime`` (the disk's clock is
    not the frozen one)."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))


def test_a_rewritten_marker_on_a_local_store_is_told_once(lake, producer, consumer_endpoint):
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)
    put(lake, BASE + "part-0.parquet")
    put(lake, BASE + "_SUCCESS", b"")
    sweep(dataset)
    assert (current(dataset).marker_etag, current(dataset).marker_modified_at) == ("", NOW)

    put(lake, BASE + "_SUCCESS", b"", mtime=NOW + timedelta(minutes=20, microseconds=5))
    report = sweep(dataset, now=NOW + HOUR)
    again = sweep(dataset, now=NOW + 2 * HOUR)

    assert (report.partitions_restated, again.partitions_restated) == (1, 0)
    [told] = restated(dataset)
    assert told.payload["data"]["version"] == "storage-20261129T082000.000005Z"
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 2


def test_the_local_pass_lists_each_recent_ready_partition_only(lake, producer):
    """Elsewhere than S3 the pass lists inside each ready partition of the window, one
    call each: a deleted marker is nothing, an old partition is not listed."""
    dataset = register(producer)
    old, recent = TODAY - timedelta(days=10), [TODAY - timedelta(days=2), TODAY - timedelta(days=1)]
    for day in [old, *recent]:
        put(lake, f"sales/orders/dt={day}/_SUCCESS", b"")
    assert sweep(dataset).partitions_found == 3
    later = NOW + timedelta(minutes=20)
    put(lake, f"sales/orders/dt={old}/_SUCCESS", b"", mtime=later)
    put(lake, f"sales/orders/dt={recent[0]}/_SUCCESS", b"", mtime=later)
    (lake / f"sales/orders/dt={recent[1]}/_SUCCESS").unlink()

    report = sweep(dataset, now=NOW + HOUR)

    assert report.partitions_restated == 1
    assert [n.payload["data"]["partition"] for n in restated(dataset)] == [recent[0].isoformat()]
    # The parent once (the regular sweep), then the two recent ready days.
    assert report.list_calls == 1 + 2
    assert current(dataset, recent[1].isoformat()).state == PartitionRevision.State.READY


# --- pure parts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("etag", "modified", "version"),
    [
        ("abc", datetime(2026, 11, 29, 8, 30, tzinfo=UTC), "storage-20261129T083000Z-abc"),
        ("", datetime(2026, 11, 29, 8, 30, 0, 250, tzinfo=UTC), "storage-20261129T083000.000250Z"),
        ("abc-2", None, "storage-abc-2"),
    ],
)
def test_version_for_names_the_rewritten_object(etag, modified, version):
    obj = objectstore.StoredObject("_SUCCESS", 0, etag, modified)
    assert rewritten_markers.version_for(obj) == version


def test_an_etag_longer_than_the_baseline_kept_is_compared_as_kept():
    """A store's ETag longer than the 128 characters kept as the baseline is the same
    version at every pass, not a rewrite each time; a different one still is."""
    long = "a" * 200
    kept = rewritten_markers._Ready(1, "2026-11-28", 1, long[:128], None)
    assert not rewritten_markers.changed(kept, objectstore.StoredObject("_SUCCESS", 0, long))
    other = objectstore.StoredObject("_SUCCESS", 0, "b" + long[1:])
    assert rewritten_markers.changed(kept, other)
