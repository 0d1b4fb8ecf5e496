"""Lineage events that named a run they do not belong to, recorded by lineage processing
(``lineage.runstate.judge`` decides) so that governance sees them: the run conflicts
report and the governance page read ``RunConflict``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from ..models import RunConflict


@dataclass(frozen=True)
class RunSide:
    """Whose a run is: its OpenLineage ``run_id``, its job's and team's ids, and whether
    verified events made it."""

    run_id: uuid.UUID
    job_id: int
    team_id: int
    verified: bool


@dataclass(frozen=True)
class ConflictingEvent:
    """One lineage event kept out of a run: its id, the job it names (catalog job id),
    the sending team's id, verified, ``eventType`` (empty: none), ``eventTime`` (aware
    UTC) and why it conflicts (``RunConflict.Reason``)."""

    event_id: int
    job_id: int
    team_id: int
    verified: bool
    event_type: str
    event_time: datetime
    reason: str


def run_conflicts_record(*, run: RunSide, events: list[ConflictingEvent], now: datetime) -> None:
    """Record these events as conflicts with ``run``: one row per event, created, or
    updated to the run's owner and the reason given (when the run changed hands, or the
    event is processed again). One statement. Call inside the caller's transaction.

    Args:
        now: aware UTC instant a new row is detected at (an existing row keeps its own).
    """
    if not events:
        return
    RunConflict.objects.bulk_create(
        [
            RunConflict(
                run_id=run.run_id,
                run_job_id=run.job_id,
                run_team_id=run.team_id,
                run_verified=run.verified,
                event_id=event.event_id,
                event_job_id=event.job_id,
                event_team_id=event.team_id,
                event_verified=event.verified,
                event_type=event.event_type,
                event_time=event.event_time,
                reason=event.reason,
                detected_at=now,
            )
            for event in sorted(events, key=lambda e: e.event_id)
        ],
        update_conflicts=True,
        unique_fields=["event_id"],
        update_fields=["run_job", "run_team", "run_verified", "reason"],
    )
