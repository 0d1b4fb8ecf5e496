"""Marquez's API v1 response objects, built from what ``reads`` gathered (pure).

Field names and nesting follow Marquez's models (``marquez.service.models`` and
``spec/openapi.yml``): camelCase, instants as ISO 8601 UTC with ``Z``, identities as
``{namespace, name}``. Where Tidemark has nothing to say a field is kept with Marquez's
empty value (``tags: []``, ``args: {}``), so clients that read it find it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .facets import DatasetFacets, RunFacets, description, schema_fields
from .nodes import DATASET, JOB, node_id

# Tidemark's run states (lineage.runstate) as Marquez names them.
RUN_STATES = {
    "new": "NEW",
    "running": "RUNNING",
    "complete": "COMPLETED",
    "fail": "FAILED",
    "abort": "ABORTED",
}
_VERSIONS = uuid.UUID("6f1c2d9e-7a43-4b6e-9c55-0d6f3e1b2a10")  # uuid5 namespace of job versions


def iso(value: datetime | None) -> str | None:
    """``value`` as ISO 8601 in UTC with ``Z`` (microseconds kept), None for None."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def job_version(namespace: str, name: str) -> str:
    """A stable UUID for a job's one version: Tidemark keeps no job versions (a job is
    its identity), so every run of a job names the same version."""
    return str(uuid.uuid5(_VERSIONS, f"{namespace}:{name}"))


@dataclass(frozen=True)
class NamespaceView:
    """A namespace: a job namespace or dataset namespace seen in lineage or registered."""

    name: str
    created_at: datetime
    updated_at: datetime
    owner: str | None


def namespace(view: NamespaceView) -> dict[str, Any]:
    """Marquez's ``Namespace``. ``ownerName``: the team claiming it, else ``anonymous``
    (Marquez's default owner)."""
    return {
        "name": view.name,
        "createdAt": iso(view.created_at),
        "updatedAt": iso(view.updated_at),
        "ownerName": view.owner or "anonymous",
        "description": None,
        "isHidden": False,
    }


@dataclass
class RunView:
    """A run the caller may see, with what its events said (``facets``), the datasets it
    read and wrote by normalised identity, and each input's version (the run that last
    wrote it before this run read it, when known)."""

    run_id: uuid.UUID
    job_namespace: str
    job_name: str
    state: str
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    facets: RunFacets
    inputs: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    input_versions: dict[tuple[str, str], str] = field(default_factory=dict)


def run(view: RunView) -> dict[str, Any]:
    """Marquez's ``Run``: an output's version is this run's id (each run that writes a
    dataset makes a version of it); an input's is the run that wrote it last before, or
    None when no write of it is known."""
    duration = None
    if view.started_at is not None and view.ended_at is not None:
        duration = int((view.ended_at - view.started_at).total_seconds() * 1000)
    return {
        "id": str(view.run_id),
        "createdAt": iso(view.created_at),
        "updatedAt": iso(view.updated_at),
        "nominalStartTime": iso(view.facets.nominal_start),
        "nominalEndTime": iso(view.facets.nominal_end),
        "state": RUN_STATES.get(view.state, view.state.upper()),
        "startedAt": iso(view.started_at),
        "endedAt": iso(view.ended_at),
        "durationMs": duration,
        "args": {},
        "jobVersion": {
            "namespace": view.job_namespace,
            "name": view.job_name,
            "version": job_version(view.job_namespace, view.job_name),
        },
        "inputDatasetVersions": [
            _dataset_version_ref(identity, view.input_versions.get(identity), view, "input")
            for identity in view.inputs
        ],
        "outputDatasetVersions": [
            _dataset_version_ref(identity, str(view.run_id), view, "output")
            for identity in view.outputs
        ],
        "context": {},
        "facets": view.facets.run,
    }


def _dataset_version_ref(
    identity: tuple[str, str], version: str | None, view: RunView, side: str
) -> dict[str, Any]:
    seen = view.facets.datasets.get(identity) or DatasetFacets()
    return {
        "datasetVersionId": {"namespace": identity[0], "name": identity[1], "version": version},
        "facets": seen.input_facets if side == "input" else seen.output_facets,
    }


@dataclass
class DatasetView:
    """A dataset seen in lineage or registered: first and last seen, its last write, the
    facets of the latest run that named it (``facets``, ``{}`` when its events are no
    longer kept), schema ``fields`` (from those facets, else the catalog's latest schema
    observation), and its current version (the latest run that wrote it)."""

    namespace: str
    name: str
    created_at: datetime
    updated_at: datetime
    last_modified_at: datetime | None
    facets: dict[str, Any]
    fields: list[dict[str, Any]]
    description: str | None
    current_version: str | None


def dataset(view: DatasetView) -> dict[str, Any]:
    """Marquez's ``Dataset`` (type ``DB_TABLE``; its source is its namespace, as Marquez
    names sources of OpenLineage datasets)."""
    lifecycle = view.facets.get("lifecycleStateChange") or {}
    return {
        "id": {"namespace": view.namespace, "name": view.name},
        "type": "DB_TABLE",
        "name": view.name,
        "physicalName": view.name,
        "createdAt": iso(view.created_at),
        "updatedAt": iso(view.updated_at),
        "namespace": view.namespace,
        "sourceName": view.namespace,
        "fields": view.fields,
        "tags": [],
        "lastModifiedAt": iso(view.last_modified_at),
        "lastLifecycleState": lifecycle.get("lifecycleStateChange") or "",
        "description": view.description or description(view.facets),
        "currentVersion": view.current_version,
        "columnLineage": None,
        "facets": view.facets,
        "deleted": False,
    }


def dataset_version(
    view: DatasetView, *, version: str, created_at: datetime, facets: dict, by_run: dict | None
) -> dict[str, Any]:
    """Marquez's ``DatasetVersion``: the dataset as the run ``version`` wrote it
    (``createdByRun``: that run, None when the caller may not see it)."""
    lifecycle = facets.get("lifecycleStateChange") or {}
    return {
        "id": {"namespace": view.namespace, "name": view.name, "version": version},
        "type": "DB_TABLE",
        "name": view.name,
        "physicalName": view.name,
        "createdAt": iso(created_at),
        "version": version,
        "namespace": view.namespace,
        "sourceName": view.namespace,
        "fields": schema_fields(facets),
        "tags": [],
        "lifecycleState": lifecycle.get("lifecycleStateChange") or "",
        "description": description(facets),
        "createdByRun": by_run,
        "facets": facets,
    }


@dataclass
class JobView:
    """A job seen in lineage: its identity, first and last seen, the datasets it read
    and wrote (observed usage and a JobEvent's declared inputs and outputs), its job
    facets (from its latest run's events) and its latest runs (newest first, those the
    caller may see)."""

    namespace: str
    name: str
    created_at: datetime
    updated_at: datetime
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    facets: dict[str, Any]
    latest_runs: list[dict[str, Any]]


def job(view: JobView) -> dict[str, Any]:
    """Marquez's ``Job`` (type from the ``jobType`` facet's processing type, else
    ``BATCH``; ``location`` from the ``sourceCodeLocation`` facet)."""
    job_type = (view.facets.get("jobType") or {}).get("processingType")
    location = (view.facets.get("sourceCodeLocation") or {}).get("url")
    return {
        "id": {"namespace": view.namespace, "name": view.name},
        "type": job_type if job_type in ("BATCH", "STREAM", "SERVICE") else "BATCH",
        "name": view.name,
        "simpleName": view.name,
        "parentJobName": None,
        "parentJobUuid": None,
        "createdAt": iso(view.created_at),
        "updatedAt": iso(view.updated_at),
        "namespace": view.namespace,
        "inputs": [{"namespace": ns, "name": name} for ns, name in view.inputs],
        "outputs": [{"namespace": ns, "name": name} for ns, name in view.outputs],
        "location": location if isinstance(location, str) else None,
        "description": description(view.facets),
        "latestRun": view.latest_runs[0] if view.latest_runs else None,
        "latestRuns": view.latest_runs,
        "facets": view.facets,
        "currentVersion": job_version(view.namespace, view.name),
        "labels": [],
        "tags": [],
    }


def graph_node(
    kind: str, namespace: str, name: str, data: dict | None, edges: list[tuple[str, str]]
) -> dict[str, Any]:
    """A node of Marquez's lineage graph: ``{id, type: DATASET|JOB, data, inEdges,
    outEdges}``; ``edges`` holds every ``(origin, destination)`` of the graph, and the
    node keeps those that end or start at it."""
    own = node_id(kind, namespace, name)
    return {
        "id": own,
        "type": "DATASET" if kind == DATASET else "JOB",
        "data": data,
        "inEdges": [{"origin": o, "destination": d} for o, d in edges if d == own],
        "outEdges": [{"origin": o, "destination": d} for o, d in edges if o == own],
    }


def search_result(kind: str, namespace: str, name: str, updated_at: datetime) -> dict[str, Any]:
    """One hit of Marquez's search: ``{type: DATASET|JOB, name, updatedAt, namespace,
    nodeId}``."""
    return {
        "type": "DATASET" if kind == DATASET else "JOB",
        "name": name,
        "updatedAt": iso(updated_at),
        "namespace": namespace,
        "nodeId": node_id(DATASET if kind == DATASET else JOB, namespace, name),
    }
