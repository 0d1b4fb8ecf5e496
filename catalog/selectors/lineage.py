"""Reads of the lineage graph."""

from __future__ import annotations

from django.db.models import (
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)

from .. import (
    errors,
    unknown_datasets,
)
from .. import lineage_graph as graph
from ..identity import normalise_dataset_identity
from ..models import (
    Dataset,
    DatasetUsage,
    Job,
    StaticLineage,
)

# --- the lineage graph --------------------------------------------------------------------

_EDGE_FIELDS = (
    "id",
    "job_id",
    "job__namespace",
    "job__name",
    "job__team__slug",
    "dataset_namespace",
    "dataset_name",
    "dataset_id",
    "direction",
    "verified",
    "run_count",
    "last_seen_at",
)


def _edges(usage: QuerySet[DatasetUsage]) -> list[graph.Edge]:
    return [graph.Edge(*row) for row in usage.values_list(*_EDGE_FIELDS)]


def _static_edges(rows: QuerySet[StaticLineage]) -> list[graph.Edge]:
    """Static lineage rows as graph edges: ids negated (apart from usage rows' ids), no
    runs, seen when last stated."""
    registered = Dataset.objects.filter(
        namespace=OuterRef("dataset_namespace"), name=OuterRef("dataset_name")
    ).values("pk")[:1]
    return [
        graph.Edge(
            usage_id=-row[0],
            job_id=row[1],
            job_namespace=row[2],
            job_name=row[3],
            job_team=row[4],
            dataset_namespace=row[5],
            dataset_name=row[6],
            dataset_id=row[7],
            direction=row[8],
            verified=row[9],
            run_count=0,
            last_seen_at=row[10],
        )
        for row in rows.annotate(registered=Subquery(registered)).values_list(
            "id",
            "job_id",
            "job__namespace",
            "job__name",
            "job__team__slug",
            "dataset_namespace",
            "dataset_name",
            "registered",
            "direction",
            "verified",
            "stated_at",
        )
    ]


def _identity_in(identities: set[tuple[str, str]]) -> Q:
    match = Q(pk__in=[])
    for namespace, name in sorted(identities):
        match |= Q(dataset_namespace=namespace, dataset_name=name)
    return match


def lineage_graph(
    *,
    dataset: tuple[str, str] | None = None,
    job: tuple[str, str] | None = None,
    depth: int = graph.DEFAULT_DEPTH,
    direction: str = graph.BOTH,
    include_unverified: bool = False,
    include_static: bool = False,
) -> dict:
    """The lineage graph around one dataset or one job, from observed usage
    (``DatasetUsage``): every team's edges, as the catalog records them.

    One or two queries find the root (a dataset the catalog does not know is looked for
    in usage), then one query per level and walk direction (``both`` walks upstream and
    downstream: two per level), whatever the number of nodes.

    Args:
        dataset: the root dataset's ``(namespace, name)``, normalised here; or
        job: the root job's ``(namespace, name)``, exactly as events named it.
        depth: job hops to walk, 1 to ``graph.MAX_DEPTH`` (5).
        direction: ``upstream``, ``downstream`` or ``both``.
        include_unverified: add the unverified edges (marked ``verified: false``);
            verified edges only by default.
        include_static: add static lineage (``StaticLineage``: what JobEvents state a
            job reads and writes, with ``run_count`` 0, and datasets only DatasetEvents
            named, as roots); one more query per level and walk direction.

    Returns:
        ``graph.Graph.as_dict()``: ``{root, truncated, nodes, edges}``; a dataset node is
        ``{id, type: dataset, namespace, name, catalogued, dataset_id}``, a job node
        ``{id, type: job, namespace, name, team}``, an edge ``{source, target, direction:
        read|write, run_count, last_seen (aware UTC), verified}``.

    Raises:
        LineageNodeNotFound: the dataset is neither registered nor seen in any usage, or
            the job was never seen (404).
    """
    usage = DatasetUsage.objects.all()
    static = StaticLineage.objects.filter(job__isnull=False)
    if not include_unverified:
        usage, static = usage.filter(verified=True), static.filter(verified=True)
    result, datasets, jobs = _graph_root(dataset=dataset, job=job, include_static=include_static)
    for walk in (graph.UPSTREAM, graph.DOWNSTREAM):
        if direction not in (walk, graph.BOTH):
            continue
        frontier, frontier_jobs = set(datasets), set(jobs)
        seen = set(frontier)
        for _ in range(depth):
            if not frontier and not frontier_jobs:
                break
            near = graph.READ if walk == graph.DOWNSTREAM else graph.WRITE
            reaching = Q(job_id__in=frontier_jobs) | Q(
                job_id__in=usage.filter(_identity_in(frontier), direction=near).values("job_id")
            )
            if include_static:
                reaching |= Q(
                    job_id__in=static.filter(_identity_in(frontier), direction=near).values(
                        "job_id"
                    )
                )
            edges = _edges(usage.filter(reaching))
            if include_static:
                edges += _static_edges(static.filter(reaching))
            reached, _ = graph.level(
                result,
                edges,
                walk=walk,
                datasets=frontier,
                jobs=frontier_jobs,
            )
            frontier, frontier_jobs = reached - seen, set()
            seen |= frontier
            if len(result.nodes) > graph.MAX_NODES:
                result.truncated = bool(frontier)
                break
    return result.as_dict()


def _graph_root(
    *, dataset: tuple[str, str] | None, job: tuple[str, str] | None, include_static: bool
) -> tuple[graph.Graph, set[tuple[str, str]], set[int]]:
    """The graph holding only its root, and the root as a first frontier."""
    if job is not None:
        found = Job.objects.filter(namespace=job[0], name=job[1]).select_related("team").first()
        if found is None:
            raise errors.LineageNodeNotFound(f"no job {job[0]}/{job[1]} was seen in lineage")
        result = graph.Graph(root=graph.job_node_id(*job))
        result.add_job(*job, found.team.slug if found.team else None)
        return result, set(), {found.pk}
    assert dataset is not None
    try:
        identity = normalise_dataset_identity(*dataset)
    except ValueError as exc:
        raise unknown_datasets.dataset_not_found(
            *dataset, problem=errors.LineageNodeNotFound
        ) from exc
    pair = (identity.namespace, identity.name)
    dataset_id = (
        Dataset.objects.filter(namespace=pair[0], name=pair[1]).values_list("pk", flat=True).first()
    )
    if (
        dataset_id is None
        and not DatasetUsage.objects.filter(
            dataset_namespace=pair[0], dataset_name=pair[1]
        ).exists()
        and not (
            include_static
            and StaticLineage.objects.filter(
                dataset_namespace=pair[0], dataset_name=pair[1]
            ).exists()
        )
    ):
        raise unknown_datasets.dataset_not_found(*pair, problem=errors.LineageNodeNotFound)
    result = graph.Graph(root=graph.dataset_node_id(*pair))
    result.add_dataset(*pair, dataset_id)
    return result, {pair}, set()
