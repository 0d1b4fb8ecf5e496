"""The lineage graph around one dataset or job, assembled from observed usage edges: pure
logic, no ORM (``catalog.selectors.lineage_graph`` feeds it one query per depth level).

Nodes are datasets and jobs; an edge says a job reads a dataset (dataset -> job) or
writes one (job -> dataset). One *level* of depth is one job hop: from a dataset,
downstream, the jobs reading it and the datasets those jobs write; upstream, the jobs
writing it and the datasets those jobs read. From a job, the first level is its own
outputs (downstream) or inputs (upstream). ``both`` is the union of the two walks, not an
undirected crawl.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

DATASET, JOB = "dataset", "job"
READ, WRITE = "read", "write"
UPSTREAM, DOWNSTREAM, BOTH = "upstream", "downstream", "both"
DIRECTIONS = (UPSTREAM, DOWNSTREAM, BOTH)
DEFAULT_DEPTH = 2
MAX_DEPTH = 5
MAX_NODES = 500  # a walk stops widening past this many nodes (``truncated``)


def dataset_node_id(namespace: str, name: str) -> str:
    """``dataset:<namespace>:<name>`` (the normalised identity)."""
    return f"{DATASET}:{namespace}:{name}"


def job_node_id(namespace: str, name: str) -> str:
    """``job:<namespace>:<name>`` (the OpenLineage job identity as received)."""
    return f"{JOB}:{namespace}:{name}"


@dataclass(frozen=True)
class Edge:
    """One observed usage row, as the graph needs it.

    Args:
        usage_id: the ``DatasetUsage`` row's id, or a ``StaticLineage`` row's id
            negated (a row met again on a later level is added once).
        job_id: the catalog ``Job`` row's id; job_team: its verified owner's slug or None.
        dataset_id: the registered dataset's id, None when the catalog does not know it.
        direction: ``read`` or ``write``.
        last_seen_at: aware UTC instant.
    """

    usage_id: int
    job_id: int
    job_namespace: str
    job_name: str
    job_team: str | None
    dataset_namespace: str
    dataset_name: str
    dataset_id: int | None
    direction: str
    verified: bool
    run_count: int
    last_seen_at: datetime

    @property
    def identity(self) -> tuple[str, str]:
        return (self.dataset_namespace, self.dataset_name)


@dataclass
class Graph:
    """Nodes by id and edges by (source, target); ``add`` merges usage rows of the same
    job, dataset and direction (several reporting teams): runs summed, the latest
    ``last_seen``, verified when any row is."""

    root: str
    nodes: dict[str, dict] = field(default_factory=dict)
    edges: dict[tuple[str, str], dict] = field(default_factory=dict)
    truncated: bool = False
    usages: set[int] = field(default_factory=set)

    def add_dataset(self, namespace: str, name: str, dataset_id: int | None) -> str:
        node_id = dataset_node_id(namespace, name)
        node = self.nodes.setdefault(
            node_id,
            {
                "id": node_id,
                "type": DATASET,
                "namespace": namespace,
                "name": name,
                "catalogued": False,
                "dataset_id": None,
            },
        )
        if dataset_id is not None:
            node.update(catalogued=True, dataset_id=dataset_id)
        return node_id

    def add_job(self, namespace: str, name: str, team: str | None) -> str:
        node_id = job_node_id(namespace, name)
        node = self.nodes.setdefault(
            node_id, {"id": node_id, "type": JOB, "namespace": namespace, "name": name}
        )
        node["team"] = node.get("team") or team
        return node_id

    def add(self, edge: Edge) -> None:
        if edge.usage_id in self.usages:
            return
        self.usages.add(edge.usage_id)
        dataset = self.add_dataset(edge.dataset_namespace, edge.dataset_name, edge.dataset_id)
        job = self.add_job(edge.job_namespace, edge.job_name, edge.job_team)
        source, target = (dataset, job) if edge.direction == READ else (job, dataset)
        current = self.edges.get((source, target))
        if current is None:
            self.edges[(source, target)] = {
                "source": source,
                "target": target,
                "direction": edge.direction,
                "run_count": edge.run_count,
                "last_seen": edge.last_seen_at,
                "verified": edge.verified,
            }
            return
        current["run_count"] += edge.run_count
        current["last_seen"] = max(current["last_seen"], edge.last_seen_at)
        current["verified"] = current["verified"] or edge.verified

    def as_dict(self) -> dict:
        """``{root, truncated, nodes: [...] by id, edges: [...] by (source, target)}``."""
        return {
            "root": self.root,
            "truncated": self.truncated,
            "nodes": [self.nodes[k] for k in sorted(self.nodes)],
            "edges": [self.edges[k] for k in sorted(self.edges)],
        }


def level(
    graph: Graph,
    edges: list[Edge],
    *,
    walk: str,
    datasets: set[tuple[str, str]],
    jobs: set[int],
) -> tuple[set[tuple[str, str]], set[int]]:
    """Add one level of a walk to ``graph`` and return its next frontier.

    Args:
        edges: every usage row of the jobs this level reaches (one query's rows).
        walk: ``downstream`` or ``upstream``.
        datasets: the frontier's dataset identities (the level reaches the jobs reading
            them, downstream, or writing them, upstream).
        jobs: the frontier's job ids (a job root's first level).

    Returns:
        ``(datasets, job ids)`` this level reached on its far side: the next frontier.
    """
    near, far = (READ, WRITE) if walk == DOWNSTREAM else (WRITE, READ)
    reached_jobs = {e.job_id for e in edges if e.direction == near and e.identity in datasets}
    reached_jobs |= jobs
    reached: set[tuple[str, str]] = set()
    for edge in edges:
        if edge.job_id not in reached_jobs:
            continue
        if edge.direction == near and edge.identity in datasets:
            graph.add(edge)
        elif edge.direction == far:
            graph.add(edge)
            reached.add(edge.identity)
    return reached, reached_jobs
