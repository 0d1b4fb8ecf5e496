"""Reads of lineage: runs and the raw events of a run, filtered by who may see them (the
lineage graph is read from the catalog's usage tables: ``catalog.selectors.lineage_graph``).

A run is visible to the team whose events it is made of, to the verified owner of its job, and
to keys with the ``governance`` scope; every event of a visible run is visible with it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.db.models import Min, OuterRef, Q, QuerySet, Subquery

from catalog import self_monitoring
from catalog.models import RunConflict, Team

from .errors import RunNotFound
from .models import LineageEvent, LineageRun


def _visible_runs(*, team: Team, everything: bool) -> QuerySet[LineageRun]:
    runs = LineageRun.objects.select_related("job", "team")
    if everything:
        return runs
    return runs.filter(Q(team=team) | Q(job__team=team))


def run_list(
    *,
    team: Team,
    everything: bool = False,
    job_namespace: str,
    job_name: str,
    state: str | None = None,
) -> QuerySet[LineageRun]:
    """The runs of one job that ``team`` may see, newest first.

    Args:
        everything: the caller holds the ``governance`` scope: every team's runs.
        job_namespace, job_name: the OpenLineage job identity, exactly as sent.
        state: only runs in this state (``new``, ``running``, ``complete``, ``fail``,
            ``abort``).
    """
    runs = _visible_runs(team=team, everything=everything).filter(
        job__namespace=job_namespace, job__name=job_name
    )
    if state:
        runs = runs.filter(state=state)
    return runs.order_by("-id")


def run_get(*, team: Team, everything: bool = False, run_id: uuid.UUID) -> LineageRun:
    """The run with OpenLineage ``runId`` ``run_id``, if ``team`` may see it.

    Raises:
        RunNotFound: no such run, or not visible to the team (404).
    """
    run = _visible_runs(team=team, everything=everything).filter(run_id=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id} that your team may see")
    return run


def run_event_list(*, run: LineageRun) -> QuerySet[LineageEvent]:
    """The raw events received for ``run`` (a run the caller may see), in event-time
    order, with the sending team joined, each annotated with ``conflict``: why it was
    kept out of the run (``RunConflict.Reason``), None when it was not."""
    conflict = RunConflict.objects.filter(event_id=OuterRef("pk")).values("reason")[:1]
    return (
        LineageEvent.objects.filter(run_id=run.run_id)
        .select_related("team")
        .annotate(conflict=Subquery(conflict))
        .order_by("event_time", "id")
    )


def event_lag(now: datetime) -> timedelta | None:
    """How long the oldest due OpenLineage event has waited to be processed at ``now``
    (aware UTC), or None when none is due. An event whose processing failed waits for its
    next attempt and is not due meanwhile. Tidemark's ``lineage`` system monitor."""
    oldest = LineageEvent.objects.filter(
        state=LineageEvent.State.PENDING, next_attempt_at__lte=now
    ).aggregate(at=Min("next_attempt_at"))["at"]
    return self_monitoring.oldest_wait(oldest, now=now)
