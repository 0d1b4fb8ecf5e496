"""Folding raw OpenLineage events into the facets Marquez shows (pure).

Marquez keeps, for a run, the run and job facets of its events and, for each dataset the
run read or wrote, its dataset facets and input or output facets; a later event's facet
replaces an earlier one of the same name (facets are whole objects: they are never
merged member by member). Datasets are keyed by their normalised identity
(``catalog.identity``), as the usage they became is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from catalog.identity import IdentityError, normalise_dataset_identity

from .. import openlineage
from ..errors import EventTimeInvalid


@dataclass
class DatasetFacets:
    """What a run's events said about one dataset: ``facets`` (dataset facets),
    ``input_facets`` / ``output_facets``, and whether it was an input or an output."""

    facets: dict[str, Any] = field(default_factory=dict)
    input_facets: dict[str, Any] = field(default_factory=dict)
    output_facets: dict[str, Any] = field(default_factory=dict)
    read: bool = False
    written: bool = False


@dataclass
class RunFacets:
    """A run's events folded: ``run`` and ``job`` facets, each dataset's facets by
    ``(namespace, name)``, and the ``nominalTime`` facet's start and end (aware UTC, None
    when absent or malformed)."""

    run: dict[str, Any] = field(default_factory=dict)
    job: dict[str, Any] = field(default_factory=dict)
    datasets: dict[tuple[str, str], DatasetFacets] = field(default_factory=dict)

    @property
    def nominal_start(self) -> datetime | None:
        return _nominal(self.run, "nominalStartTime")

    @property
    def nominal_end(self) -> datetime | None:
        return _nominal(self.run, "nominalEndTime")


def fold(payloads: Iterable[Any]) -> RunFacets:
    """Fold event payloads, in the order they happened, into one ``RunFacets``.

    Args:
        payloads: decoded OpenLineage events (run, job or dataset events); members that
            are not objects where objects belong are skipped, as processing skips them.

    Returns:
        The folded facets (empty when no payload carried any).
    """
    folded = RunFacets()
    for payload in payloads:
        if not isinstance(payload, dict):
            continue
        run, job = payload.get("run"), payload.get("job")
        if isinstance(run, dict):
            _merge(folded.run, run.get("facets"))
        if isinstance(job, dict):
            _merge(folded.job, job.get("facets"))
        for key, facets_key in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
            items = payload.get(key)
            for item in items if isinstance(items, list) else ():
                entry = _entry(folded, item)
                if entry is None:
                    continue
                _merge(entry.facets, item.get("facets"))
                if key == "inputs":
                    entry.read = True
                    _merge(entry.input_facets, item.get(facets_key))
                else:
                    entry.written = True
                    _merge(entry.output_facets, item.get(facets_key))
        entry = _entry(folded, payload.get("dataset"))
        if entry is not None:
            _merge(entry.facets, payload["dataset"].get("facets"))
    return folded


def identity_of(namespace: Any, name: Any) -> tuple[str, str] | None:
    """The normalised ``(namespace, name)`` of a dataset as an event spelled it, or None
    when it breaks a naming rule (processing recorded no usage of it either)."""
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    try:
        identity = normalise_dataset_identity(namespace, name)
    except IdentityError:
        return None
    return identity.namespace, identity.name


def schema_fields(facets: dict[str, Any]) -> list[dict[str, Any]]:
    """Marquez's ``fields`` from a dataset's ``schema`` facet: ``[{name, type, tags,
    description}]``; ``[]`` when there is none or it is malformed."""
    schema = facets.get("schema")
    columns = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(columns, list):
        return []
    return [
        {
            "name": column["name"],
            "type": column.get("type") if isinstance(column.get("type"), str) else None,
            "tags": [],
            "description": column.get("description")
            if isinstance(column.get("description"), str)
            else None,
        }
        for column in columns
        if isinstance(column, dict) and isinstance(column.get("name"), str)
    ]


def description(facets: dict[str, Any]) -> str | None:
    """The ``documentation`` facet's description, or None."""
    documentation = facets.get("documentation")
    text = documentation.get("description") if isinstance(documentation, dict) else None
    return text if isinstance(text, str) else None


def _entry(folded: RunFacets, item: Any) -> DatasetFacets | None:
    if not isinstance(item, dict):
        return None
    identity = identity_of(item.get("namespace"), item.get("name"))
    if identity is None:
        return None
    return folded.datasets.setdefault(identity, DatasetFacets())


def _merge(into: dict[str, Any], facets: Any) -> None:
    if isinstance(facets, dict):
        into.update((name, facet) for name, facet in facets.items() if isinstance(facet, dict))


def _nominal(run_facets: dict[str, Any], key: str) -> datetime | None:
    value = (run_facets.get("nominalTime") or {}).get(key)
    if value is None:
        return None
    try:
        return openlineage.parse_event_time(value)[0]
    except EventTimeInvalid:  # a malformed facet (flagged at ingest) shows no nominal time
        return None
