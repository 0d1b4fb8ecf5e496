"""Marquez's graph reads: ``GET /lineage`` (datasets and jobs), ``GET /column-lineage``
(dataset fields, from the ``columnLineage`` facets events carried) and ``GET /search``.

The lineage graph is Tidemark's own (``catalog.selectors.lineage_graph``, every team's
observed usage, verified or not, and static lineage from JobEvents and DatasetEvents),
walked both ways from the node to ``depth`` job hops
(at most ``catalog.lineage_graph.MAX_DEPTH``), each node carrying the dataset or job as
the rest of this API shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Max

from catalog import lineage_graph
from catalog import selectors as catalog_selectors
from catalog.models import Dataset, DatasetUsage, Job, StaticLineage

from ..errors import MarquezNotFound
from . import facets as f
from . import nodes, reads, shapes

SEARCH_FILTERS = ("DATASET", "JOB")
SEARCH_SORTS = ("NAME", "UPDATE_AT")


def _resolve(node: str, exists: Callable[[nodes.NodeRef], bool]) -> nodes.NodeRef:
    readings = nodes.parse_node_id(node)
    for reading in readings:
        if exists(reading):
            return reading
    raise MarquezNotFound(f"no {readings[0].type} {node!r} in lineage")


def _node_exists(ref: nodes.NodeRef) -> bool:
    if ref.type == nodes.JOB:
        return Job.objects.filter(namespace=ref.namespace, name=ref.name).exists()
    identity = f.identity_of(ref.namespace, ref.name)
    return identity is not None and reads.dataset_exists(*identity)


def lineage(*, viewer: reads.Viewer, node: str, depth: int) -> dict:
    """Marquez's ``{graph: [node, ...]}`` around ``node`` (a dataset or job node id).

    Args:
        depth: job hops to walk each way, capped at ``lineage_graph.MAX_DEPTH``.

    Raises:
        ValidationProblem: ``nodeId`` is not a dataset or job node id (400).
        MarquezNotFound: nothing in lineage has that id (404).
    """
    ref = _resolve(node, _node_exists)
    if ref.type == nodes.DATASET_FIELD:
        raise MarquezNotFound(f"{node!r} is a field: ask /column-lineage")
    found = catalog_selectors.lineage_graph(
        dataset=(ref.namespace, ref.name) if ref.type == nodes.DATASET else None,
        job=(ref.namespace, ref.name) if ref.type == nodes.JOB else None,
        depth=max(1, min(depth, lineage_graph.MAX_DEPTH)),
        direction=lineage_graph.BOTH,
        include_unverified=True,
        include_static=True,
    )
    datasets = [(n["namespace"], n["name"]) for n in found["nodes"] if n["type"] == "dataset"]
    jobs = [(n["namespace"], n["name"]) for n in found["nodes"] if n["type"] == "job"]
    data = {
        **{(nodes.DATASET, *k): v for k, v in reads.dataset_views(datasets).items()},
        **{(nodes.JOB, *k): v for k, v in reads.job_views(viewer, jobs).items()},
    }
    # Tidemark's graph ids are already Marquez's: ``<type>:<namespace>:<name>``.
    edges = [(e["source"], e["target"]) for e in found["edges"]]
    graph = [
        shapes.graph_node(
            n["type"],
            n["namespace"],
            n["name"],
            data.get((n["type"], n["namespace"], n["name"])),
            edges,
        )
        for n in found["nodes"]
    ]
    return {"graph": graph}


def search(*, q: str, kind: str | None, sort: str, limit: int, namespace: str | None) -> dict:
    """Marquez's ``{totalCount, results}``: datasets and jobs whose name contains ``q``
    (case-insensitive), of ``kind`` (``DATASET`` or ``JOB``, both when None), sorted by
    ``NAME`` or by ``UPDATE_AT`` (newest first), at most ``limit``."""
    hits: list[tuple[str, str, str, Any]] = []
    if kind in (None, "JOB"):
        jobs = Job.objects.filter(name__icontains=q)
        if namespace:
            jobs = jobs.filter(namespace=namespace)
        hits += [
            (nodes.JOB, ns, n, at)
            for ns, n, at in jobs.values_list("namespace", "name", "last_seen_at")
        ]
    if kind in (None, "DATASET"):
        usage = DatasetUsage.objects.filter(dataset_name__icontains=q)
        static = StaticLineage.objects.filter(dataset_name__icontains=q)
        registered = Dataset.objects.filter(name__icontains=q)
        if namespace:
            usage = usage.filter(dataset_namespace=namespace)
            static = static.filter(dataset_namespace=namespace)
            registered = registered.filter(namespace=namespace)
        seen: dict[tuple[str, str], Any] = {}
        rows = [
            *static.values("dataset_namespace", "dataset_name")
            .annotate(at=Max("stated_at"))
            .values_list("dataset_namespace", "dataset_name", "at"),
            *usage.values("dataset_namespace", "dataset_name")
            .annotate(at=Max("last_seen_at"))
            .values_list("dataset_namespace", "dataset_name", "at"),
            *registered.values_list("namespace", "name", "updated_at"),
        ]
        for ns, n, at in rows:
            seen[(ns, n)] = max(at, seen.get((ns, n), at))
        hits += [(nodes.DATASET, ns, n, at) for (ns, n), at in seen.items()]
    if sort == "NAME":
        hits.sort(key=lambda h: (h[2], h[1], h[0]))
    else:
        hits.sort(key=lambda h: (h[3], h[2]), reverse=True)
    return {
        "totalCount": len(hits),
        "results": [shapes.search_result(k, ns, n, at) for k, ns, n, at in hits[:limit]],
    }


# --- column lineage ---------------------------------------------------------------------


def column_lineage(*, node: str, depth: int, with_downstream: bool) -> dict:
    """Marquez's column-level ``{graph: [...]}`` from the ``columnLineage`` dataset facets
    of the latest runs that named each dataset: a node per dataset field
    (``datasetField:<namespace>:<name>:<field>``, type ``DATASET_FIELD``), an edge from
    each input field to the field derived from it.

    Args:
        node: a dataset, dataset field or job node id; a job starts from its outputs.
        depth: how many datasets upstream (and downstream, ``with_downstream``) to follow.

    Raises:
        ValidationProblem: ``nodeId`` is not a node id (400).
        MarquezNotFound: nothing in lineage has that id (404).
    """
    ref = _resolve(node, _node_exists)
    if ref.type == nodes.JOB:
        start = sorted(
            set(
                DatasetUsage.objects.filter(
                    job__namespace=ref.namespace,
                    job__name=ref.name,
                    direction=DatasetUsage.Direction.WRITE,
                ).values_list("dataset_namespace", "dataset_name")
            )
        )
    else:
        start = [f.identity_of(ref.namespace, ref.name)]
    fields: dict[tuple[str, str, str], dict] = {}
    _walk_upstream(fields, start, depth)
    if with_downstream:
        _walk_downstream(fields, start, depth)
    if ref.type == nodes.DATASET_FIELD:
        fields = _connected(fields, (*start[0], ref.field))
    edges = [
        (_field_id(i), _field_id(key))
        for key, data in fields.items()
        for i in ((x["namespace"], x["dataset"], x["field"]) for x in data["inputFields"])
    ]
    graph = []
    for key in sorted(fields):
        own = _field_id(key)
        graph.append(
            {
                "id": own,
                "type": "DATASET_FIELD",
                "data": fields[key],
                "inEdges": [{"origin": o, "destination": d} for o, d in edges if d == own],
                "outEdges": [{"origin": o, "destination": d} for o, d in edges if o == own],
            }
        )
    return {"graph": graph}


def _field_id(key: tuple[str, str, str]) -> str:
    return nodes.node_id(nodes.DATASET_FIELD, *key)


def _field_nodes(identity: tuple[str, str], facets: dict) -> dict[tuple[str, str, str], dict]:
    """The field nodes a dataset's ``columnLineage`` facet describes (with their inputs'
    nodes), keyed by ``(namespace, dataset, field)``."""
    types = {x["name"]: x["type"] for x in f.schema_fields(facets)}
    facet = facets.get("columnLineage")
    columns = facet.get("fields") if isinstance(facet, dict) else None
    found: dict[tuple[str, str, str], dict] = {}
    for field, lineage in (columns or {}).items() if isinstance(columns, dict) else ():
        if not isinstance(lineage, dict) or not isinstance(lineage.get("inputFields"), list):
            continue
        inputs = []
        for item in lineage["inputFields"]:
            if not isinstance(item, dict) or not isinstance(item.get("field"), str):
                continue
            source = f.identity_of(item.get("namespace"), item.get("name"))
            if source is None:
                continue
            description, kind = _transformation(item, lineage)
            inputs.append(
                {
                    "namespace": source[0],
                    "dataset": source[1],
                    "datasetVersion": None,
                    "field": item["field"],
                    "transformationDescription": description,
                    "transformationType": kind,
                    "transformations": item.get("transformations") or [],
                }
            )
            found.setdefault((*source, item["field"]), _field_data(source, item["field"], None))
        description, kind = _transformation({}, lineage)
        found[(*identity, field)] = {
            **_field_data(identity, field, types.get(field)),
            "transformationDescription": description,
            "transformationType": kind,
            "inputFields": inputs,
        }
    return found


def _field_data(identity: tuple[str, str], field: str, field_type: str | None) -> dict:
    return {
        "namespace": identity[0],
        "dataset": identity[1],
        "datasetVersion": None,
        "field": field,
        "fieldType": field_type,
        "transformationDescription": None,
        "transformationType": None,
        "inputFields": [],
    }


def _transformation(item: dict, lineage: dict) -> tuple[str | None, str | None]:
    """The (description, type) of a field's derivation: the spec's older members, or its
    first ``transformations`` entry."""
    transformations = item.get("transformations")
    if (
        isinstance(transformations, list)
        and transformations
        and isinstance(transformations[0], dict)
    ):
        first = transformations[0]
        return first.get("description"), first.get("type")
    return lineage.get("transformationDescription"), lineage.get("transformationType")


def _merge_fields(into: dict, found: dict) -> None:
    for key, data in found.items():
        if key not in into or (data["inputFields"] and not into[key]["inputFields"]):
            into[key] = data
        elif into[key]["fieldType"] is None and data["fieldType"] is not None:
            into[key]["fieldType"] = data["fieldType"]


def _walk_upstream(fields: dict, start: list[tuple[str, str]], depth: int) -> None:
    frontier, seen = [i for i in start if i is not None], set()
    for _ in range(max(1, depth)):
        frontier = [i for i in frontier if i not in seen]
        if not frontier:
            return
        seen.update(frontier)
        facets = reads.dataset_facet_map(frontier)
        reached = set()
        for identity in frontier:
            found = _field_nodes(identity, facets.get(identity, {}))
            _merge_fields(fields, found)
            reached |= {(k[0], k[1]) for k in found} - {identity}
        frontier = sorted(reached)


def _walk_downstream(fields: dict, start: list[tuple[str, str]], depth: int) -> None:
    frontier, seen = [i for i in start if i is not None], set()
    for _ in range(max(1, depth)):
        frontier = [i for i in frontier if i not in seen]
        if not frontier:
            return
        seen.update(frontier)
        readers = DatasetUsage.objects.filter(
            reads.identities_q(frontier, prefix="dataset_"), direction=DatasetUsage.Direction.READ
        ).values("job_id")
        written = sorted(
            set(
                DatasetUsage.objects.filter(
                    job_id__in=readers, direction=DatasetUsage.Direction.WRITE
                ).values_list("dataset_namespace", "dataset_name")
            )
        )
        facets = reads.dataset_facet_map(written)
        reached = []
        for identity in written:
            found = _field_nodes(identity, facets.get(identity, {}))
            derived = {
                k: v
                for k, v in found.items()
                if any((x["namespace"], x["dataset"]) in frontier for x in v["inputFields"])
            }
            if derived:
                sources = {
                    (x["namespace"], x["dataset"], x["field"])
                    for v in derived.values()
                    for x in v["inputFields"]
                }
                _merge_fields(fields, {k: v for k, v in found.items() if k in sources})
                _merge_fields(fields, derived)
                reached.append(identity)
        frontier = reached


def _connected(fields: dict, root: tuple[str, str, str]) -> dict:
    """The part of the field graph connected to ``root`` through its edges."""
    neighbours: dict[tuple, set] = {key: set() for key in fields}
    for key, data in fields.items():
        for x in data["inputFields"]:
            source = (x["namespace"], x["dataset"], x["field"])
            neighbours.setdefault(source, set()).add(key)
            neighbours[key].add(source)
    if root not in neighbours:
        return {}
    keep, todo = {root}, [root]
    while todo:
        for other in neighbours[todo.pop()]:
            if other not in keep:
                keep.add(other)
                todo.append(other)
    return {k: v for k, v in fields.items() if k in keep}
