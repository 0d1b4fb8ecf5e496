"""The delivery doorbell coalesces per process: a lone commit rings at once, commits
within ``settings.TIDEMARK_DOORBELL_INTERVAL`` seconds of a ring share one ring at the end
of the interval."""

from __future__ import annotations

import threading
import time

import pytest

from catalog import doorbell

INTERVAL = 0.2  # seconds; long enough that a slow test machine stays inside it


@pytest.fixture
def rings(monkeypatch, settings) -> list[tuple[float, str]]:
    """Every ring sent: (time.monotonic(), name of the thread that sent it)."""
    sent: list[tuple[float, str]] = []
    deadline = time.monotonic() + 5
    while doorbell._pending and time.monotonic() < deadline:  # an earlier test's ring
        time.sleep(0.01)
    settings.TIDEMARK_DOORBELL_INTERVAL = INTERVAL
    monkeypatch.setattr(doorbell, "_last_rung", float("-inf"))
    monkeypatch.setattr(
        doorbell,
        "_send",
        lambda task: sent.append((time.monotonic(), threading.current_thread().name)),
    )
    return sent


def _wait_for(rings: list, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(rings) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_lone_commit_rings_at_once_from_its_own_thread(rings):
    doorbell._ring_deliveries_soon()
    assert [name for _, name in rings] == [threading.current_thread().name]


def test_commits_right_after_a_ring_share_one_ring_at_the_end_of_the_interval(rings):
    doorbell._ring_deliveries_soon()
    committed = time.monotonic()
    for _ in range(5):
        doorbell._ring_deliveries_soon()
    assert len(rings) == 1  # only the first rang so far
    _wait_for(rings, 2)
    time.sleep(INTERVAL / 2)  # no further ring follows
    assert len(rings) == 2
    (first, _), (second, ringer) = rings
    assert ringer == "doorbell"
    assert second - first >= INTERVAL * 0.95 and second > committed


def test_a_commit_while_the_ringer_sends_gets_a_ring_of_its_own(rings):
    doorbell._ring_deliveries_soon()
    doorbell._ring_deliveries_soon()  # deferred
    _wait_for(rings, 2)
    doorbell._ring_deliveries_soon()  # right after the deferred ring: deferred again
    _wait_for(rings, 3)
    assert len(rings) == 3
    assert rings[2][0] - rings[1][0] >= INTERVAL * 0.95
