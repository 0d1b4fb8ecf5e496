"""Adversarial cases for the fallback poll against moto's S3 server: odd key characters,
nested (Hive-style) partitions, templates whose partition is not the last segment, marker
look-alikes, prefixes of other datasets' prefixes, page boundaries and rewritten markers.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine

from catalog import poll_plan
from catalog.models import Dataset, Notification, Partition, PartitionRevision
from schedules.periods import parse_partition_key
from tests.catalog.polling_helpers import (
    NOW,
    ready_keys,
    register,
    stored_history,
    sweep,
)

TODAY = NOW.date()  # 2026-11-29
DAY = "2026-11-28"
HOUR = timedelta(hours=1)
NEW_YORK = ZoneInfo("America/New_York")

pytestmark = pytest.mark.usefixtures("frozen_clock")


def land(s3, template: str, key: str, files: int = 1, marker: str = "_SUCCESS") -> None:
    base = template.format(partition=key)
    for i in range(files):
        s3.put(f"{base}part-{i}.parquet")
    s3.put(base + marker, b"")


def two_sweeps(dataset, s3, template, keys):
    """A delimiter sweep (measures the group), then lands ``keys`` and sweeps flat."""
    land(s3, template, "2026-11-26")
    first = sweep(dataset)
    assert (first.error, first.listing, first.partitions_found) == ("", "delimiter", 1)
    for key in keys:
        land(s3, template, key)
    second = sweep(dataset, now=NOW + timedelta(minutes=5))
    assert (second.error, second.listing) == ("", "flat")
    return second


# --- odd characters in the template ---------------------------------------------------------

ODD = [
    "sales/order items/dt={partition}/",
    "sales/a+b/dt={partition}/",
    "sales/50%25 off/dt={partition}/",
    "sales/données-ü/dt={partition}/",
    "sales/x/dt={partition} v2/",
    "sales/x/d+t={partition}/",
    "sales/a#b/dt={partition}/",
    "sales/a&b;c=d'e/dt={partition}/",
    "sales/a~b/dt={partition}/",
]


@pytest.mark.parametrize("template", ODD)
def test_odd_characters_delimiter_then_flat(s3, producer, template):
    dataset = register(producer, location_template=template)
    report = two_sweeps(dataset, s3, template, ["2026-11-27", DAY])
    assert report.partitions_found == 2
    assert ready_keys(dataset) == {"2026-11-26", "2026-11-27", DAY}


@pytest.mark.parametrize("template", ODD)
def test_odd_characters_manifest(s3, producer, template):
    dataset = register(producer, location_template=template, completion_signal="manifest")
    base = template.format(partition=DAY)
    s3.put(
        base + "_manifest.json", json.dumps({"expected_files": 1, "files": ["p 1.csv"]}).encode()
    )
    s3.put(base + "p 1.csv")
    assert sweep(dataset).partitions_found == 1


# --- segment prefixes that are prefixes of others, or sort around "/" --------------------------

HISTORY_DAYS = 1200
OLDEST = TODAY - timedelta(days=HISTORY_DAYS + 1)


def _history(s3, producer, templates: dict[str, str], newest_ago: int = 2):
    newest = dict.fromkeys(templates, TODAY - timedelta(days=newest_ago))
    return stored_history(s3, producer, templates, oldest=OLDEST, newest=newest)


@pytest.mark.parametrize(
    "names",
    [
        ["t1", "t10", "t1_eu"],
        ["t-1", "t.1", "t1", "t!1"],
        ["a", "a-b", "a.b", "a_b"],
    ],
)
@pytest.mark.parametrize("flat", [False, True])
def test_prefix_of_another_prefix(s3, producer, settings, names, flat):
    if not flat:
        settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 1}
    templates = {n.replace("!", "x").replace(".", "d"): f"ds/{n}_{{partition}}/" for n in names}
    sets = _history(s3, producer, templates)
    first = next(iter(sets.values()))
    if flat:
        # measure: small partitions
        land(s3, templates[next(iter(sets))], "2026-11-28")
        assert sweep(first).partitions_found == 1
        for template in list(templates.values())[1:]:
            land(s3, template, DAY)
        report = sweep(first, now=NOW + timedelta(minutes=5))
        assert report.listing == "flat"
        assert report.partitions_found == len(names) - 1, report
    else:
        for template in templates.values():
            land(s3, template, DAY)
        report = sweep(first)
        assert report.partitions_found == len(names), report
    for dataset in sets.values():
        assert DAY in ready_keys(dataset)


# --- Hive-style nested partitions, partition not in the last segment -----------------------


def test_hive_nested_hours_under_a_daily_partition(s3, producer):
    template = "events/dt={partition}/"
    dataset = register(producer, location_template=template, completion_signal="manifest")
    base = template.format(partition=DAY)
    for hour in range(24):
        s3.put(f"{base}hour={hour:02d}/part-0.parquet")
    s3.put(base + "hour=05/_SUCCESS", b"")  # a nested marker is a file of no data
    s3.put(base + "_manifest.json", json.dumps({"expected_files": 24}).encode())
    report = sweep(dataset)
    assert report.partitions_found == 1
    rev = Partition.objects.get(dataset=dataset, key=DAY).current_revision
    assert rev.metadata["poll"]["files"] == 24


def test_a_nested_marker_does_not_complete_the_partition(s3, producer):
    dataset = register(producer, location_template="events/dt={partition}/")
    s3.put(f"events/dt={DAY}/hour=05/_SUCCESS", b"")
    s3.put(f"events/dt={DAY}/_SUCCESS/", b"")  # a folder placeholder named like the marker
    assert sweep(dataset).partitions_found == 0
    assert ready_keys(dataset) == set()


@pytest.mark.parametrize("flat", [False, True])
def test_partition_not_in_the_last_segment(s3, producer, settings, flat):
    if not flat:
        settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 1}
    orders = register(producer, "orders", location_template="exports/dt={partition}/orders/")
    returns = register(producer, "returns", location_template="exports/dt={partition}/returns/")
    assert orders.poll_group_id == returns.poll_group_id
    land(s3, "exports/dt={partition}/orders/", "2026-11-26")
    land(s3, "exports/dt={partition}/returns/", "2026-11-26")
    assert sweep(orders).partitions_found == 2
    land(s3, "exports/dt={partition}/orders/", "2026-11-27")
    land(s3, "exports/dt={partition}/orders/", DAY)
    s3.put(f"exports/dt={DAY}/returns/part-0.parquet")
    report = sweep(orders, now=NOW + timedelta(minutes=5))
    assert report.listing == ("flat" if flat else "delimiter")
    assert ready_keys(orders) == {"2026-11-26", "2026-11-27", DAY}
    assert ready_keys(returns) == {"2026-11-26"}
    land(s3, "exports/dt={partition}/returns/", "2026-11-27")
    s3.put(f"exports/dt={DAY}/returns/_SUCCESS", b"")
    report = sweep(orders, now=NOW + timedelta(minutes=10))
    assert ready_keys(returns) == {"2026-11-26", "2026-11-27", DAY}


# --- marker look-alikes and manifests ---------------------------------------------------------


def test_a_zero_byte_marker_completes_and_a_placeholder_does_not(s3, producer):
    dataset = register(producer)
    s3.put("sales/orders/dt=2026-11-27/_SUCCESS/", b"")
    s3.put(f"sales/orders/dt={DAY}/_SUCCESS", b"")
    sweep(dataset)
    assert ready_keys(dataset) == {DAY}


def test_spark_temporary_files_are_not_data_files(s3, producer):
    """Hadoop's hidden-path filter skips any path with a component starting with ``_`` or
    ``.``: a leftover ``_temporary/`` attempt is not one of the partition's files."""
    dataset = register(producer, completion_signal="manifest")
    base = f"sales/orders/dt={DAY}/"
    s3.put(base + "_manifest.json", json.dumps({"expected_files": 2}).encode())
    s3.put(base + "part-0.parquet")
    s3.put(base + "part-1.parquet")
    s3.put(base + "_temporary/0/_temporary/attempt_1/part-1.parquet")
    s3.put(base + ".spark-staging-1/part-1.parquet")
    report = sweep(dataset)
    rev = Partition.objects.get(dataset=dataset, key=DAY).current_revision
    assert report.partitions_found == 1, rev.metadata


def test_a_manifest_listing_fewer_files_than_present(s3, producer):
    dataset = register(producer, completion_signal="manifest")
    base = f"sales/orders/dt={DAY}/"
    s3.put(base + "_manifest.json", json.dumps({"expected_files": 3, "files": ["a", "b"]}).encode())
    s3.put(base + "a")
    s3.put(base + "b")
    assert sweep(dataset).partitions_found == 1  # the files listed rule (docs)


# --- page boundaries --------------------------------------------------------------------------


@pytest.mark.parametrize("count", [999, 1000, 1001, 2000])
def test_page_boundaries_of_partition_prefixes(s3, producer, count):
    dataset = register(
        producer, partitioning=Dataset.Partitioning.HOURLY, location_template="h/dt={partition}/"
    )
    start = NOW - timedelta(hours=count)
    keys = [(start + timedelta(hours=i)).strftime("%Y-%m-%dT%H") for i in range(count)]
    s3.put_many([f"h/dt={k}/_SUCCESS" for k in keys])
    report = sweep(dataset, full=True)
    assert report.error == ""
    assert report.partitions_found == count


@pytest.mark.parametrize("count", [499, 500, 501, 1000])
def test_page_boundaries_of_a_flat_listing(s3, producer, count):
    # two objects per partition: 1,000 objects for 500 partitions
    dataset = register(
        producer, partitioning=Dataset.Partitioning.HOURLY, location_template="h/dt={partition}/"
    )
    first = (NOW - timedelta(hours=count + 1)).strftime("%Y-%m-%dT%H")
    s3.put(f"h/dt={first}/part-0", b"x")
    s3.put(f"h/dt={first}/_SUCCESS", b"")
    assert sweep(dataset, full=True).partitions_found == 1
    start = NOW - timedelta(hours=count)
    keys = [(start + timedelta(hours=i)).strftime("%Y-%m-%dT%H") for i in range(count)]
    s3.put_many([f"h/dt={k}/part-0" for k in keys], body=b"x")
    s3.put_many([f"h/dt={k}/_SUCCESS" for k in keys])
    report = sweep(dataset, now=NOW + timedelta(minutes=5))
    assert (report.error, report.listing) == ("", "flat")
    assert report.partitions_found == count


# --- rewritten markers ------------------------------------------------------------------------


def restated(dataset):
    return list(
        Notification.objects.filter(dataset=dataset, type=Notification.Type.PARTITION_RESTATED)
    )


@pytest.mark.parametrize(
    ("template", "marker"),
    [
        ("sales/orders/dt={partition}/", "_SUCCESS"),
        ("sales/order items+ü/dt={partition}/", "_SUCCESS"),
        ("exports/dt={partition}/orders/", "_SUCCESS"),
        ("sales/orders/dt={partition}/", "meta/_DONE"),
    ],
)
@pytest.mark.parametrize("flat", [False, True])
def test_a_rewritten_marker_is_restated_once(s3, producer, settings, flat, template, marker):
    if not flat:
        settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 1}
    dataset = register(producer, location_template=template, success_marker=marker)
    land(s3, template, "2026-11-27", marker=marker)
    assert sweep(dataset).partitions_found == 1
    land(s3, template, DAY, marker=marker)
    with time_machine.travel(NOW + HOUR / 4, tick=False):
        s3.put(template.format(partition="2026-11-27") + marker, b"")  # same ETag, new time
    r = sweep(dataset, now=NOW + HOUR)
    assert r.listing == ("flat" if flat else "delimiter")
    assert (r.partitions_found, r.partitions_restated) == (1, 1)
    with time_machine.travel(NOW + HOUR * 1.2, tick=False):
        s3.put(template.format(partition=DAY) + marker, b"new")  # new ETag
    r = sweep(dataset, now=NOW + 2 * HOUR)
    assert r.partitions_restated == 1
    for i in range(3, 5):
        r = sweep(dataset, now=NOW + i * HOUR)
        assert r.partitions_restated == 0
    assert sorted(n.payload["data"]["partition"] for n in restated(dataset)) == [
        "2026-11-27",
        DAY,
    ]


def test_a_nested_manifest_is_not_a_data_file(s3, producer):
    dataset = register(producer, completion_signal="manifest", manifest_name="meta/manifest.json")
    base = f"sales/orders/dt={DAY}/"
    s3.put(base + "meta/manifest.json", json.dumps({"expected_files": 2}).encode())
    s3.put(base + "part-0.parquet")
    s3.put(base + "part-1.parquet")
    report = sweep(dataset)
    rev = Partition.objects.get(dataset=dataset, key=DAY).current_revision
    assert report.partitions_found == 1, rev.metadata


# --- layouts: the bucket's root, unpartitioned siblings ----------------------------------------


def test_a_group_at_the_bucket_root(s3_bucket, settings, producer):
    store = s3_bucket("tidemark-root", "")
    settings.TIDEMARK_STORAGE_SOURCES = {
        "lake": {"url": "s3://tidemark-root", "options": store.options()}
    }
    store.root = ""
    store.key = lambda relative: relative
    dataset = register(producer, location_template="dt={partition}/")
    report = two_sweeps(dataset, store, "dt={partition}/", ["2026-11-27", DAY])
    assert report.partitions_found == 2


@pytest.mark.parametrize("flat", [False, True])
def test_unpartitioned_siblings(s3, producer, settings, flat):
    if not flat:
        settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 1}
    lookup = register(
        producer, "lookup", partitioning=Dataset.Partitioning.NONE, location_template="m/lookup/"
    )
    dash = register(producer, "dash", location_template="m/lookup-{partition}/")
    under = register(producer, "under", location_template="m/lookup_{partition}/")
    assert len({lookup.poll_group_id, dash.poll_group_id, under.poll_group_id}) == 1
    land(s3, "m/lookup-{partition}/", "2026-11-26")
    assert sweep(lookup).partitions_found == 1
    s3.put("m/lookup/part-0", b"x")
    s3.put("m/lookup/_SUCCESS", b"")
    land(s3, "m/lookup-{partition}/", DAY)
    land(s3, "m/lookup_{partition}/", DAY)
    report = sweep(lookup, now=NOW + timedelta(minutes=5))
    assert report.listing == ("flat" if flat else "delimiter")
    assert report.partitions_found == 3
    assert ready_keys(lookup) == {""}


# --- rewritten markers in a dataset-first group with long histories ----------------------------


@pytest.mark.parametrize("flat", [False, True])
def test_restated_once_in_a_dataset_first_group_with_long_histories(s3, producer, settings, flat):
    if not flat:
        settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 1}
    templates = {n: f"ds/{n}_{{partition}}/" for n in ("t1", "t10", "t2")}
    sets = _history(s3, producer, templates)
    t1 = sets["t1"]
    land(s3, templates["t10"], "2026-11-28")
    r = sweep(t1)
    assert r.partitions_found == 1
    three_ago = (TODAY - timedelta(days=3)).isoformat()
    # each history's partitions were ready by event: the first pass adopts baselines
    r = sweep(t1, now=NOW + HOUR)
    assert (r.error, r.recent_pass, r.partitions_restated) == ("", True, 0)
    with time_machine.travel(NOW + HOUR * 1.2, tick=False):
        s3.put(f"ds/t1_{three_ago}/_SUCCESS", b"v2")
        s3.put(f"ds/t10_{DAY}/_SUCCESS", b"v2")
    r = sweep(t1, now=NOW + 2 * HOUR)
    assert r.listing == ("flat" if flat else "delimiter")
    assert r.partitions_restated == 2, r
    r = sweep(t1, now=NOW + 3 * HOUR)
    assert r.partitions_restated == 0
    told = sorted(
        (n.dataset.name, n.payload["data"]["partition"])
        for n in Notification.objects.filter(type=Notification.Type.PARTITION_RESTATED)
    )
    assert told == [("t1", three_ago), ("t10", DAY)]


# --- the same on a local store ----------------------------------------------------------------


def put_local(root, relative: str, body: bytes = b"x") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


@pytest.mark.parametrize("template", ODD)
def test_odd_characters_on_a_local_store(lake, producer, template):
    dataset = register(producer, location_template=template, completion_signal="manifest")
    base = template.format(partition=DAY)
    put_local(lake, base + "_manifest.json", json.dumps({"expected_files": 2}).encode())
    put_local(lake, base + "hour=01/p 1+%.csv")
    put_local(lake, base + "hour=02/p 2.csv")
    put_local(
        lake, template.format(partition="2026-11-27") + "_manifest.json", b'{"expected_files": 0}'
    )
    report = sweep(dataset)
    assert report.error == ""
    assert ready_keys(dataset) == {"2026-11-27", DAY}
    put_local(
        lake, template.format(partition="2026-11-29") + "_manifest.json", b'{"expected_files": 0}'
    )
    # An early partition of a dataset whose latest day is ready: the hourly sweep of every
    # dataset finds it.
    assert sweep(dataset, now=NOW + HOUR).partitions_found == 1


# --- hourly partitions across a DST change (cost) ---------------------------------------------


def test_hourly_local_keys_across_the_dst_change_leave_no_gap(s3, producer):
    """2026-11-01 01:00 happens twice in New York: its one key covers two hours, so 40 days
    of ready hourly keys hold one key fewer than real hours and no gap."""
    dataset = register(
        producer,
        partitioning=Dataset.Partitioning.HOURLY,
        partition_timezone=NEW_YORK.key,
        location_template="h/dt={partition}/",
    )
    hours = range(int((NOW - HOUR - datetime(2026, 10, 20, tzinfo=UTC)) / HOUR))
    keys = list(
        dict.fromkeys(
            (datetime(2026, 10, 20, tzinfo=UTC) + i * HOUR)
            .astimezone(NEW_YORK)
            .strftime("%Y-%m-%dT%H")
            for i in hours
        )
    )
    s3.put_many([f"h/dt={k}/_SUCCESS" for k in keys])
    periods = {k: parse_partition_key("hourly", k, NEW_YORK.key) for k in keys}
    parts = Partition.objects.bulk_create(
        Partition(dataset=dataset, key=k, start_at=p.start, end_at=p.end)
        for k, p in periods.items()
    )
    revisions = PartitionRevision.objects.bulk_create(
        PartitionRevision(partition=p, state="ready", ready_at=p.end_at) for p in parts
    )
    for part, revision in zip(parts, revisions, strict=True):
        part.current_revision = revision
    Partition.objects.bulk_update(parts, ["current_revision"])

    report = sweep(dataset)

    # Nothing is missing: one listing after the newest ready hour, empty (not 35 days).
    assert (report.error, report.objects_seen) == ("", 0)


def test_hourly_periods_count_keys_across_both_dst_changes(s3, producer):
    dataset = register(
        producer,
        partitioning=Dataset.Partitioning.HOURLY,
        partition_timezone=NEW_YORK.key,
        location_template="h/dt={partition}/",
    )
    # 2026-03-08 00:00 EST to 04:00 EDT: keys T00, T01, T03 (T02 does not exist).
    spring = (datetime(2026, 3, 8, 5, tzinfo=UTC), datetime(2026, 3, 8, 8, tzinfo=UTC))
    # 2026-11-01 00:00 EDT to 04:00 EST: keys T00, T01 (two hours), T02, T03.
    fall = (datetime(2026, 11, 1, 4, tzinfo=UTC), datetime(2026, 11, 1, 9, tzinfo=UTC))
    assert poll_plan._periods(dataset, *spring) == 3
    assert poll_plan._periods(dataset, *fall) == 4


def test_a_listing_from_a_prefix_start_does_not_reread_the_previous_range(s3, producer):
    """Unpartitioned ``m/lookup/`` sorts before ``m/lookup_{partition}/``; a dataset with
    nothing ready starts just before its prefix (StartAfter ``lookup``), which must not read
    ``lookup/`` a second time."""
    lookup = register(
        producer, "lookup", partitioning=Dataset.Partitioning.NONE, location_template="m/lookup/"
    )
    register(producer, "under", location_template="m/lookup_{partition}/")
    s3.put_many([f"m/lookup/part-{i}" for i in range(3)], body=b"x")
    s3.put("m/lookup/_SUCCESS", b"")
    first = sweep(lookup)  # delimiter, measures 4 objects in lookup/
    assert first.partitions_found == 1
    land(s3, "m/lookup_{partition}/", DAY, files=3)
    report = sweep(lookup, now=NOW + HOUR)  # a sweep of every dataset, lookup/ included
    assert (report.listing, report.narrow) == ("flat", False)
    assert report.partitions_found == 1
    assert (report.objects_seen, report.objects_per_partition) == (8, 4.0)


@pytest.mark.parametrize("flat", [False, True])
def test_a_rewritten_marker_of_an_unpartitioned_dataset_is_restated_once(
    s3, producer, settings, flat
):
    if not flat:
        settings.TIDEMARK_POLL = {**settings.TIDEMARK_POLL, "flat_max_objects": 1}
    lookup = register(
        producer, "lookup", partitioning=Dataset.Partitioning.NONE, location_template="m/lookup/"
    )
    register(producer, "under", location_template="m/lookup_{partition}/")
    s3.put("m/lookup/part-0", b"x")
    s3.put("m/lookup/_SUCCESS", b"")
    assert sweep(lookup).partitions_found == 1
    with time_machine.travel(NOW + HOUR / 4, tick=False):
        s3.put("m/lookup/_SUCCESS", b"")
    land(s3, "m/lookup_{partition}/", DAY)
    r = sweep(lookup, now=NOW + HOUR)
    assert r.listing == ("flat" if flat else "delimiter")
    assert (r.partitions_found, r.partitions_restated) == (1, 1)
    assert sweep(lookup, now=NOW + 2 * HOUR).partitions_restated == 0
    # A new snapshot of an unpartitioned dataset is told as partition.ready (docs/concepts).
    told = Notification.objects.filter(dataset=lookup, type=Notification.Type.PARTITION_READY)
    assert told.count() == 2
