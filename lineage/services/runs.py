"""Lineage run rows as processing writes them: the run locked (or created) for the
event's transaction, its state saved in one fixed statement, and its edges to the usage
rows it has counted (raw SQL on PostgreSQL: every processed event runs these); and, more
rarely, a run taken over by verified events, the conflicts recorded of events kept out
of a run, and edges moved when usage rows merge (an alias folded into its dataset)."""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from catalog.models import Job
from catalog.services import run_conflicts, usage

from .. import openlineage, runstate
from ..models import LineageEvent, LineageRun, LineageRunEdge

_RUN_SAVED_FIELDS = [
    "job_id",
    "team_id",
    "verified",
    "state",
    "started_at",
    "ended_at",
    "last_event_at",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
]


def run_save(run: LineageRun, *, now: datetime) -> None:
    """Write the locked run's owner, state, times and parent. One fixed UPDATE whatever
    changed, so PostgreSQL prepares it once (the ORM's update compiled anew for every
    event)."""
    run.updated_at = now
    if connection.vendor != "postgresql":
        LineageRun.objects.filter(pk=run.pk).update(
            **{column: getattr(run, column) for column in _RUN_SAVED_FIELDS}, updated_at=now
        )
        return
    assignments = ", ".join(f"{column} = %s" for column in [*_RUN_SAVED_FIELDS, "updated_at"])
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {LineageRun._meta.db_table} SET {assignments} WHERE id = %s",  # noqa: S608
            [*(getattr(run, column) for column in _RUN_SAVED_FIELDS), now, run.pk],
        )


def run_edges_add(run: LineageRun, usage_ids: list[int]) -> list[int]:
    """Insert the run's edges to these usage rows that it does not have yet.

    Returns:
        The usage ids whose edge is new: the runs these usage rows have not counted.
    """
    if connection.vendor != "postgresql":
        known = set(
            LineageRunEdge.objects.filter(run=run, usage_id__in=usage_ids).values_list(
                "usage_id", flat=True
            )
        )
        new_ids = [pk for pk in usage_ids if pk not in known]
        LineageRunEdge.objects.bulk_create([LineageRunEdge(run=run, usage_id=pk) for pk in new_ids])
        return new_ids
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LineageRunEdge._meta.db_table} (run_id, usage_id, created_at)
            SELECT %s::bigint, usage_id, %s::timestamptz
            FROM unnest(%s::bigint[]) AS usage_id
            ON CONFLICT ON CONSTRAINT uniq_run_edge DO NOTHING
            RETURNING usage_id
            """,  # noqa: S608 - model tables and placeholders only
            [run.pk, timezone.now(), usage_ids],
        )
        return sorted(pk for (pk,) in cursor)


def run_lock_or_create(
    parsed: openlineage.OpenLineageEvent, *, job: Job, event: LineageEvent
) -> LineageRun:
    """The run row, locked for this transaction; created (with this event's job, team,
    verified and parent) when it is the first event of the run to be processed.

    On PostgreSQL one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` creates or locks
    it; elsewhere an insert that ignores conflicts, then a locking read."""
    parent = parsed.parent
    run = LineageRun(
        run_id=parsed.run_id,
        job=job,
        team=event.team,
        verified=event.verified,
        parent_run_id=parent.run_id if parent else None,
        parent_job_namespace=parent.job_namespace if parent else "",
        parent_job_name=parent.job_name if parent else "",
    )
    if connection.vendor == "postgresql":
        return _run_upsert(run)
    LineageRun.objects.bulk_create([run], ignore_conflicts=True)
    return (
        LineageRun.objects.select_for_update(of=("self",))
        .select_related("job")
        .get(run_id=parsed.run_id)
    )


_RUN_COLUMNS = [
    "id",
    "run_id",
    "job_id",
    "team_id",
    "verified",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
    "state",
    "started_at",
    "ended_at",
    "last_event_at",
    "created_at",
    "updated_at",
]


def _run_upsert(new: LineageRun) -> LineageRun:
    """Insert the run, or lock the existing row (the no-op update takes its row lock),
    and read it back, in one statement."""
    stamp = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LineageRun._meta.db_table} AS r (
                run_id, job_id, team_id, verified, parent_run_id, parent_job_namespace,
                parent_job_name, state, created_at, updated_at
            )
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (run_id) DO UPDATE SET run_id = r.run_id
            RETURNING {", ".join(f"r.{column}" for column in _RUN_COLUMNS)}
            """,  # noqa: S608 - model table and placeholders only
            [
                new.run_id,
                new.job_id,
                new.team_id,
                new.verified,
                new.parent_run_id,
                new.parent_job_namespace,
                new.parent_job_name,
                LineageRun.State.NEW,
                stamp,
                stamp,
            ],
        )
        row = cursor.fetchone()
    run = LineageRun(**dict(zip(_RUN_COLUMNS, row, strict=True)))
    run._state.adding = False
    run._state.db = connection.alias
    if run.job_id == new.job_id:
        run.job = new.job
    return run


def run_conflict_record(
    run: LineageRun, *, event: LineageEvent, job: Job, reason: str, now: datetime
) -> None:
    """Record that ``event`` (naming ``job``) was kept out of ``run`` for ``reason`` (a
    ``runstate`` conflict): it is shown to governance, and changes nothing else."""
    run_conflicts.run_conflicts_record(
        run=_run_side(run),
        events=[_conflicting(event, job_id=job.pk, reason=reason)],
        now=now,
    )


def run_take_over(run: LineageRun, *, job: Job, event: LineageEvent, now: datetime) -> None:
    """Make the locked ``run``, which only unverified events made, the run of ``job``
    and ``event``'s team, verified, as if no event had been applied to it yet: its
    state, times and parent are cleared (the caller applies ``event`` next), every run
    its edges counted is withdrawn from their usage rows (a row left with no run is
    deleted), and each of its unverified events whose job was recorded is a conflict
    with the run now (``runstate.conflict_reason``; the others are judged when
    processed). Not saved: the caller saves the run once ``event`` is applied."""
    usage_ids = sorted(
        LineageRunEdge.objects.filter(run=run).values_list("usage_id", flat=True).distinct()
    )
    LineageRunEdge.objects.filter(run=run).delete()
    usage.usage_runs_withdraw(usage_ids=usage_ids)
    run.job, run.team, run.verified = job, event.team, True
    run.state, run.started_at, run.ended_at, run.last_event_at = runstate.NEW, None, None, None
    run.parent_run_id, run.parent_job_namespace, run.parent_job_name = None, "", ""

    earlier = list(
        LineageEvent.objects.filter(run_id=run.run_id, verified=False)
        .exclude(pk=event.pk)
        .order_by("id")
    )
    identities = Q(pk__in=[])
    for other in earlier:
        identities |= Q(namespace=other.job_namespace, name=other.job_name)
    jobs = {(j.namespace, j.name): j.pk for j in Job.objects.filter(identities)}
    conflicts = []
    for other in earlier:
        job_id = jobs.get((other.job_namespace, other.job_name))
        if job_id is None:  # not processed yet: judged when it is
            continue
        reporter = runstate.Reporter(job_id=job_id, team_id=other.team_id, verified=False)
        reason = runstate.conflict_reason(run.reporter(), reporter)
        conflicts.append(_conflicting(other, job_id=job_id, reason=reason))
    run_conflicts.run_conflicts_record(run=_run_side(run), events=conflicts, now=now)


def _run_side(run: LineageRun) -> run_conflicts.RunSide:
    return run_conflicts.RunSide(
        run_id=run.run_id, job_id=run.job_id, team_id=run.team_id, verified=run.verified
    )


def _conflicting(
    event: LineageEvent, *, job_id: int, reason: str
) -> run_conflicts.ConflictingEvent:
    return run_conflicts.ConflictingEvent(
        event_id=event.pk,
        job_id=job_id,
        team_id=event.team_id,
        verified=event.verified,
        event_type=event.event_type,
        event_time=event.event_time,
        reason=reason,
    )


def run_edges_merge(merges: dict[int, int]) -> dict[int, int]:
    """Point the run edges of usage rows about to be merged away at the rows they merge
    into (``catalog.services.aliases.UsageMerge``): a run with an edge to both keeps one.

    Args:
        merges: ``{usage id merged away: usage id it merges into}``.

    Returns:
        Per usage id merged into, how many runs had an edge to both rows (counted twice
        in the sum of their run counts); ids with none are left out.
    """
    counted_twice: dict[int, int] = {}
    for folded, into in sorted(merges.items()):
        both = LineageRunEdge.objects.filter(
            usage_id=folded,
            run_id__in=LineageRunEdge.objects.filter(usage_id=into).values("run_id"),
        )
        deleted, _ = both.delete()
        if deleted:
            counted_twice[into] = counted_twice.get(into, 0) + deleted
        LineageRunEdge.objects.filter(usage_id=folded).update(usage_id=into)
    return counted_twice
