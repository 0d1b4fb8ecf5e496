"""Differences of cumulative counters between two reads (pure; no database).

A statistics view such as PostgreSQL's ``pg_stat_statements`` keeps, per entry (role,
database, query id), how many times the statement ran since the entry was created. What
ran *between* two collector runs is the difference. The view is not a log, so:

- an entry not seen before (new, or re-created after eviction) counts from zero: every
  call it holds happened since it was created, which is after the previous read or
  unknown (the first run counts what the statistics hold);
- a counter that went down was reset (``pg_stat_statements_reset`` for that entry, or
  evicted and re-created between two reads): it counts from zero again;
- a changed reset marker (``pg_stat_statements_info.stats_reset``) means every counter
  was reset: all count from zero;
- an entry that was in the previous read but is gone now was evicted (or reset): it is
  forgotten, and counts from zero if it comes back.

Reads are bounded: one run reads the entries after a key (``after``) in key order, up to
a limit, and the next run goes on from the last key read, starting over when a read
reaches the end. Eviction is only concluded for keys inside the range a read covered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Key = tuple[int, ...]


@dataclass(frozen=True)
class CounterDiff:
    """``deltas``: the increase of each key read that went up (keys with no increase are
    left out); ``counters``: every counter to remember for the next read."""

    deltas: dict[Key, int]
    counters: dict[Key, int]


def diff_counters(
    *,
    previous: Mapping[Key, int],
    previous_reset: str | None,
    reset: str | None,
    rows: Sequence[tuple[Key, int]],
    after: Key | None,
    reached_end: bool,
) -> CounterDiff:
    """Diff one bounded read of cumulative counters against what was remembered.

    Args:
        previous: the counters remembered from earlier reads, by key.
        previous_reset: the reset marker remembered (None: unknown).
        reset: the reset marker now (None: the source has none).
        rows: ``(key, counter)`` read now, in ascending key order, each key once, all
            greater than ``after``.
        after: the read covered keys greater than this (None: from the first key).
        reached_end: the read covered every key after ``after`` (it returned fewer rows
            than its limit); otherwise it covered keys up to the last row's only.

    Returns:
        A ``CounterDiff``.
    """
    if reset != previous_reset and previous_reset is not None:
        previous = {}
    last = rows[-1][0] if rows else None

    def covered(key: Key) -> bool:
        if after is not None and key <= after:
            return False
        return reached_end or (last is not None and key <= last)

    counters = {key: value for key, value in previous.items() if not covered(key)}
    deltas: dict[Key, int] = {}
    for key, value in rows:
        before = previous.get(key)
        delta = value if before is None or value < before else value - before
        if delta > 0:
            deltas[key] = delta
        counters[key] = value
    return CounterDiff(deltas=deltas, counters=counters)
