"""Reads of lineage: runs and the raw events of a run, filtered by who may see them, and
the lineage graph around a dataset or job (every team's observed usage).

A run is visible to the team that first reported it, to the verified owner of its job, and
to keys with the ``governance`` scope; every event of a visible run is visible with it.
"""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet

from catalog.identity import normalise_dataset_identity
from catalog.models import Dataset, DatasetUsage, Job, Team

from . import graph
from .errors import LineageNodeNotFound, RunNotFound
from .models import LineageEvent, LineageRun


def _visible_runs(*, team: Team, everything: bool) -> QuerySet[LineageRun]:
    runs = LineageRun.objects.select_related("job", "team")
    if everything:
        return runs
    return runs.filter(Q(team=team) | Q(job__team=team))


def run_list(
    *,
    team: Team,
    everything: bool = False,
    job_namespace: str,
    job_name: str,
    state: str | None = None,
) -> QuerySet[LineageRun]:
    """The runs of one job that ``team`` may see, newest first.

    Args:
        everything: the caller holds the ``governance`` scope: every team's runs.
        job_namespace, job_name: the OpenLineage job identity, exactly as sent.
        state: only runs in this state (``new``, ``running``, ``complete``, ``fail``,
            ``abort``).
    """
    runs = _visible_runs(team=team, everything=everything).filter(
        job__namespace=job_namespace, job__name=job_name
    )
    if state:
        runs = runs.filter(state=state)
    return runs.order_by("-id")


def run_get(*, team: Team, everything: bool = False, run_id: uuid.UUID) -> LineageRun:
    """The run with OpenLineage ``runId`` ``run_id``, if ``team`` may see it.

    Raises:
        RunNotFound: no such run, or not visible to the team (404).
    """
    run = _visible_runs(team=team, everything=everything).filter(run_id=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id} that your team may see")
    return run


def run_event_list(*, run: LineageRun) -> QuerySet[LineageEvent]:
    """The raw events received for ``run`` (a run the caller may see), in event-time
    order, with the sending team joined."""
    return (
        LineageEvent.objects.filter(run_id=run.run_id)
        .select_related("team")
        .order_by("event_time", "id")
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
    if not include_unverified:
        usage = usage.filter(verified=True)
    result, datasets, jobs = _graph_root(dataset=dataset, job=job)
    for walk in (graph.UPSTREAM, graph.DOWNSTREAM):
        if direction not in (walk, graph.BOTH):
            continue
        frontier, frontier_jobs = set(datasets), set(jobs)
        seen = set(frontier)
        for _ in range(depth):
            if not frontier and not frontier_jobs:
                break
            near = graph.READ if walk == graph.DOWNSTREAM else graph.WRITE
            reaching = usage.filter(_identity_in(frontier), direction=near).values("job_id")
            rows = usage.filter(Q(job_id__in=reaching) | Q(job_id__in=frontier_jobs))
            reached, _ = graph.level(
                result,
                _edges(rows),
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
    *, dataset: tuple[str, str] | None, job: tuple[str, str] | None
) -> tuple[graph.Graph, set[tuple[str, str]], set[int]]:
    """The graph holding only its root, and the root as a first frontier."""
    if job is not None:
        found = Job.objects.filter(namespace=job[0], name=job[1]).select_related("team").first()
        if found is None:
            raise LineageNodeNotFound(f"no job {job[0]}/{job[1]} was seen in lineage")
        result = graph.Graph(root=graph.job_node_id(*job))
        result.add_job(*job, found.team.slug if found.team else None)
        return result, set(), {found.pk}
    assert dataset is not None
    try:
        identity = normalise_dataset_identity(*dataset)
    except ValueError as exc:
        raise LineageNodeNotFound(f"no dataset {dataset[0]}/{dataset[1]}") from exc
    pair = (identity.namespace, identity.name)
    dataset_id = (
        Dataset.objects.filter(namespace=pair[0], name=pair[1]).values_list("pk", flat=True).first()
    )
    if (
        dataset_id is None
        and not DatasetUsage.objects.filter(
            dataset_namespace=pair[0], dataset_name=pair[1]
        ).exists()
    ):
        raise LineageNodeNotFound(f"no dataset {pair[0]}/{pair[1]} is registered or seen")
    result = graph.Graph(root=graph.dataset_node_id(*pair))
    result.add_dataset(*pair, dataset_id)
    return result, {pair}, set()
