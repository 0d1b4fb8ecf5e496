"""Lineage run rows as processing writes them: the run locked (or created) for the
event's transaction, its state saved in one fixed statement, and its edges to the usage
rows it has counted. Raw SQL on PostgreSQL: every processed event runs these."""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.utils import timezone

from catalog.models import Job

from .. import openlineage
from ..models import LineageEvent, LineageRun, LineageRunEdge

_RUN_SAVED_FIELDS = [
    "state",
    "started_at",
    "ended_at",
    "last_event_at",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
]


def run_save(run: LineageRun, *, now: datetime) -> None:
    """Write the locked run's state, times and parent. One fixed UPDATE whatever changed,
    so PostgreSQL prepares it once (the ORM's update compiled anew for every event)."""
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
    """The run row, locked for this transaction; created (with this event's job, team
    and parent) when it is the first event of the run to be processed.

    On PostgreSQL one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` creates or locks
    it; elsewhere an insert that ignores conflicts, then a locking read."""
    parent = parsed.parent
    run = LineageRun(
        run_id=parsed.run_id,
        job=job,
        team=event.team,
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
                run_id, job_id, team_id, parent_run_id, parent_job_namespace,
                parent_job_name, state, created_at, updated_at
            )
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (run_id) DO UPDATE SET run_id = r.run_id
            RETURNING {", ".join(f"r.{column}" for column in _RUN_COLUMNS)}
            """,  # noqa: S608 - model table and placeholders only
            [
                new.run_id,
                new.job_id,
                new.team_id,
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
