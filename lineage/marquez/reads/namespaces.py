"""Marquez's namespaces: every job or dataset namespace seen in lineage or registered."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Max, Min

from catalog.models import (
    Claim,
    Dataset,
    DatasetUsage,
    Job,
    StaticLineage,
)

from ...errors import MarquezNotFound
from .. import shapes


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
