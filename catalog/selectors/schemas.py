"""Reads of observed schemas and their changes."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import (
    QuerySet,
)

from ..models import (
    Dataset,
    SchemaChange,
    SchemaObservation,
    Team,
)

# --- schemas ----------------------------------------------------------------------------


def schema_observation_list(*, dataset: Dataset) -> QuerySet[SchemaObservation]:
    """The dataset's schema timeline: one observation per change, newest first (the first
    row is its schema as last seen)."""
    return (
        SchemaObservation.objects.filter(dataset=dataset)
        .select_related("team")
        .order_by("-observed_at", "-id")
    )


def unannounced_schema_changes(*, teams: Iterable[Team] | None = None) -> QuerySet[SchemaChange]:
    """Breaking schema changes (a column removed or retyped) that no change notice
    covered (``catalog.schema_changes`` gives the rule): the governance report, and what
    the web UI lists.

    Args:
        teams: only changes of datasets these teams own; None: every team's.

    Returns:
        ``SchemaChange`` rows with ``dataset``, its ``owner``, ``observation`` and
        ``previous`` joined, most recently observed first.
    """
    queryset = SchemaChange.objects.filter(covered_by__isnull=True).select_related(
        "dataset", "dataset__owner", "observation", "previous"
    )
    if teams is not None:
        queryset = queryset.filter(dataset__owner__in=[team.pk for team in teams])
    return queryset.order_by("-observed_at", "-id")
