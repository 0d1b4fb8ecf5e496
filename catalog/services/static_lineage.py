"""Design-time lineage from OpenLineage JobEvents and DatasetEvents (``StaticLineage``),
recorded by lineage processing: what a job states it reads and writes, and datasets
named with no job. Kept apart from observed usage (``catalog.services.usage``)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Max

from ..models import Job, StaticLineage, Team


def static_lineage_record(
    *,
    job: Job,
    edges: list[tuple[str, str, str]],
    team: Team,
    verified: bool,
    stated_at: datetime,
) -> bool:
    """Record a JobEvent's inputs and outputs as the job's static lineage, replacing what
    its earlier JobEvents stated (those as verified as this one: a verified statement and
    an unverified one are kept apart). Call inside the caller's transaction, with the job
    row locked (``usage.job_record`` locks it on PostgreSQL).

    Args:
        edges: ``(direction, namespace, name)`` with direction ``read`` or ``write`` and
            the normalised dataset identity; ``[]`` states that the job uses none.
        team: the team whose event it is; verified: the team claims the job's namespace.
        stated_at: the event's time, aware UTC.

    Returns:
        False when a later JobEvent of the job already stated its lineage (nothing
        changes: events may arrive out of order), else True.
    """
    current = StaticLineage.objects.filter(job=job, verified=verified)
    latest = current.aggregate(at=Max("stated_at"))["at"]
    if latest is not None and latest > stated_at:
        return False
    wanted = set(edges)
    stale = [
        pk
        for pk, direction, ns, name in current.values_list(
            "pk", "direction", "dataset_namespace", "dataset_name"
        )
        if (direction, ns, name) not in wanted
    ]
    if stale:
        StaticLineage.objects.filter(pk__in=stale).delete()
    for direction, namespace, name in sorted(wanted):
        StaticLineage.objects.update_or_create(
            job=job,
            dataset_namespace=namespace,
            dataset_name=name,
            direction=direction,
            verified=verified,
            defaults={"team": team, "stated_at": stated_at},
        )
    return True


def static_dataset_record(*, namespace: str, name: str, team: Team, stated_at: datetime) -> None:
    """Record that a DatasetEvent named the dataset (normalised identity), so it is a node
    of the lineage graph even when no job reads or writes it; a later event moves its
    ``stated_at`` (and ``team``) on, an earlier one changes nothing."""
    row, created = StaticLineage.objects.get_or_create(
        job=None,
        dataset_namespace=namespace,
        dataset_name=name,
        direction=StaticLineage.Direction.NONE,
        defaults={"team": team, "stated_at": stated_at},
    )
    if not created and stated_at > row.stated_at:
        StaticLineage.objects.filter(pk=row.pk, stated_at__lt=stated_at).update(
            team=team, stated_at=stated_at
        )
