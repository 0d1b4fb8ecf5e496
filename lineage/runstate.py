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

Whose events a run is made of (``judge``): a run belongs to one job. Once a verified
event (its team claims the job's namespace) has been applied, only verified events naming
that job are; before, the unverified events of the job and team that first reported it
are, until a verified event takes the run over (what the unverified ones made of it is
set aside). Every other event is a conflict: kept and flagged, never merged.
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


# What ``judge`` says of an event: apply it, take the run over, or one of the conflicts.
ATTACH, TAKE_OVER = "attach", "take_over"
OTHER_JOB, UNVERIFIED, OTHER_TEAM = "other_job", "unverified", "other_team"
CONFLICTS = (OTHER_JOB, UNVERIFIED, OTHER_TEAM)


@dataclass(frozen=True)
class Reporter:
    """Who stands behind a run, or an event of it: the job it names (the catalog job's
    id), the sending team's id, and whether the team claims the job's namespace."""

    job_id: int
    team_id: int
    verified: bool


def judge(run: Reporter, event: Reporter) -> str:
    """What an event may do to a run, given who the run's applied events came from.

    Returns:
        ``ATTACH``: fold the event into the run (a verified event of the verified run's
        job; or an unverified event of the job and team of a run no verified event has
        reached). ``TAKE_OVER``: a verified event reaches a run only unverified events
        made: the run becomes its job's and team's, and only verified events count from
        then on. Otherwise the conflict (``conflict_reason``).
    """
    if run.verified:
        if event.verified and event.job_id == run.job_id:
            return ATTACH
    elif event.verified:
        return TAKE_OVER
    elif (event.job_id, event.team_id) == (run.job_id, run.team_id):
        return ATTACH
    return conflict_reason(run, event)


def conflict_reason(run: Reporter, event: Reporter) -> str:
    """Why an event that ``judge`` does not let in conflicts with the run: it names
    another job (``OTHER_JOB``), it is unverified while the run is verified
    (``UNVERIFIED``), or another team reported the run's job, both unverified
    (``OTHER_TEAM``)."""
    if event.job_id != run.job_id:
        return OTHER_JOB
    if run.verified and not event.verified:
        return UNVERIFIED
    return OTHER_TEAM
