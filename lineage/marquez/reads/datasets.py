"""Marquez's datasets and their versions (a version is a run that wrote the dataset)."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db.models import Max, Min

from catalog.models import (
    Dataset,
    DatasetUsage,
    SchemaObservation,
    StaticLineage,
)

from ...errors import MarquezNotFound
from ...models import LineageRun
from .. import facets as f
from .. import shapes
from .common import Identity, Viewer, identities_q, latest_runs, run_payloads, write_runs
from .runs import views_of_runs


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
        usage = usage.filter(identities_q(identities, prefix="dataset_"))
        static = static.filter(identities_q(identities, prefix="dataset_"))
        registered = registered.filter(identities_q(identities))
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


def _dataset_facets(identities: list[Identity]) -> dict[Identity, f.DatasetFacets]:
    """Each identity's facets as the latest run naming it left them."""
    latest = latest_runs(identities, writes=False)
    payloads = run_payloads({run_id for _, run_id, _ in latest.values()})
    found = {}
    for identity, (_, run_id, _) in latest.items():
        folded = f.fold(payloads.get(run_id, []))
        found[identity] = folded.datasets.get(identity) or f.DatasetFacets()
    return found


def _dataset_views(spans: dict[Identity, tuple[datetime, datetime]]) -> list[shapes.DatasetView]:
    identities = list(spans)
    facets = _dataset_facets(identities)
    writes = latest_runs(identities, writes=True)
    registered = {
        (d.namespace, d.name): d
        for d in Dataset.objects.filter(identities_q(identities)).only(
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


def dataset_version_list(
    *, viewer: Viewer, namespace: str, name: str, limit: int, offset: int
) -> tuple[int, list[dict]]:
    """Marquez's versions of a dataset, newest first: one per run that wrote it.

    Raises:
        MarquezNotFound: no such dataset (404).
    """
    view = _dataset_view(namespace, name)
    writes = write_runs(namespace, name)
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
        write_runs(namespace, name).filter(run__run_id=run_id).values_list("run_id", "when")
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
    run_views = {v.run_id: v for v in views_of_runs([runs[pk] for pk in runs])}
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


def dataset_views(identities: list[Identity]) -> dict[Identity, dict]:
    """Marquez's datasets for these identities (for graph nodes), by identity."""
    spans = _dataset_spans(identities=identities)
    return {(v.namespace, v.name): shapes.dataset(v) for v in _dataset_views(spans)}


def dataset_facet_map(identities: list[Identity]) -> dict[Identity, dict]:
    """Each identity's dataset facets as the latest run naming it left them (``{}`` when
    its events are no longer kept)."""
    return {identity: seen.facets for identity, seen in _dataset_facets(identities).items()}
