"""A run's state from its events, whatever order they arrive in (pure).

OpenLineage RunEvent 2-0-2 asks for one START and one of COMPLETE, FAIL or ABORT per run,
plus any RUNNING and OTHER events; transports deliver them at least once and in any order.
``apply`` folds one event into what is known of a run so that the result depends only on
the set of events seen, never on their order or repeats:

- START and RUNNING make a ``new`` run ``running``; the start is the earliest START's
  ``eventTime``.
- COMPLETE, FAIL and ABORT end it. Terminal states stick: no later START or RUNNING
  reopens a run. Should a run get two different terminal events, it ends at the earliest
  (ties: fail over abort over complete), so the outcome does not depend on arrival order.
- OTHER (or no ``eventType``) changes no state; it only moves ``last_event_at``.
- ``last_event_at`` is the latest ``eventTime`` seen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

NEW, RUNNING, COMPLETE, FAIL, ABORT = "new", "running", "complete", "fail", "abort"
TERMINAL = (COMPLETE, FAIL, ABORT)
# Which terminal state wins a tie on eventTime.
_SEVERITY = {COMPLETE: 1, ABORT: 2, FAIL: 3}
_TERMINAL_EVENTS = {"COMPLETE": COMPLETE, "FAIL": FAIL, "ABORT": ABORT}


@dataclass(frozen=True)
class RunFacts:
    """What is known of a run; every datetime aware UTC, None when unknown."""

    state: str = NEW
    started_at: datetime | None = None
    ended_at: datetime | None = None
    last_event_at: datetime | None = None


def apply(facts: RunFacts, *, event_type: str | None, event_time: datetime) -> RunFacts:
    """Fold one RunEvent into ``facts``.

    Args:
        event_type: the event's ``eventType`` (``START``, ``RUNNING``, ``COMPLETE``,
            ``ABORT``, ``FAIL``, ``OTHER``) or None when it has none.
        event_time: the event's ``eventTime``, aware UTC.

    Returns:
        The new facts (``facts`` itself when nothing changed). Commutative and idempotent:
        any order of the same events, with repeats, gives the same result.
    """
    last = event_time if facts.last_event_at is None else max(facts.last_event_at, event_time)
    new = replace(facts, last_event_at=last)
    if event_type in ("START", "RUNNING"):
        if event_type == "START":
            started = facts.started_at
            new = replace(
                new, started_at=event_time if started is None else min(started, event_time)
            )
        if new.state == NEW:
            new = replace(new, state=RUNNING)
    elif event_type in _TERMINAL_EVENTS:
        state = _TERMINAL_EVENTS[event_type]
        if new.state not in TERMINAL or _ends_earlier(state, event_time, new):
            new = replace(new, state=state, ended_at=event_time)
    return facts if new == facts else new


def _ends_earlier(state: str, event_time: datetime, facts: RunFacts) -> bool:
    """Whether a terminal event (``state`` at ``event_time``) precedes the known end."""
    assert facts.ended_at is not None
    if event_time != facts.ended_at:
        return event_time < facts.ended_at
    return _SEVERITY[state] > _SEVERITY[facts.state]
