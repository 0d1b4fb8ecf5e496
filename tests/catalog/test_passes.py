"""Periodic passes that catch up at once (``catalog.passes``): the freshness evaluation and
the change-notice scheduler take batch after batch while work is due, ring themselves when
their time budget runs out, and run one at a time, on real PostgreSQL.

Thousands of datasets sharing one deadline through real worker processes:
``test_freshness_workers.py``; the time to judge N of them: ``bench/freshness.py``.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from catalog import doorbell, freshness, passes, tasks
from catalog.models import ChangeNotice, Dataset, LatePartition, Notification
from tests.catalog.factories import DatasetFactory, TeamFactory

NOW = datetime.now(UTC).replace(microsecond=0)
_TODAY_6 = NOW.replace(hour=6, minute=0, second=0)
DEADLINE = _TODAY_6 if _TODAY_6 <= NOW else _TODAY_6 - timedelta(days=1)  # the latest passed


@pytest.fixture
def rings(monkeypatch) -> list[str]:
    """The tasks rung at once (``doorbell.ring_now``), recorded instead of sent."""
    rung: list[str] = []
    monkeypatch.setattr(doorbell, "ring_now", rung.append)
    return rung


def due_datasets(count: int) -> None:
    """``count`` daily datasets sharing the latest 06:00 deadline (UTC), late by now."""
    owner = TeamFactory(slug="orders")
    Dataset.objects.bulk_create(
        Dataset(
            namespace="s3://lake",
            name=f"raw/table_{i:04d}",
            owner=owner,
            partitioning=Dataset.Partitioning.DAILY,
            sla_cron="0 6 * * *",
            next_deadline_at=DEADLINE,
            next_check_at=DEADLINE,
        )
        for i in range(count)
    )


def late_notices() -> int:
    return Notification.objects.filter(type=Notification.Type.DATASET_LATE).count()


# --- run_batches ------------------------------------------------------------------------


def test_a_pass_takes_batches_while_they_come_back_full_and_stops_at_a_short_one():
    sizes = iter([(200, True), (200, True), (37, False), (0, False)])
    summary = passes.run_batches(lambda: next(sizes), budget_seconds=60)
    assert (summary.batches, summary.handled, summary.more_due) == (3, 437, False)


def test_a_pass_stops_after_its_budget_and_says_more_is_due():
    ticks = iter([0.0, 20.0, 40.0, 61.0])  # the start, then after each batch
    summary = passes.run_batches(lambda: (200, True), budget_seconds=60, clock=lambda: next(ticks))
    assert (summary.batches, summary.handled, summary.more_due) == (3, 600, True)


def test_a_pass_always_runs_one_batch_even_with_no_budget():
    summary = passes.run_batches(lambda: (5, False), budget_seconds=0)
    assert (summary.batches, summary.more_due) == (1, False)


# --- the freshness evaluation ---------------------------------------------------------------


@pytest.mark.django_db
def test_one_tick_judges_every_dataset_of_a_shared_deadline(rings):
    due_datasets(450)  # more than two batches of 200

    assert tasks.evaluate_freshness() == 450

    assert LatePartition.objects.count() == late_notices() == 450
    assert not Dataset.objects.filter(next_check_at__lte=NOW).exists()
    assert rings == []  # nothing left: no further pass


@pytest.mark.django_db
def test_one_tick_catches_up_a_dataset_more_deadlines_behind_than_one_evaluation_judges(rings):
    """A minute cron after a day without evaluations: more deadlines than one evaluation
    of a dataset judges (``MAX_DEADLINES_PER_EVALUATION``); the pass carries on with it."""
    owner = TeamFactory(slug="orders")
    behind_since = NOW - timedelta(minutes=freshness.MAX_DEADLINES_PER_EVALUATION + 90)
    start = behind_since.replace(second=0) + timedelta(minutes=1)
    dataset = Dataset.objects.create(
        namespace="s3://lake",
        name="raw/clicks",
        owner=owner,
        partitioning=Dataset.Partitioning.HOURLY,
        sla_cron="* * * * *",
        next_deadline_at=start,
        next_check_at=start,
    )

    tasks.evaluate_freshness()

    dataset.refresh_from_db()
    assert dataset.next_check_at > NOW  # every deadline up to now judged in this tick
    newest_closed = (NOW.replace(minute=0, second=0) - timedelta(hours=1)).strftime("%Y-%m-%dT%H")
    assert LatePartition.objects.filter(dataset=dataset, partition_key=newest_closed).exists()
    assert rings == []


@pytest.mark.django_db
def test_a_pass_out_of_budget_rings_for_the_next_which_carries_on(rings, settings):
    settings.TIDEMARK_PASS_SECONDS = 0  # one batch a pass
    due_datasets(450)

    assert tasks.evaluate_freshness() == 200
    assert rings == [tasks.EVALUATE_FRESHNESS]
    assert tasks.evaluate_freshness() == 200  # the pass that ring starts
    assert tasks.evaluate_freshness() == 50
    assert rings == [tasks.EVALUATE_FRESHNESS] * 2  # the short batch ended the chain
    assert late_notices() == 450


def hold_pass(name: str, held: threading.Event, release: threading.Event, out: list) -> None:
    """In a thread of its own (a connection of its own): hold pass ``name`` until
    ``release`` is set."""
    try:
        with passes.single_flight(name) as got:
            out.append(got)
            held.set()
            release.wait(30)
    finally:
        held.set()
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_tick_while_a_pass_runs_returns_at_once_and_starts_no_second_chain(rings):
    due_datasets(10)
    held, release, out = threading.Event(), threading.Event(), []
    other = threading.Thread(target=hold_pass, args=(passes.FRESHNESS, held, release, out))
    other.start()
    try:
        assert held.wait(30) and out == [True]
        assert tasks.evaluate_freshness() == 0  # taken: this tick does nothing
        assert rings == [] and LatePartition.objects.count() == 0
        with passes.single_flight(passes.CHANGE_NOTICES) as got:
            assert got  # each kind of pass has its own guard
    finally:
        release.set()
        other.join(30)
    assert tasks.evaluate_freshness() == 10  # released (as by a crash): the next tick runs


@pytest.mark.django_db(transaction=True)
def test_the_guard_goes_with_a_dead_holders_connection(rings):
    with connection.cursor() as cursor:  # the holder's session ends without unlocking
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended('tidemark-pass:x', 0))")
    connection.close()
    with passes.single_flight("x") as got:
        assert got


# --- the change-notice scheduler ------------------------------------------------------------


@pytest.mark.django_db
def test_one_tick_sends_every_due_change_notice_step(rings):
    dataset = DatasetFactory()
    ChangeNotice.objects.bulk_create(
        ChangeNotice(
            dataset=dataset,
            kind=ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE,
            description=f"change {i}",
            announced_at=NOW - timedelta(days=10),
            effective_at=NOW + timedelta(days=4),  # its 7-day reminder is due
            next_step_at=NOW - timedelta(days=3),
        )
        for i in range(205)
    )

    assert tasks.send_change_notices() == 205

    assert not ChangeNotice.objects.filter(next_step_at__lte=NOW).exists()
    assert rings == []
