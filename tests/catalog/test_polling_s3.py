"""The fallback poll against moto's S3 server on loopback: real ``ListObjectsV2`` calls over
HTTP, with delimiters, 1,000-key pages, ``StartAfter`` and continuation tokens.

The server is session-wide (``tests/conftest.py``) and reset before each test.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import date, timedelta
from time import monotonic

import pytest

from catalog import polling
from catalog.models import (
    Dataset,
    Delivery,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    StorageGroup,
    StorageSweep,
)
from tests.catalog.factories import SubscriptionFactory
from tests.catalog.polling_helpers import NOW, ready_keys, record_ready, register, sweep

TODAY = NOW.date()


pytestmark = pytest.mark.usefixtures("frozen_clock")


# --- a lost event, a manifest -------------------------------------------------------------


def test_a_lost_event_is_found_once_and_told_once(s3, producer, consumer_endpoint):
    dataset = register(producer)
    SubscriptionFactory(team=consumer_endpoint.team, dataset=dataset, endpoint=consumer_endpoint)
    s3.put("sales/orders/dt=2026-11-28/part-0.parquet")
    s3.put("sales/orders/dt=2026-11-28/_SUCCESS", b"")

    first = sweep(dataset)
    again = sweep(dataset, now=NOW + timedelta(minutes=1))

    assert (first.error, first.partitions_found, first.found) == ("", 1, [f"{dataset} 2026-11-28"])
    # The parent once, then inside the one new partition.
    assert (first.list_calls, first.pages, first.objects_seen) == (2, 2, 1 + 2)
    revision = Partition.objects.get(dataset=dataset, key="2026-11-28").current_revision
    assert revision.state == PartitionRevision.State.READY
    assert revision.detected_by == PartitionRevision.DetectedBy.POLL
    assert revision.metadata["poll"] == {"files": 1, "reason": "_SUCCESS present"}
    assert ReadinessEvent.objects.get(revision=revision).source == ReadinessEvent.Source.POLL
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 1

    # Narrow: the latest day is ready and nothing else is due, so nothing is listed.
    assert (again.error, again.partitions_found, again.partitions_checked) == ("", 0, 0)
    assert (again.narrow, again.list_calls, again.pages, again.objects_seen) == (True, 0, 0, 0)
    assert Delivery.objects.filter(endpoint=consumer_endpoint).count() == 1


def test_a_manifest_partition_is_ready_once_its_third_file_lands(s3, producer):
    dataset = register(producer, completion_signal=Dataset.CompletionSignal.MANIFEST)
    base = "sales/orders/dt=2026-11-28/"
    s3.put(base + "_manifest.json", json.dumps({"expected_files": 3}).encode())
    s3.put(base + "part-0.parquet")
    s3.put(base + "part-1.parquet")

    first = sweep(dataset)

    partition = Partition.objects.get(dataset=dataset, key="2026-11-28")
    assert (first.error, first.partitions_found, first.incomplete) == ("", 0, 1)
    assert partition.current_revision.state == PartitionRevision.State.PENDING
    assert partition.current_revision.detected_by == PartitionRevision.DetectedBy.POLL
    assert partition.current_revision.metadata["poll"]["reason"] == "2 of 3 expected files present"

    s3.put(base + "part-2.parquet")
    second = sweep(dataset, now=NOW + timedelta(minutes=1))

    partition.refresh_from_db()
    assert (second.error, second.partitions_found, second.incomplete) == ("", 1, 0)
    assert partition.current_revision.state == PartitionRevision.State.READY
    assert partition.current_revision.manifest == {"expected_files": 3}
    assert partition.current_revision.metadata["poll"]["reason"] == "3 of 3 expected files present"


def test_folder_placeholders_are_not_data_files(s3, producer):
    """The S3 console's "Create folder" (and many tools) leave zero-byte keys ending in "/";
    they are not files, so they must not count towards ``expected_files``."""
    dataset = register(producer, completion_signal=Dataset.CompletionSignal.MANIFEST)
    base = "sales/orders/dt=2026-11-28/"
    s3.put(base, b"")
    s3.put(base + "data/", b"")
    s3.put(base + "_manifest.json", json.dumps({"expected_files": 2}).encode())
    s3.put(base + "data/part-0.parquet")
    s3.put(base + "data/part-1.parquet")

    report = sweep(dataset)

    assert (report.error, report.partitions_found) == ("", 1)
    revision = Partition.objects.get(dataset=dataset, key="2026-11-28").current_revision
    assert revision.metadata["poll"]["reason"] == "2 of 2 expected files present"


def test_listed_names_and_sizes_come_back_decoded(s3, producer):
    """botocore asks for URL-encoded listings; names with spaces, "+", "%" and non-ASCII
    must reach the manifest check as they were written."""
    dataset = register(producer, completion_signal=Dataset.CompletionSignal.MANIFEST)
    base = "sales/orders/dt=2026-11-28/"
    names = ["part 0.csv", "a+b%20c.csv", "données-ü.csv"]
    manifest = {"expected_files": 3, "files": [{"name": n, "size": 3} for n in names]}
    s3.put(base + "_manifest.json", json.dumps(manifest).encode())
    for name in names:
        s3.put(base + name, b"abc")

    report = sweep(dataset)

    assert (report.error, report.partitions_found) == ("", 1)
    revision = Partition.objects.get(dataset=dataset, key="2026-11-28").current_revision
    assert revision.metadata["poll"]["missing"] == []


# --- pagination and the lookback horizon ----------------------------------------------------

HISTORY_DAYS = 1500  # ~4 years of daily partitions, all known ready
NEW = [TODAY - timedelta(days=2), TODAY - timedelta(days=1)]  # landed, event lost
BACKFILL = date(2024, 6, 15)  # an old partition that landed late (outside the lookback)
HISTORY = [
    day
    for day in (TODAY - timedelta(days=3 + i) for i in range(HISTORY_DAYS + 1))
    if day != BACKFILL
]
assert len(HISTORY) == HISTORY_DAYS and HISTORY[-1] < BACKFILL
HISTORY_TEMPLATE = "history/events/dt={partition}/"


def _history_dir(day: date) -> str:
    return HISTORY_TEMPLATE.format(partition=day.isoformat())


@pytest.fixture
def history(s3_bucket, settings):
    """A reset moto holding bucket ``tidemark-history`` as source ``lake``: 1,500 ready
    days, 2 new ones and a late backfill."""
    store = s3_bucket("tidemark-history", "lake")
    store.put_many([_history_dir(day) + "_SUCCESS" for day in HISTORY])
    for day in [*NEW, BACKFILL]:
        store.put(_history_dir(day) + "part-0.parquet")
        store.put(_history_dir(day) + "_SUCCESS", b"")
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": store.source()}
    return store


def _events_with_known_history(team) -> Dataset:
    """A poll-only daily dataset whose 1,500 historical partitions are recorded ready."""
    dataset = register(team, "events", location_template=HISTORY_TEMPLATE)
    record_ready(dataset, HISTORY, detected_by=PartitionRevision.DetectedBy.POLL)
    return dataset


def test_a_regular_sweep_lists_only_what_follows_the_newest_ready_partition(history, producer):
    dataset = _events_with_known_history(producer)

    regular = sweep(dataset)

    assert regular.error == ""
    assert regular.full is False
    assert ready_keys(dataset, besides=HISTORY) == {d.isoformat() for d in NEW}
    assert (regular.partitions_checked, regular.partitions_found) == (2, 2)
    # One page for the parent, started after the newest ready day; one listing inside
    # each new day.
    assert (regular.list_calls, regular.pages) == (1 + 2, 1 + 2)
    parent_seen = regular.objects_seen - 2 * 2  # two objects inside each new day
    assert parent_seen == 2  # the two new days, not 1,503 prefixes nor the 35-day window

    # The late backfill is older than the newest ready day: only a full sweep sees it.
    full = sweep(dataset, now=NOW + timedelta(minutes=1), full=True)

    assert (full.error, full.partitions_checked, full.partitions_found) == ("", 1, 1)
    assert ready_keys(dataset, besides=HISTORY) == {d.isoformat() for d in [*NEW, BACKFILL]}
    # Two pages for 1,503 prefixes; the ready days are not listed inside.
    assert (full.list_calls, full.pages) == (1 + 1, 2 + 1)
    assert full.objects_seen == HISTORY_DAYS + 3 + 2


def test_a_full_sweep_pages_through_every_partition_prefix(history, producer):
    dataset = _events_with_known_history(producer)
    polling.sweep_due(now=NOW)  # the group's first sweep: full
    row = StorageSweep.objects.get(group_id=dataset.poll_group_id)

    assert (row.error, row.full) == ("", True)
    assert ready_keys(dataset, besides=HISTORY) == {d.isoformat() for d in [*NEW, BACKFILL]}
    assert (row.partitions_checked, row.partitions_found) == (3, 3)
    # The parent: 1,503 prefixes in pages of 1,000, so 2; then one listing per new day.
    assert (row.list_calls, row.pages) == (1 + 3, 2 + 3)
    assert row.objects_seen == HISTORY_DAYS + 3 + 3 * 2


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (lambda s3: s3.source() | {"url": "s3://no-such-bucket/landing"}, "does not exist"),
        (
            lambda s3: {
                "url": s3.url,
                # A port nothing listens on; one attempt, so the test need not wait out retries.
                "options": s3.options(
                    endpoint_url="http://127.0.0.1:9",
                    config_kwargs={"retries": {"total_max_attempts": 1}, "connect_timeout": 2},
                ),
            },
            "Could not connect",
        ),
    ],
    ids=["missing-bucket", "unreachable-endpoint"],
)
def test_a_storage_error_is_recorded_and_the_group_keeps_its_schedule(
    s3, producer, settings, source, message
):
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": source(s3)}
    dataset = register(producer)
    group = StorageGroup.objects.get(pk=dataset.poll_group_id)

    reports = polling.sweep_due(now=NOW)  # raises nothing

    assert len(reports) == 1
    assert message in reports[0].error
    assert reports[0].partitions_found == 0
    row = StorageSweep.objects.get(group=group)
    assert message in row.error
    group.refresh_from_db()
    # Same interval (no back-off on an error), next sweep one interval on, lease released,
    # and the failed sweep is not counted as a completed one.
    assert group.interval_seconds == 60
    assert group.next_sweep_at == NOW + timedelta(seconds=60)
    assert (group.lease_until, group.last_swept_at, group.last_full_sweep_at) == (None, None, None)


def test_a_storage_error_long_after_the_last_sweep_of_every_dataset_keeps_the_schedule(
    s3, producer, settings
):
    dataset = register(producer)
    polling.sweep_due(now=NOW)  # lists every dataset (nothing there yet)
    later = NOW + timedelta(hours=2)
    settings.TIDEMARK_STORAGE_SOURCES = {
        "lake": s3.source() | {"url": "s3://no-such-bucket/landing"}
    }
    group = StorageGroup.objects.get(pk=dataset.poll_group_id)
    StorageGroup.objects.filter(pk=group.pk).update(next_sweep_at=later)

    [report] = polling.sweep_due(now=later)

    assert (report.narrow, "does not exist" in report.error) == (False, True)
    group.refresh_from_db()
    # One interval on, as for any failed sweep: not due again at every pass because the
    # last sweep of every dataset is more than an hour old.
    assert group.next_sweep_at == later + timedelta(seconds=group.interval_seconds)
    assert group.last_wide_sweep_at == NOW


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """An HTTP endpoint that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)  # connections complete in the backlog; nothing ever reads them
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_store_that_never_answers_fails_the_sweep_within_a_bounded_time(
    s3, producer, settings, silent_endpoint
):
    """s3fs retries a timed-out call 5 times over botocore's 5 attempts: 25 read timeouts
    per List call. Bounded, it is botocore's 3 attempts (here 3 x 0.5 s and back-off)."""
    options = s3.options(endpoint_url=silent_endpoint, config_kwargs={"read_timeout": 0.5})
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": {"url": s3.url, "options": options}}
    dataset = register(producer)

    started = monotonic()
    report = sweep(dataset)
    took = monotonic() - started

    assert "ReadTimeoutError" in report.error
    assert took < 10, f"the sweep took {took:.1f} s"
