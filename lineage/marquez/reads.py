"""Reads behind the Marquez-compatible API: namespaces, datasets, jobs and runs from the
catalog's usage tables (``Job``, ``DatasetUsage``, registered ``Dataset``) and lineage's
runs and raw events, shaped by ``shapes``.

What is where:

- a **namespace** is any job namespace or dataset namespace seen in lineage or
  registered; a **dataset** any identity seen in usage, stated in static lineage
  (``catalog.StaticLineage``: JobEvents and DatasetEvents) or registered; a **job** any
  job seen (``catalog.Job``), whose inputs and outputs are its observed usage and the
  static lineage its latest JobEvent stated;
- a dataset's **facets** are those of the latest run that read or wrote it, folded from
  that run's raw events (``facets.fold``); raw events are kept
  ``TIDEMARK_RETAIN_LINEAGE_EVENTS_DAYS``, so facets of older runs read as ``{}`` (a
  registered dataset's fields then come from its latest schema observation);
- a dataset **version** is a run that wrote it (the version id is the run's id), as in
  Marquez each run writing a dataset makes a version of it.

Runs are shown to whom ``lineage.selectors`` shows them (``Viewer``); namespaces,
datasets, jobs and the graph are every team's, as Tidemark's own lineage graph is.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_

from django.db.models import Exists, Max, Min, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from catalog.models import (
    Claim,
    Dataset,
    DatasetUsage,
    Job,
    RunConflict,
    SchemaObservation,
    StaticLineage,
    Team,
)

from ..errors import MarquezNotFound
from ..models import LineageEvent, LineageRun, LineageRunEdge
from . import facets as f
from . import shapes

Identity = tuple[str, str]
# Writes looked at to find the version an input was read at (newest first).
MAX_VERSION_LOOKBACK = 500


@dataclass(frozen=True)
class Viewer:
    """Who reads: ``team`` (None without a key) and ``everything`` (the ``governance``
    scope, or a keyless read where the setting allows it: every team's runs)."""

    team: Team | None
    everything: bool

    def runs(self) -> QuerySet[LineageRun]:
        """The runs this viewer may see (``lineage.selectors``'s rule)."""
        runs = LineageRun.objects.select_related("job")
        if self.everything:
            return runs
        if self.team is None:
            return runs.none()
        return runs.filter(Q(team=self.team) | Q(job__team=self.team))


# --- namespaces -------------------------------------------------------------------------


def _namespace_views(names: Iterable[str] | None = None) -> list[shapes.NamespaceView]:
    """Every namespace (or those in ``names``), by name, with first and last seen."""
    spans: dict[str, tuple[datetime, datetime]] = {}

    def widen(rows) -> None:
        for name, created, updated in rows:
            if name in spans:
                created = min(created, spans[name][0])
                updated = max(updated, spans[name][1])
            spans[name] = (created, updated)

    jobs, usage, datasets = Job.objects.all(), DatasetUsage.objects.all(), Dataset.objects.all()
    static = StaticLineage.objects.all()
    if names is not None:
        names = list(names)
        jobs, datasets = jobs.filter(namespace__in=names), datasets.filter(namespace__in=names)
        usage = usage.filter(dataset_namespace__in=names)
        static = static.filter(dataset_namespace__in=names)
    span = {"created": Min("first_seen_at"), "updated": Max("last_seen_at")}
    widen(jobs.values("namespace").annotate(**span).values_list("namespace", *span))
    widen(
        static.values("dataset_namespace")
        .annotate(created=Min("stated_at"), updated=Max("stated_at"))
        .values_list("dataset_namespace", "created", "updated")
    )
    widen(
        usage.values("dataset_namespace").annotate(**span).values_list("dataset_namespace", *span)
    )
    widen(
        datasets.values("namespace")
        .annotate(created=Min("created_at"), updated=Max("updated_at"))
        .values_list("namespace", "created", "updated")
    )
    owners = dict(
        Claim.objects.filter(kind=Claim.Kind.JOB_NAMESPACE, pattern__in=list(spans)).values_list(
            "pattern", "team__slug"
        )
    )
    return [shapes.NamespaceView(name, *spans[name], owners.get(name)) for name in sorted(spans)]


def namespace_list(*, limit: int, offset: int) -> list[dict]:
    """Marquez's namespaces, by name: ``limit`` of them from ``offset``."""
    return [shapes.namespace(v) for v in _namespace_views()[offset : offset + limit]]


def namespace_get(*, name: str) -> dict:
    """Marquez's namespace ``name``.

    Raises:
        MarquezNotFound: no job or dataset has that namespace (404).
    """
    views = _namespace_views([name])
    if not views:
        raise MarquezNotFound(f"no namespace {name!r} in lineage")
    return shapes.namespace(views[0])


def namespace_exists(name: str) -> bool:
    """Whether any job or dataset has namespace ``name``."""
    return (
        Job.objects.filter(namespace=name).exists()
        or DatasetUsage.objects.filter(dataset_namespace=name).exists()
        or Dataset.objects.filter(namespace=name).exists()
        or StaticLineage.objects.filter(dataset_namespace=name).exists()
    )


# --- datasets ---------------------------------------------------------------------------


def _identities(identities: list[Identity], *, prefix: str = "") -> Q:
    return reduce(
        or_,
        (Q(**{f"{prefix}namespace": ns, f"{prefix}name": name}) for ns, name in identities),
        Q(pk__in=[]),
    )


def _dataset_spans(
    *, namespace: str | None = None, identities: list[Identity] | None = None
) -> dict[Identity, tuple[datetime, datetime]]:
    """First and last seen of every dataset of ``namespace`` (or of ``identities``)."""
    usage, registered = DatasetUsage.objects.all(), Dataset.objects.all()
    static = StaticLineage.objects.all()
    if namespace is not None:
        usage = usage.filter(dataset_namespace=namespace)
        static = static.filter(dataset_namespace=namespace)
        registered = registered.filter(namespace=namespace)
    if identities is not None:
        usage = usage.filter(_identities(identities, prefix="dataset_"))
        static = static.filter(_identities(identities, prefix="dataset_"))
        registered = registered.filter(_identities(identities))
    spans: dict[Identity, tuple[datetime, datetime]] = {}
    rows = [
        *static.values("dataset_namespace", "dataset_name")
        .annotate(created=Min("stated_at"), updated=Max("stated_at"))
        .values_list("dataset_namespace", "dataset_name", "created", "updated"),
        *usage.values("dataset_namespace", "dataset_name")
        .annotate(created=Min("first_seen_at"), updated=Max("last_seen_at"))
        .values_list("dataset_namespace", "dataset_name", "created", "updated"),
        *registered.values_list("namespace", "name", "created_at", "updated_at"),
    ]
    for ns, name, created, updated in rows:
        if (ns, name) in spans:
            created = min(created, spans[(ns, name)][0])
            updated = max(updated, spans[(ns, name)][1])
        spans[(ns, name)] = (created, updated)
    return spans


def _run_time():
    return Coalesce("run__ended_at", "run__last_event_at", "run__created_at")


def _latest_runs(identities: list[Identity], *, writes: bool) -> dict[Identity, tuple]:
    """The latest run that read or wrote (``writes``: wrote) each identity:
    ``{identity: (run pk, run_id, when)}``."""
    if not identities:
        return {}
    edges = LineageRunEdge.objects.filter(_identities(identities, prefix="usage__dataset_"))
    if writes:
        edges = edges.filter(usage__direction=DatasetUsage.Direction.WRITE)
    rows = edges.values_list(
        "usage__dataset_namespace", "usage__dataset_name", "run_id", "run__run_id"
    ).annotate(when=_run_time())
    latest: dict[Identity, tuple] = {}
    # One row per (identity, run): few per dataset on a page, and no DISTINCT ON so the
    # embedded SQLite runs it too.
    for ns, name, pk, run_id, when in rows.order_by("when", "run_id"):
        latest[(ns, name)] = (pk, run_id, when)
    return latest


def _run_payloads(run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list]:
    """The raw events still kept of each run that belong to it (not conflicts), in
    event-time order: ``{run_id: [payload, ...]}``."""
    conflict = RunConflict.objects.filter(event_id=OuterRef("pk"))
    rows = (
        LineageEvent.objects.filter(run_id__in=list(run_ids))
        .filter(~Exists(conflict))
        .order_by("event_time", "id")
        .values_list("run_id", "payload")
    )
    found: dict[uuid.UUID, list] = defaultdict(list)
    for run_id, payload in rows:
        found[run_id].append(payload)
    return found


def _dataset_facets(identities: list[Identity]) -> dict[Identity, f.DatasetFacets]:
    """Each identity's facets as the latest run naming it left them."""
    latest = _latest_runs(identities, writes=False)
    payloads = _run_payloads({run_id for _, run_id, _ in latest.values()})
    found = {}
    for identity, (_, run_id, _) in latest.items():
        folded = f.fold(payloads.get(run_id, []))
        found[identity] = folded.datasets.get(identity) or f.DatasetFacets()
    return found


def _dataset_views(spans: dict[Identity, tuple[datetime, datetime]]) -> list[shapes.DatasetView]:
    identities = list(spans)
    facets = _dataset_facets(identities)
    writes = _latest_runs(identities, writes=True)
    registered = {
        (d.namespace, d.name): d
        for d in Dataset.objects.filter(_identities(identities)).only(
            "namespace", "name", "description"
        )
    }
    observed: dict[int, list] = {}
    for dataset_id, fields in (
        SchemaObservation.objects.filter(dataset__in=[d.pk for d in registered.values()])
        .order_by("dataset_id", "observed_at", "id")
        .values_list("dataset_id", "fields")
    ):
        observed[dataset_id] = fields  # the last one wins: the newest
    views = []
    for identity in identities:
        seen = facets.get(identity) or f.DatasetFacets()
        fields = f.schema_fields(seen.facets)
        catalogued = registered.get(identity)
        if not fields and catalogued is not None and catalogued.pk in observed:
            fields = f.schema_fields({"schema": {"fields": observed[catalogued.pk]}})
        write = writes.get(identity)
        views.append(
            shapes.DatasetView(
                namespace=identity[0],
                name=identity[1],
                created_at=spans[identity][0],
                updated_at=spans[identity][1],
                last_modified_at=write[2] if write else None,
                facets=seen.facets,
                fields=fields,
                description=(catalogued.description or None) if catalogued else None,
                current_version=str(write[1]) if write else None,
            )
        )
    return views


def dataset_list(*, namespace: str, limit: int, offset: int) -> tuple[int, list[dict]]:
    """Marquez's datasets of ``namespace``, by name: ``(totalCount, page)``."""
    spans = _dataset_spans(namespace=namespace)
    page = sorted(spans)[offset : offset + limit]
    views = _dataset_views({identity: spans[identity] for identity in page})
    return len(spans), [shapes.dataset(v) for v in views]


def dataset_exists(namespace: str, name: str) -> bool:
    """Whether the dataset identity was seen in usage or is registered."""
    return (
        DatasetUsage.objects.filter(dataset_namespace=namespace, dataset_name=name).exists()
        or Dataset.objects.filter(namespace=namespace, name=name).exists()
        or StaticLineage.objects.filter(dataset_namespace=namespace, dataset_name=name).exists()
    )


def _dataset_view(namespace: str, name: str) -> shapes.DatasetView:
    spans = _dataset_spans(identities=[(namespace, name)])
    if not spans:
        raise MarquezNotFound(f"no dataset {name!r} in namespace {namespace!r}")
    return _dataset_views(spans)[0]


def dataset_get(*, namespace: str, name: str) -> dict:
    """Marquez's dataset ``namespace``/``name`` (the identity as stored: normalised).

    Raises:
        MarquezNotFound: never seen in usage nor registered (404).
    """
    return shapes.dataset(_dataset_view(namespace, name))


def _write_runs(namespace: str, name: str) -> QuerySet:
    return (
        LineageRunEdge.objects.filter(
            usage__dataset_namespace=namespace,
            usage__dataset_name=name,
            usage__direction=DatasetUsage.Direction.WRITE,
        )
        .annotate(when=_run_time())
        .order_by("-when", "-run_id")
    )


def dataset_version_list(
    *, viewer: Viewer, namespace: str, name: str, limit: int, offset: int
) -> tuple[int, list[dict]]:
    """Marquez's versions of a dataset, newest first: one per run that wrote it.

    Raises:
        MarquezNotFound: no such dataset (404).
    """
    view = _dataset_view(namespace, name)
    writes = _write_runs(namespace, name)
    total = writes.values("run_id").distinct().count()
    page = list(writes.values_list("run_id", "when")[offset : offset + limit])
    return total, _versions(viewer, view, page)


def dataset_version_get(*, viewer: Viewer, namespace: str, name: str, version: str) -> dict:
    """Marquez's version ``version`` (a writing run's id) of a dataset.

    Raises:
        MarquezNotFound: no such dataset, or no run with that id wrote it (404).
    """
    view = _dataset_view(namespace, name)
    try:
        run_id = uuid.UUID(version)
    except ValueError:
        run_id = None
    rows = list(
        _write_runs(namespace, name).filter(run__run_id=run_id).values_list("run_id", "when")
    )
    if not rows:
        raise MarquezNotFound(f"no version {version!r} of dataset {name!r} in {namespace!r}")
    return _versions(viewer, view, rows[:1])[0]


def _versions(viewer: Viewer, view: shapes.DatasetView, rows: list[tuple]) -> list[dict]:
    runs = {
        r.pk: r
        for r in LineageRun.objects.select_related("job").filter(pk__in=[r for r, _ in rows])
    }
    visible = set(viewer.runs().filter(pk__in=list(runs)).values_list("pk", flat=True))
    run_views = {v.run_id: v for v in _run_views([runs[pk] for pk in runs])}
    found = []
    identity = (view.namespace, view.name)
    for pk, when in rows:
        run_view = run_views[runs[pk].run_id]
        seen = run_view.facets.datasets.get(identity) or f.DatasetFacets()
        found.append(
            shapes.dataset_version(
                view,
                version=str(run_view.run_id),
                created_at=when,
                facets=seen.facets,
                by_run=shapes.run(run_view) if pk in visible else None,
            )
        )
    return found


# --- runs -------------------------------------------------------------------------------


def _run_views(runs: list[LineageRun]) -> list[shapes.RunView]:
    """Runs with their facets, datasets and input versions: three queries plus one per
    distinct input dataset."""
    payloads = _run_payloads(r.run_id for r in runs)
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
            _write_runs(*identity)
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
    return runs.count(), [shapes.run(v) for v in _run_views(page)]


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
    return _run_views([found])[0]


def run_facets(*, viewer: Viewer, run_id: uuid.UUID, kind: str) -> dict:
    """Marquez's ``{runId, facets}`` of a run: its run facets (``kind`` ``run``) or job
    facets (``job``).

    Raises:
        MarquezNotFound: as ``run_get``.
    """
    view = _run_view(viewer, run_id)
    return {"runId": str(run_id), "facets": view.facets.job if kind == "job" else view.facets.run}


# --- jobs -------------------------------------------------------------------------------


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
    run_views = {v.run_id: v for v in _run_views(latest)}
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
    jobs = list(Job.objects.filter(_identities(identities)))
    return {(v.namespace, v.name): shapes.job(v) for v in _job_views(viewer, jobs)}


def dataset_views(identities: list[Identity]) -> dict[Identity, dict]:
    """Marquez's datasets for these identities (for graph nodes), by identity."""
    spans = _dataset_spans(identities=identities)
    return {(v.namespace, v.name): shapes.dataset(v) for v in _dataset_views(spans)}


def dataset_facet_map(identities: list[Identity]) -> dict[Identity, dict]:
    """Each identity's dataset facets as the latest run naming it left them (``{}`` when
    its events are no longer kept)."""
    return {identity: seen.facets for identity, seen in _dataset_facets(identities).items()}


def job_exists(namespace: str, name: str) -> bool:
    """Whether the job was seen in lineage."""
    return Job.objects.filter(namespace=namespace, name=name).exists()
