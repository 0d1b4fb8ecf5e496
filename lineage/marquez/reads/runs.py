"""Marquez's runs, with their facets, datasets and the versions of their inputs."""

from __future__ import annotations

import uuid
from collections import defaultdict

from catalog.models import (
    Job,
)

from ...errors import MarquezNotFound
from ...models import LineageRun, LineageRunEdge
from .. import facets as f
from .. import shapes
from .common import MAX_VERSION_LOOKBACK, Identity, Viewer, run_payloads, write_runs


def views_of_runs(runs: list[LineageRun]) -> list[shapes.RunView]:
    """Runs with their facets, datasets and input versions: three queries plus one per
    distinct input dataset."""
    payloads = run_payloads(r.run_id for r in runs)
    edges: dict[int, dict[str, list[Identity]]] = defaultdict(lambda: {"read": [], "write": []})
    for run_pk, ns, name, direction in (
        LineageRunEdge.objects.filter(run__in=[r.pk for r in runs])
        .order_by("usage__dataset_namespace", "usage__dataset_name")
        .values_list(
            "run_id", "usage__dataset_namespace", "usage__dataset_name", "usage__direction"
        )
    ):
        if (ns, name) not in edges[run_pk][direction]:
            edges[run_pk][direction].append((ns, name))
    views = []
    for r in runs:
        views.append(
            shapes.RunView(
                run_id=r.run_id,
                job_namespace=r.job.namespace,
                job_name=r.job.name,
                state=r.state,
                created_at=r.created_at,
                updated_at=r.updated_at,
                started_at=r.started_at,
                ended_at=r.ended_at,
                facets=f.fold(payloads.get(r.run_id, [])),
                inputs=edges[r.pk]["read"],
                outputs=edges[r.pk]["write"],
            )
        )
    _add_input_versions(views, {r.run_id: r for r in runs})
    return views


def _add_input_versions(views: list[shapes.RunView], runs: dict[uuid.UUID, LineageRun]) -> None:
    """Each input's version: the latest run that wrote it before the reading run started
    (among the ``MAX_VERSION_LOOKBACK`` newest writes before the page's latest run)."""
    read_at = {
        v.run_id: runs[v.run_id].started_at or runs[v.run_id].last_event_at or v.created_at
        for v in views
    }
    wanted = {identity for v in views for identity in v.inputs}
    if not wanted:
        return
    newest = max(read_at.values())
    for identity in sorted(wanted):
        writes = list(
            write_runs(*identity)
            .filter(when__lte=newest)
            .values_list("run__run_id", "when")[:MAX_VERSION_LOOKBACK]
        )
        for v in views:
            if identity in v.inputs:
                before = next((str(rid) for rid, when in writes if when <= read_at[v.run_id]), None)
                if before is not None:
                    v.input_versions[identity] = before


def job_run_list(
    *, viewer: Viewer, namespace: str, name: str, limit: int, offset: int
) -> tuple[int, list[dict]]:
    """Marquez's runs of a job the viewer may see, newest first.

    Raises:
        MarquezNotFound: no such job (404).
    """
    if not Job.objects.filter(namespace=namespace, name=name).exists():
        raise MarquezNotFound(f"no job {name!r} in namespace {namespace!r}")
    runs = viewer.runs().filter(job__namespace=namespace, job__name=name).order_by("-id")
    page = list(runs[offset : offset + limit])
    return runs.count(), [shapes.run(v) for v in views_of_runs(page)]


def run_get(*, viewer: Viewer, run_id: uuid.UUID) -> dict:
    """Marquez's run ``run_id``, if the viewer may see it.

    Raises:
        MarquezNotFound: no such run, or not one the viewer may see (404).
    """
    return shapes.run(_run_view(viewer, run_id))


def _run_view(viewer: Viewer, run_id: uuid.UUID) -> shapes.RunView:
    found = viewer.runs().filter(run_id=run_id).first()
    if found is None:
        raise MarquezNotFound(f"no run {run_id} that you may see")
    return views_of_runs([found])[0]


def run_facets(*, viewer: Viewer, run_id: uuid.UUID, kind: str) -> dict:
    """Marquez's ``{runId, facets}`` of a run: its run facets (``kind`` ``run``) or job
    facets (``job``).

    Raises:
        MarquezNotFound: as ``run_get``.
    """
    view = _run_view(viewer, run_id)
    return {"runId": str(run_id), "facets": view.facets.job if kind == "job" else view.facets.run}
