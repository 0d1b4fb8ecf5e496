"""Narrow sweeps (only the datasets with a partition due, between the sweeps of every
dataset): what an operator's sweep of one dataset and a group's later SLA checks leave."""

from __future__ import annotations

from datetime import timedelta

import pytest

import objectstore
from catalog import polling, storage
from catalog.models import Dataset, StorageGroup
from tests.catalog.polling_helpers import NOW, ready_keys, register, stored_history, sweep

TODAY = NOW.date()  # 2026-11-29: 2026-11-28 is the newest partition due

pytestmark = pytest.mark.usefixtures("frozen_clock")


def _group(s3, producer, names=("t0", "t1")) -> dict[str, Dataset]:
    """Poll-only datasets sharing ``datasets/``, each ready up to 2026-11-28."""
    templates = {name: f"datasets/{name}_{{partition}}/" for name in names}
    newest = {name: TODAY - timedelta(days=1) for name in names}
    return stored_history(s3, producer, templates, oldest=TODAY - timedelta(days=5), newest=newest)


def test_a_sweep_of_one_dataset_is_not_a_sweep_of_every_dataset(s3, producer):
    sets = _group(s3, producer)
    assert sweep(sets["t0"]).narrow is False  # every dataset listed at NOW

    # An operator sweeps t0 alone (poll_storage --dataset) 50 minutes later.
    by_hand = polling.sweep_dataset(sets["t0"], now=NOW + timedelta(minutes=50))
    assert (by_hand.full, by_hand.narrow, by_hand.datasets_listed) == (True, False, 1)
    group = StorageGroup.objects.get(pk=sets["t0"].poll_group_id)
    assert group.last_wide_sweep_at == NOW  # t1 was not listed then
    assert group.last_full_sweep_at is None  # nor the group's full sweep, still to come

    # t1's producer writes today's partition early: the hourly sweep of every dataset
    # finds it, an hour after the last one that listed t1.
    s3.put(f"datasets/t1_{TODAY.isoformat()}/_SUCCESS", b"")
    report = sweep(sets["t0"], now=NOW + timedelta(minutes=59, seconds=30))
    assert (report.narrow, report.datasets_listed) == (False, 2)
    assert TODAY.isoformat() in ready_keys(sets["t1"])


def _beat(until, *, every=timedelta(seconds=60), start=NOW + timedelta(seconds=60)):
    """The poll's beat from ``start`` to ``until``: the groups due, each minute."""
    at = start
    while at <= until:
        polling.sweep_due(now=at)
        at += every


def test_a_sweep_before_one_sla_check_plans_the_next_check_of_the_group(s3, producer):
    sets = _group(s3, producer)
    first, second = NOW + timedelta(minutes=10), NOW + timedelta(minutes=20)
    Dataset.objects.filter(pk=sets["t0"].pk).update(next_check_at=first)
    Dataset.objects.filter(pk=sets["t1"].pk).update(next_check_at=second)
    sweep(sets["t0"])
    _beat(first)
    # t0's check is judged; its next one is tomorrow.
    Dataset.objects.filter(pk=sets["t0"].pk).update(next_check_at=first + timedelta(days=1))
    _beat(second, start=first + timedelta(seconds=60))

    # A sweep lists t1 just before its check (a narrow sweep otherwise leaves t1, whose
    # latest day is ready, to the next sweep of every dataset).
    group = StorageGroup.objects.get(pk=sets["t0"].poll_group_id)
    just_before = group.sweeps.filter(
        started_at__gte=second - polling.CHECK_MARGIN - polling.DUE_SLACK,
        started_at__lte=second,
    )
    assert just_before.exists(), list(group.sweeps.values_list("started_at", "narrow"))


def test_a_check_in_the_past_does_not_hide_the_next_one(s3, producer):
    sets = _group(s3, producer)
    # t0's check is overdue (the evaluation is behind); t1's is in 20 minutes.
    Dataset.objects.filter(pk=sets["t0"].pk).update(next_check_at=NOW - timedelta(minutes=5))
    second = NOW + timedelta(minutes=20)
    Dataset.objects.filter(pk=sets["t1"].pk).update(next_check_at=second)

    sweep(sets["t0"])
    _beat(second)

    group = StorageGroup.objects.get(pk=sets["t0"].poll_group_id)
    just_before = group.sweeps.filter(
        started_at__gte=second - polling.CHECK_MARGIN - polling.DUE_SLACK,
        started_at__lte=second,
    )
    assert just_before.exists(), list(group.sweeps.values_list("started_at", "narrow"))


class _Failing(objectstore.Lister):
    """A lister whose every listing fails (the store is unreachable)."""

    def child_prefixes(self, *args, **kwargs):
        raise objectstore.StorageError("unreachable")

    def flat(self, *args, **kwargs):
        raise objectstore.StorageError("unreachable")


def test_a_failed_sweep_of_every_dataset_is_retried_wide(s3, producer):
    sets = _group(s3, producer)
    sweep(sets["t0"])
    group = StorageGroup.objects.get(pk=sets["t0"].poll_group_id)
    at = NOW + timedelta(minutes=59, seconds=30)
    failed = polling.sweep_group(group, now=at, lister=_Failing(storage.sources()["lake"]))
    assert (failed.narrow, bool(failed.error)) == (False, True)
    group.refresh_from_db()
    assert group.last_wide_sweep_at == NOW
    # The failed sweep keeps the group's interval.
    assert group.next_sweep_at == at + timedelta(seconds=group.interval_seconds)

    # t1's early partition: the next sweep lists every dataset again.
    s3.put(f"datasets/t1_{TODAY.isoformat()}/_SUCCESS", b"")
    report = sweep(sets["t0"], now=group.next_sweep_at)
    assert (report.narrow, report.error, report.partitions_found) == (False, "", 1)


def test_an_unpartitioned_poll_only_dataset_waits_until_found(s3, producer):
    snapshot = register(producer, "snap", location_template="datasets/snap/", partitioning="none")
    sets = _group(s3, producer)
    sweep(sets["t0"])  # wide: nothing at datasets/snap/ yet
    s3.put("datasets/snap/_SUCCESS", b"")
    report = sweep(sets["t0"], now=NOW + timedelta(minutes=5))
    assert (report.narrow, report.datasets_listed, report.partitions_found) == (True, 1, 1)
    assert ready_keys(snapshot) == {""}
