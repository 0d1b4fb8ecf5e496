"""Doorbells coalesce per process and task: a lone commit rings at once, commits within
``settings.TIDEMARK_DOORBELL_INTERVAL`` seconds of a ring of the same task share one ring
at the end of the interval."""

from __future__ import annotations

import threading
import time

import pytest

from catalog import doorbell

DELIVER, LINEAGE = doorbell.DELIVER_DUE, "lineage.tasks.process_events"
INTERVAL = 0.2  # seconds; long enough that a slow test machine stays inside it


@pytest.fixture
def rings(monkeypatch, settings) -> list[tuple[float, str, str]]:
    """Every ring sent: (time.monotonic(), name of the thread that sent it, task)."""
    sent: list[tuple[float, str, str]] = []
    deadline = time.monotonic() + 5
    while doorbell._pending and time.monotonic() < deadline:  # an earlier test's ring
        time.sleep(0.01)
    settings.TIDEMARK_DOORBELL_INTERVAL = INTERVAL
    monkeypatch.setattr(doorbell, "_last_rung", {})
    monkeypatch.setattr(
        doorbell,
        "_send",
        lambda task: sent.append((time.monotonic(), threading.current_thread().name, task)),
    )
    return sent


def _wait_for(rings: list, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(rings) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_lone_commit_rings_at_once_from_its_own_thread(rings):
    doorbell._ring_soon(DELIVER)
    assert [(name, task) for _, name, task in rings] == [(threading.current_thread().name, DELIVER)]


def test_commits_right_after_a_ring_share_one_ring_at_the_end_of_the_interval(rings):
    doorbell._ring_soon(DELIVER)
    committed = time.monotonic()
    for _ in range(5):
        doorbell._ring_soon(DELIVER)
    assert len(rings) == 1  # only the first rang so far
    _wait_for(rings, 2)
    time.sleep(INTERVAL / 2)  # no further ring follows
    assert len(rings) == 2
    (first, _, _), (second, ringer, task) = rings
    assert (ringer, task) == ("doorbell", DELIVER)
    assert second - first >= INTERVAL * 0.95 and second > committed


def test_a_commit_while_the_ringer_sends_gets_a_ring_of_its_own(rings):
    doorbell._ring_soon(DELIVER)
    doorbell._ring_soon(DELIVER)  # deferred
    _wait_for(rings, 2)
    doorbell._ring_soon(DELIVER)  # right after the deferred ring: deferred again
    _wait_for(rings, 3)
    assert len(rings) == 3
    assert rings[2][0] - rings[1][0] >= INTERVAL * 0.95


def test_each_task_coalesces_apart(rings):
    doorbell._ring_soon(DELIVER)
    doorbell._ring_soon(LINEAGE)  # another task: rings at once too
    assert [task for _, _, task in rings] == [DELIVER, LINEAGE]
    for _ in range(3):
        doorbell._ring_soon(LINEAGE)
        doorbell._ring_soon(DELIVER)
    _wait_for(rings, 4)
    time.sleep(INTERVAL / 2)
    assert sorted(task for _, _, task in rings[2:]) == sorted([DELIVER, LINEAGE])
    assert all(name == "doorbell" for _, name, _ in rings[2:])
    assert len(rings) == 4


@pytest.mark.django_db
def test_ring_after_commit_rings_once_the_transaction_commits(
    rings, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        doorbell.ring_after_commit(LINEAGE)
        assert rings == []
    assert len(callbacks) == 1
    assert [task for _, _, task in rings] == [LINEAGE]


@pytest.mark.django_db
def test_silenced_commits_ring_nothing_and_the_silence_ends_with_the_block(
    rings, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with doorbell.silenced():
            doorbell.ring_deliveries()
            with doorbell.silenced():  # nested: the outer block stays silent after
                doorbell.ring_after_commit(LINEAGE)
            doorbell.ring_after_commit(LINEAGE)
        doorbell.ring_deliveries()
    assert len(callbacks) == 1
    assert [task for _, _, task in rings] == [DELIVER]


def test_silence_is_per_thread(rings):
    registered = []

    def other_thread():
        registered.append(getattr(doorbell._silence, "on", False))

    with doorbell.silenced():
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert registered == [False]
