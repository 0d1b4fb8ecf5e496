"""Marquez's jobs: their observed and stated inputs and outputs, facets and latest run."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Max

from catalog.models import (
    DatasetUsage,
    Job,
    StaticLineage,
)

from ...errors import MarquezNotFound
from ...models import LineageRun
from .. import shapes
from .common import Identity, Viewer, identities_q
from .runs import views_of_runs


def _job_views(viewer: Viewer, jobs: list[Job]) -> list[shapes.JobView]:
    """Jobs with their usage, facets and latest visible run."""
    used: dict[int, dict[str, list[Identity]]] = defaultdict(lambda: {"read": [], "write": []})
    rows = [
        *DatasetUsage.objects.filter(job__in=[j.pk for j in jobs]).values_list(
            "job_id", "dataset_namespace", "dataset_name", "direction"
        ),
        *StaticLineage.objects.filter(job__in=[j.pk for j in jobs]).values_list(
            "job_id", "dataset_namespace", "dataset_name", "direction"
        ),
    ]
    for job_pk, ns, name, direction in sorted(rows, key=lambda row: (row[1], row[2])):
        if (ns, name) not in used[job_pk][direction]:
            used[job_pk][direction].append((ns, name))
    latest_ids = (
        viewer.runs()
        .filter(job__in=[j.pk for j in jobs])
        .values("job_id")
        .annotate(latest=Max("id"))
        .values_list("latest", flat=True)
    )
    latest = list(LineageRun.objects.select_related("job").filter(pk__in=list(latest_ids)))
    run_views = {v.run_id: v for v in views_of_runs(latest)}
    by_job = {r.job_id: run_views[r.run_id] for r in latest}
    views = []
    for j in jobs:
        run_view = by_job.get(j.pk)
        views.append(
            shapes.JobView(
                namespace=j.namespace,
                name=j.name,
                created_at=j.first_seen_at,
                updated_at=j.last_seen_at,
                inputs=used[j.pk]["read"],
                outputs=used[j.pk]["write"],
                facets=run_view.facets.job if run_view else {},
                latest_runs=[shapes.run(run_view)] if run_view else [],
            )
        )
    return views


def job_list(
    *, viewer: Viewer, namespace: str | None, limit: int, offset: int
) -> tuple[int, list[dict]]:
    """Marquez's jobs (of ``namespace``, or of every namespace), by namespace and name."""
    jobs = Job.objects.all() if namespace is None else Job.objects.filter(namespace=namespace)
    jobs = jobs.order_by("namespace", "name")
    page = list(jobs[offset : offset + limit])
    return jobs.count(), [shapes.job(v) for v in _job_views(viewer, page)]


def job_get(*, viewer: Viewer, namespace: str, name: str) -> dict:
    """Marquez's job ``namespace``/``name`` (as events named it).

    Raises:
        MarquezNotFound: never seen (404).
    """
    found = Job.objects.filter(namespace=namespace, name=name).first()
    if found is None:
        raise MarquezNotFound(f"no job {name!r} in namespace {namespace!r}")
    return shapes.job(_job_views(viewer, [found])[0])


def job_views(viewer: Viewer, identities: list[Identity]) -> dict[Identity, dict]:
    """Marquez's jobs for these identities (for graph nodes), by identity."""
    jobs = list(Job.objects.filter(identities_q(identities)))
    return {(v.namespace, v.name): shapes.job(v) for v in _job_views(viewer, jobs)}


def job_exists(namespace: str, name: str) -> bool:
    """Whether the job was seen in lineage."""
    return Job.objects.filter(namespace=namespace, name=name).exists()
