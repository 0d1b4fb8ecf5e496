"""A run's state folds its events the same way in any order (lineage.runstate): pure."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from lineage import runstate
from lineage.runstate import RunFacts

T0 = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def fold(events: list[tuple[str | None, int]]) -> RunFacts:
    facts = RunFacts()
    for event_type, minute in events:
        facts = runstate.apply(facts, event_type=event_type, event_time=_at(minute))
    return facts


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([("START", 0)], RunFacts("running", _at(0), None, _at(0))),
        ([("START", 0), ("COMPLETE", 5)], RunFacts("complete", _at(0), _at(5), _at(5))),
        ([("COMPLETE", 5)], RunFacts("complete", None, _at(5), _at(5))),
        ([("START", 0), ("RUNNING", 2), ("FAIL", 5)], RunFacts("fail", _at(0), _at(5), _at(5))),
        ([("RUNNING", 2)], RunFacts("running", None, None, _at(2))),
        ([("OTHER", 2)], RunFacts("new", None, None, _at(2))),
        ([(None, 2)], RunFacts("new", None, None, _at(2))),
        # Terminal states stick: a later START or RUNNING does not reopen the run.
        ([("COMPLETE", 5), ("START", 7)], RunFacts("complete", _at(7), _at(5), _at(7))),
        ([("ABORT", 5), ("RUNNING", 6)], RunFacts("abort", None, _at(5), _at(6))),
        # Two different ends: the earliest wins; on a tie fail > abort > complete.
        ([("COMPLETE", 5), ("FAIL", 4)], RunFacts("fail", None, _at(4), _at(5))),
        ([("COMPLETE", 5), ("FAIL", 6)], RunFacts("complete", None, _at(5), _at(6))),
        ([("COMPLETE", 5), ("ABORT", 5)], RunFacts("abort", None, _at(5), _at(5))),
        # Several STARTs (a retried emit): the earliest is the start.
        ([("START", 3), ("START", 1)], RunFacts("running", _at(1), None, _at(3))),
    ],
)
def test_apply_folds_events_into_state_and_times(events, expected):
    assert fold(events) == expected


@pytest.mark.parametrize(
    "events",
    [
        [("START", 0), ("RUNNING", 2), ("COMPLETE", 5)],
        [("START", 0), ("OTHER", 9), ("FAIL", 5), ("COMPLETE", 6)],
        [("START", 0), ("START", 0), ("COMPLETE", 5), ("COMPLETE", 5)],
        [("RUNNING", 1), ("ABORT", 3), ("COMPLETE", 3), (None, 4)],
    ],
)
def test_apply_gives_the_same_result_in_every_order_and_with_repeats(events):
    results = {fold(list(order)) for order in itertools.permutations(events)}
    assert len(results) == 1
    assert fold(events + events) == fold(events)


def test_apply_returns_the_same_facts_when_nothing_changes():
    facts = fold([("START", 0), ("COMPLETE", 5)])
    assert runstate.apply(facts, event_type="START", event_time=_at(0)) is facts
