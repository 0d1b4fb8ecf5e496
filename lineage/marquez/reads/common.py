"""What the Marquez-compatible reads share: identities, who reads (``Viewer``), and a
run's kept raw events and latest runs."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from operator import or_

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from catalog.models import (
    DatasetUsage,
    RunConflict,
    Team,
)

from ...models import LineageEvent, LineageRun, LineageRunEdge

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


def identities_q(identities: list[Identity], *, prefix: str = "") -> Q:
    """A filter matching any of ``identities`` ((namespace, name) pairs) on the fields
    ``<prefix>namespace`` and ``<prefix>name``; matches nothing for none."""
    return reduce(
        or_,
        (Q(**{f"{prefix}namespace": ns, f"{prefix}name": name}) for ns, name in identities),
        Q(pk__in=[]),
    )


def run_time() -> Coalesce:
    """When a run (reached as ``run__``) happened: its end, else its last event, else its
    creation."""
    return Coalesce("run__ended_at", "run__last_event_at", "run__created_at")


def latest_runs(identities: list[Identity], *, writes: bool) -> dict[Identity, tuple]:
    """The latest run that read or wrote (``writes``: wrote) each identity:
    ``{identity: (run pk, run_id, when)}``."""
    if not identities:
        return {}
    edges = LineageRunEdge.objects.filter(identities_q(identities, prefix="usage__dataset_"))
    if writes:
        edges = edges.filter(usage__direction=DatasetUsage.Direction.WRITE)
    rows = edges.values_list(
        "usage__dataset_namespace", "usage__dataset_name", "run_id", "run__run_id"
    ).annotate(when=run_time())
    latest: dict[Identity, tuple] = {}
    # One row per (identity, run): few per dataset on a page, and no DISTINCT ON so the
    # embedded SQLite runs it too.
    for ns, name, pk, run_id, when in rows.order_by("when", "run_id"):
        latest[(ns, name)] = (pk, run_id, when)
    return latest


def run_payloads(run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list]:
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


def write_runs(namespace: str, name: str) -> QuerySet:
    """The run edges that wrote dataset ``namespace``/``name`` (its versions), newest first
    (annotated ``when``, ``run_time``)."""
    return (
        LineageRunEdge.objects.filter(
            usage__dataset_namespace=namespace,
            usage__dataset_name=name,
            usage__direction=DatasetUsage.Direction.WRITE,
        )
        .annotate(when=run_time())
        .order_by("-when", "-run_id")
    )
