"""Jobs and their observed usage of datasets, recorded by lineage: jobs seen, usage rows
observed and their run counts, and what a database role accessed while no team claimed
it, held until a team does.

Usage of a symlink alias of a catalog dataset (``DatasetAlias``) is recorded under the
dataset's own identity, so every reader (reports, the lineage graph, consumer lists,
stale declarations) sees one dataset; ``usages_fold`` moves usage recorded under an
identity before it became an alias."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, models
from django.db.models.functions import Greatest, Least
from django.utils import timezone

from ..models import Dataset, DatasetAlias, DatasetUsage, Job, Team, UnclaimedUsage


def job_record(*, namespace: str, name: str, team: Team | None, seen_at: datetime) -> Job:
    """Record that the job ``namespace`` / ``name`` was seen at ``seen_at``.

    Creates the job, or widens its first/last seen times. Call inside the caller's
    transaction (lineage processing).

    Args:
        namespace, name: the OpenLineage job identity, as received (at most 255 and 1024
            characters).
        team: the verified owner (the reporting team claims the job namespace), which
            becomes the job's ``team``; None for an unverified report, which never changes
            the owner.
        seen_at: aware instant (the event's time), UTC.

    On PostgreSQL this is one statement (``INSERT ... ON CONFLICT DO UPDATE``, which
    locks the job row until the caller's transaction ends); elsewhere (SQLite, the
    embedded mode) a get-or-create and, when a seen time widens or the owner changes, an
    update.

    Returns:
        The job row: on PostgreSQL as this call left it; elsewhere with its seen times as
        before this call when it existed.
    """
    if connection.vendor == "postgresql":
        return _job_upsert(namespace=namespace, name=name, team=team, seen_at=seen_at)
    job, created = Job.objects.get_or_create(
        namespace=namespace,
        name=name,
        defaults={"team": team, "first_seen_at": seen_at, "last_seen_at": seen_at},
    )
    if created:
        return job
    changes = _seen_widened(job, seen_at)
    if team is not None and job.team_id != team.pk:
        changes["team"] = team
    if changes:
        Job.objects.filter(pk=job.pk).update(**changes)
        if team is not None:
            job.team = team
    return job


def _seen_widened(row: Job | DatasetUsage, seen_at: datetime) -> dict[str, Any]:
    """The updates that widen ``row``'s ``first_seen_at``/``last_seen_at`` to take in
    ``seen_at`` (empty when they hold it already), as LEAST/GREATEST of the stored value:
    seen times only widen, so a stale read can only skip an update that is not needed."""
    changes: dict[str, Any] = {}
    if seen_at < row.first_seen_at:
        changes["first_seen_at"] = Least(models.F("first_seen_at"), seen_at)
    if seen_at > row.last_seen_at:
        changes["last_seen_at"] = Greatest(models.F("last_seen_at"), seen_at)
    return changes


def _job_upsert(*, namespace: str, name: str, team: Team | None, seen_at: datetime) -> Job:
    """``job_record`` in one PostgreSQL statement."""
    columns = ["id", "namespace", "name", "team_id", "first_seen_at", "last_seen_at", "created_at"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {Job._meta.db_table} AS j
                (namespace, name, team_id, first_seen_at, last_seen_at, created_at)
            VALUES (%s, %s, %s, %s, %s, %s)
            ON CONFLICT ON CONSTRAINT uniq_job_identity DO UPDATE SET
                team_id = COALESCE(EXCLUDED.team_id, j.team_id),
                first_seen_at = LEAST(j.first_seen_at, EXCLUDED.first_seen_at),
                last_seen_at = GREATEST(j.last_seen_at, EXCLUDED.last_seen_at)
            RETURNING {", ".join(columns)}
            """,  # noqa: S608 - model table and placeholders only
            [namespace, name, team.pk if team else None, seen_at, seen_at, timezone.now()],
        )
        row = cursor.fetchone()
    job = Job(**dict(zip(columns, row, strict=True)))
    job._state.adding = False
    job._state.db = connection.alias
    if team is not None:
        job.team = team
    return job


def _canonical(namespace: str, name: str) -> tuple[str, str, int | None]:
    """The identity usage of ``namespace`` / ``name`` is recorded under, and the catalog
    dataset it is usage of: a registered dataset's own identity, else the dataset whose
    symlink alias it is, else itself (no dataset)."""
    dataset_id = (
        Dataset.objects.filter(namespace=namespace, name=name).values_list("pk", flat=True).first()
    )
    if dataset_id is not None:
        return namespace, name, dataset_id
    alias = (
        DatasetAlias.objects.filter(
            alias_namespace=namespace, alias_name=name, kind=DatasetAlias.Kind.SYMLINK
        )
        .values_list("namespace", "name", "dataset_id")
        .first()
    )
    return alias if alias is not None else (namespace, name, None)


def usage_observe(
    *,
    job: Job,
    namespace: str,
    name: str,
    direction: str,
    team: Team,
    verified: bool,
    seen_at: datetime,
) -> DatasetUsage:
    """Record that ``job`` read or wrote a dataset, as ``team`` reported, at ``seen_at``.

    Upserts the usage row of (job, identity, direction, team, verified): created with both
    seen times at ``seen_at``, or widened; linked to the registered dataset with this
    identity. An identity that is a symlink alias of a catalog dataset (``DatasetAlias``)
    and no registered dataset's is recorded under the dataset's identity. Does not count
    a run: ``usage_count_run`` does, once per run. Call inside the caller's transaction.

    Args:
        namespace, name: the dataset identity, already normalised with
            ``catalog.identity.normalise_dataset_identity``.
        direction: ``read`` or ``write`` (``DatasetUsage.Direction``).
        verified: the reporting team claims the job's namespace.
        seen_at: aware instant (the event's time), UTC.

    Returns:
        The usage row.
    """
    namespace, name, dataset_id = _canonical(namespace, name)
    usage, created = DatasetUsage.objects.get_or_create(
        job=job,
        dataset_namespace=namespace,
        dataset_name=name,
        direction=direction,
        team=team,
        verified=verified,
        defaults={"dataset_id": dataset_id, "first_seen_at": seen_at, "last_seen_at": seen_at},
    )
    if created:
        return usage
    changes = _seen_widened(usage, seen_at)
    if dataset_id is not None and usage.dataset_id != dataset_id:
        changes["dataset_id"] = dataset_id
    if changes:
        DatasetUsage.objects.filter(pk=usage.pk).update(**changes)
    return usage


def usage_count_run(*, usage: DatasetUsage) -> None:
    """Add one run to ``usage.run_count`` (in SQL, safe under concurrency). The caller
    makes sure each run is counted once per usage row (lineage keeps a per-run edge)."""
    DatasetUsage.objects.filter(pk=usage.pk).update(run_count=models.F("run_count") + 1)


def usages_observe(
    *,
    job: Job,
    edges: list[tuple[str, str, str]],
    team: Team,
    verified: bool,
    seen_at: datetime,
) -> dict[tuple[str, str, str], int]:
    """Record that ``job`` read or wrote each of several datasets, as ``team`` reported,
    at ``seen_at``: ``usage_observe`` for a whole event at once.

    On PostgreSQL one statement looks up the datasets registered with these identities
    (or declaring them as symlink aliases, whose usage is recorded under the dataset's
    identity) and upserts every usage row (``INSERT ... ON CONFLICT DO UPDATE``, seen
    times widened with LEAST/GREATEST), locking the rows in the order of their recorded
    identity and direction; elsewhere (SQLite, the embedded mode) ``usage_observe`` runs
    for each edge. Does not count runs: ``usage_count_runs`` does. Call inside the
    caller's transaction.

    Args:
        edges: distinct ``(direction, namespace, name)``, identities already normalised
            with ``catalog.identity.normalise_dataset_identity``; sort them (by identity)
            so that concurrent callers lock rows in one order.
        verified: the reporting team claims the job's namespace.
        seen_at: aware instant (the event's time), UTC.

    Returns:
        The usage row's id for each edge, keyed by the edge; an alias and its dataset
        (both named by one event) share a row.
    """
    if not edges:
        return {}
    if connection.vendor != "postgresql":
        return {
            (direction, namespace, name): usage_observe(
                job=job,
                namespace=namespace,
                name=name,
                direction=direction,
                team=team,
                verified=verified,
                seen_at=seen_at,
            ).pk
            for direction, namespace, name in edges
        }
    values = ", ".join(["(%s, %s, %s)"] * len(edges))
    edge_params = [value for edge in edges for value in edge]
    params = [job.pk, team.pk, verified, seen_at, seen_at, timezone.now()]
    # An alias and its dataset in one event fold into one row: DISTINCT ON, since an
    # upsert may not touch a row twice.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH e (direction, namespace, name) AS (VALUES {values}),
            r AS (
                SELECT e.direction, e.namespace AS sent_namespace, e.name AS sent_name,
                    COALESCE(d.id, a.dataset_id) AS dataset_id,
                    CASE WHEN d.id IS NULL AND a.id IS NOT NULL
                        THEN a.namespace ELSE e.namespace END AS namespace,
                    CASE WHEN d.id IS NULL AND a.id IS NOT NULL
                        THEN a.name ELSE e.name END AS name
                FROM e
                LEFT JOIN {Dataset._meta.db_table} d
                    ON d.namespace = e.namespace AND d.name = e.name
                LEFT JOIN {DatasetAlias._meta.db_table} a
                    ON a.alias_namespace = e.namespace AND a.alias_name = e.name
                    AND a.kind = 'symlink'
            ),
            upserted AS (
                INSERT INTO {DatasetUsage._meta.db_table} AS u (
                    job_id, team_id, verified, first_seen_at, last_seen_at, created_at,
                    run_count, dataset_id, direction, dataset_namespace, dataset_name
                )
                SELECT DISTINCT ON (r.namespace, r.name, r.direction)
                    %s::bigint, %s::bigint, %s::boolean, %s::timestamptz, %s::timestamptz,
                    %s::timestamptz, 0, r.dataset_id, r.direction, r.namespace, r.name
                FROM r
                ORDER BY r.namespace, r.name, r.direction
                ON CONFLICT ON CONSTRAINT uniq_dataset_usage DO UPDATE SET
                    dataset_id = COALESCE(EXCLUDED.dataset_id, u.dataset_id),
                    first_seen_at = LEAST(u.first_seen_at, EXCLUDED.first_seen_at),
                    last_seen_at = GREATEST(u.last_seen_at, EXCLUDED.last_seen_at)
                RETURNING u.direction, u.dataset_namespace, u.dataset_name, u.id
            )
            SELECT r.direction, r.sent_namespace, r.sent_name, upserted.id
            FROM r JOIN upserted ON upserted.direction = r.direction
                AND upserted.dataset_namespace = r.namespace AND upserted.dataset_name = r.name
            """,  # noqa: S608 - model tables and placeholders only
            [*edge_params, *params],
        )
        return {(direction, namespace, name): pk for direction, namespace, name, pk in cursor}


def usage_count_runs(*, usage_ids: list[int], runs: int = 1) -> None:
    """Add ``runs`` runs to the ``run_count`` of each of these usage rows, in one
    statement (in SQL, safe under concurrency). The caller makes sure each run is counted
    once per usage row (lineage keeps a per-run edge; collectors count new executions)."""
    if not usage_ids or runs <= 0:
        return
    if connection.vendor != "postgresql":
        DatasetUsage.objects.filter(pk__in=usage_ids).update(run_count=models.F("run_count") + runs)
        return
    # Hand-written: every processed lineage event runs it, and the ORM's compiling of the
    # F() update cost more than the statement.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {DatasetUsage._meta.db_table} SET run_count = run_count + %s "  # noqa: S608
            "WHERE id = ANY(%s::bigint[])",
            [runs, list(usage_ids)],
        )


def usage_runs_withdraw(*, usage_ids: list[int]) -> int:
    """Take one run off each of these usage rows: a run whose events turned out not to be
    its own (lineage: verified events took an unverified run over). A row left with no
    run has nothing else behind it and is deleted. Call inside the caller's transaction;
    the caller withdraws each run once per row (lineage deletes the run's edges).

    Rows are locked in identity order, the order lineage processing takes them in.

    Returns:
        The number of rows deleted.
    """
    rows = list(
        DatasetUsage.objects.select_for_update()
        .filter(pk__in=usage_ids)
        .order_by("dataset_namespace", "dataset_name", "direction", "id")
        .values_list("pk", "run_count")
    )
    emptied = [pk for pk, runs in rows if runs <= 1]
    DatasetUsage.objects.filter(pk__in=[pk for pk, runs in rows if runs > 1]).update(
        run_count=models.F("run_count") - 1
    )
    if emptied:
        DatasetUsage.objects.filter(pk__in=emptied).delete()
    return len(emptied)


def usages_hold(
    *, job: Job, pattern: str, counts: dict[tuple[str, str, str], int], seen_at: datetime
) -> int:
    """Keep what the database role behind ``job`` was seen accessing while no team claims
    it (``pattern``: the ``db_role`` claim pattern), attributed to no team, until a team
    claims the role (``held_usage_attribute``). Call inside the caller's transaction.

    Args:
        counts: accesses per ``(direction, namespace, name)`` (identities normalised),
            added to what is held.
        seen_at: aware UTC instant they were seen at.

    Returns:
        The number of held rows touched.
    """
    for (direction, namespace, name), count in sorted(counts.items()):
        held, created = UnclaimedUsage.objects.get_or_create(
            job=job,
            dataset_namespace=namespace,
            dataset_name=name,
            direction=direction,
            defaults={
                "pattern": pattern,
                "first_seen_at": seen_at,
                "last_seen_at": seen_at,
                "access_count": count,
            },
        )
        if not created:
            UnclaimedUsage.objects.filter(pk=held.pk).update(
                access_count=models.F("access_count") + count,
                first_seen_at=Least(models.F("first_seen_at"), seen_at),
                last_seen_at=Greatest(models.F("last_seen_at"), seen_at),
            )
    return len(counts)


def held_usage_attribute(*, team: Team, pattern: str) -> int:
    """Make what was held for the database role ``pattern`` (``usages_hold``) verified
    usage of ``team``, which now claims it: its jobs get ``team`` as owner, each held row
    becomes (or widens) a usage row with its seen times, and its access count is added to
    the usage's ``run_count``; the held rows are deleted. Running it twice, or from the
    claim and a collector at once, attributes each held row once (they are locked and
    deleted in the caller's transaction).

    Returns:
        The number of held rows attributed.
    """
    held = list(
        UnclaimedUsage.objects.select_for_update()
        .filter(pattern=pattern)
        .select_related("job")
        .order_by("job_id", "dataset_namespace", "dataset_name", "direction")
    )
    for row in held:
        job = job_record(
            namespace=row.job.namespace, name=row.job.name, team=team, seen_at=row.last_seen_at
        )
        edge = (row.direction, row.dataset_namespace, row.dataset_name)
        ids = usages_observe(
            job=job, edges=[edge], team=team, verified=True, seen_at=row.first_seen_at
        )
        usages_observe(job=job, edges=[edge], team=team, verified=True, seen_at=row.last_seen_at)
        usage_count_runs(usage_ids=list(ids.values()), runs=row.access_count)
    if held:
        UnclaimedUsage.objects.filter(pk__in=[row.pk for row in held]).delete()
    return len(held)
