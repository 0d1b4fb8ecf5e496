"""Diffing cumulative counters between collector runs (lineage.collectors.counters)."""

from __future__ import annotations

import pytest

from lineage.collectors.counters import diff_counters

A, B, C, D = (1, 1, 10, 1), (1, 1, 20, 1), (2, 1, 5, 1), (3, 1, 7, 0)


def diff(previous, rows, *, after=None, reached_end=True, previous_reset="r1", reset="r1"):
    return diff_counters(
        previous=previous,
        previous_reset=previous_reset,
        reset=reset,
        rows=rows,
        after=after,
        reached_end=reached_end,
    )


@pytest.mark.parametrize(
    ("previous", "rows", "deltas"),
    [
        pytest.param({}, [(A, 3)], {A: 3}, id="first-read-counts-what-is-held"),
        pytest.param({A: 3}, [(A, 3)], {}, id="unchanged-is-nothing"),
        pytest.param({A: 3}, [(A, 5)], {A: 2}, id="increase"),
        pytest.param({A: 5}, [(A, 2)], {A: 2}, id="counter-went-down-reset"),
        pytest.param({A: 5}, [(A, 5), (B, 1)], {B: 1}, id="new-entry"),
        pytest.param({A: 5, B: 9}, [(A, 6)], {A: 1}, id="evicted-entry"),
        pytest.param({A: 5}, [(A, 0)], {}, id="reset-to-zero"),
    ],
)
def test_diff_counters_cases(previous, rows, deltas):
    result = diff(previous, rows)
    assert result.deltas == deltas
    assert result.counters == dict(rows)


def test_diff_counters_an_evicted_entry_that_returns_counts_from_zero():
    evicted = diff({A: 5, B: 9}, [(A, 5)])
    assert B not in evicted.counters
    assert diff(evicted.counters, [(A, 5), (B, 2)]).deltas == {B: 2}


def test_diff_counters_a_changed_reset_marker_is_a_new_baseline_for_every_key():
    result = diff({A: 5, B: 9}, [(A, 7), (B, 12)], reset="r2")
    assert result.deltas == {A: 7, B: 12}


def test_diff_counters_keeps_keys_outside_a_bounded_read():
    # Read 2 rows after A, stopped at the limit: D (beyond C) was not looked at.
    result = diff({A: 1, B: 1, C: 1, D: 4}, [(B, 2), (C, 1)], after=A, reached_end=False)
    assert result.deltas == {B: 1}
    assert result.counters == {A: 1, B: 2, C: 1, D: 4}


def test_diff_counters_forgets_keys_gone_from_the_range_read():
    # From after A to the end: C and D gone, A before the range is kept.
    result = diff({A: 1, B: 1, C: 1, D: 4}, [(B, 1)], after=A, reached_end=True)
    assert result.counters == {A: 1, B: 1}
    # Limited read up to C: B gone inside the range, D kept.
    result = diff({A: 1, B: 1, C: 1, D: 4}, [(C, 3)], after=A, reached_end=False)
    assert result.counters == {A: 1, C: 3, D: 4}
    assert result.deltas == {C: 2}
