"""Notice periods and the steps of a change notice, as pure functions (no ORM).

A change notice is told once on announcement; then, at each configured reminder point
before ``effective_at`` that falls after the announcement, reminded to the consumer teams
that have not acknowledged it; then told once more when it takes effect. ``plan`` lists
those later steps; the scheduler keeps the time of the next one not yet handled
(``ChangeNotice.next_step_at``) and asks ``due`` what to do when that time has come.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

REMINDER = "reminder"
EFFECTIVE = "effective"


def earliest_effective_at(announced_at: datetime, notice_days: int) -> datetime:
    """The earliest ``effective_at`` (aware UTC) a change announced at ``announced_at`` may
    have under a notice period of ``notice_days`` whole days (24 h each, not calendar days).
    Also the earliest sunset of a dataset deprecated at ``announced_at``."""
    return announced_at + timedelta(days=notice_days)


@dataclass(frozen=True)
class Step:
    """Something the scheduler sends for a notice at ``at`` (aware UTC).

    ``kind``: ``reminder`` (``seconds_before`` ``effective_at``) or ``effective``
    (``seconds_before`` 0).
    """

    at: datetime
    kind: str
    seconds_before: int = 0


def plan(
    *, announced_at: datetime, effective_at: datetime, reminder_seconds: Iterable[int]
) -> list[Step]:
    """The steps after the announcement, in time order: a reminder ``s`` seconds before
    ``effective_at`` for each distinct positive ``s`` whose instant falls strictly after
    ``announced_at`` (a point already past at announcement is never sent), then the
    effective step at ``effective_at``.

    Args:
        announced_at, effective_at: aware UTC, ``effective_at >= announced_at``.
        reminder_seconds: seconds before ``effective_at``, any order; duplicates and
            non-positive values are ignored.

    Returns:
        ``list[Step]`` ordered by ``at``, the effective step last.
    """
    reminders = [
        Step(at=effective_at - timedelta(seconds=s), kind=REMINDER, seconds_before=s)
        for s in sorted({int(s) for s in reminder_seconds if int(s) > 0}, reverse=True)
    ]
    return [
        *(r for r in reminders if r.at > announced_at),
        Step(at=effective_at, kind=EFFECTIVE),
    ]


@dataclass(frozen=True)
class Due:
    """What to do for a notice at one instant: ``step`` to send (None: nothing) and
    ``next_at``, the next step's time (None: no step left)."""

    step: Step | None
    next_at: datetime | None


def due(steps: list[Step], *, since: datetime | None, now: datetime) -> Due:
    """The step to send at ``now`` among ``steps`` not handled before ``since``.

    Steps at or after ``since`` and at or before ``now`` are due. If the effective step
    is among them it wins and the reminders are skipped (telling consumers to prepare for
    a change already made helps nobody); otherwise only the latest due reminder is sent:
    after an outage a consumer gets one reminder, not every one it missed.

    Args:
        since: the stored ``next_step_at``; None means nothing is left to handle.
        now: aware UTC.

    Returns:
        ``Due``: the step to send (None when none is due) and the time of the first step
        after ``now`` (None when the effective step is due or handled).
    """
    if since is None:
        return Due(None, None)
    pending = [s for s in steps if since <= s.at <= now]
    later = [s for s in steps if s.at > now]
    effective = [s for s in pending if s.kind == EFFECTIVE]
    if effective:
        return Due(effective[0], None)
    return Due(pending[-1] if pending else None, later[0].at if later else None)
