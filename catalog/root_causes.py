"""Root causes: why a partition is late, when the reason is upstream.

A dataset's upstreams are the datasets read by the jobs that write it (verified lineage,
``selectors.forecasts.verified_upstreams``), and the partitions of each it needs for a
period are the ones covering it (``selectors.forecasts.covering_keys``), exactly as the
at-risk forecast reads them. When a partition is found late, each upstream partition it
needs is looked at: one with an open late incident (``LatePartition``) is ``late`` since
its deadline plus grace; one whose current revision failed is ``failed`` since the
failure was received. The first found (upstreams by id, keys oldest first; a failure
before a lateness of the same partition) is the direct cause, and the walk goes on from
it up to ``MAX_DEPTH`` steps, never visiting a partition twice (lineage may hold a cycle):
the last partition found is the root cause the late row records and ``dataset.late``
carries as ``caused_by``.

An upstream that is merely awaited (not ready, but neither judged late nor failed) is no
cause: nothing upstream has gone wrong yet by its own rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from schedules import PartitionKeyError, Period, parse_partition_key

from .models import (
    Dataset,
    DatasetUsage,
    LatePartition,
    Partition,
    PartitionRevision,
    ReadinessEvent,
)
from .notices import iso
from .selectors.forecasts import covering_keys, verified_upstreams

MAX_DEPTH = 8  # steps up the chain; lineage deeper than this names the 8th step up


@dataclass(frozen=True)
class Cause:
    """An upstream partition that holds a late one up.

    ``dataset``: the upstream dataset; ``partition``: its key; ``state``: ``late`` or
    ``failed``; ``since``: aware UTC, its deadline plus grace (late) or when its failure
    was received (failed)."""

    dataset: Dataset
    partition: str
    state: str
    since: datetime

    def as_payload(self) -> dict:
        """The ``caused_by`` object of ``dataset.late``."""
        return {
            "namespace": self.dataset.namespace,
            "name": self.dataset.name,
            "partition": self.partition,
            "since": iso(self.since),
            "state": self.state,
        }


def _period(dataset: Dataset, key: str) -> Period | None:
    try:
        interval = parse_partition_key(dataset.partitioning, key, dataset.partition_timezone)
    except PartitionKeyError:
        return None
    return Period(key=key, start=interval.start, end=interval.end)


def direct_cause(dataset: Dataset, key: str) -> Cause | None:
    """The first upstream partition that partition ``key`` of ``dataset`` needs and that is
    late (an open late incident) or failed (its current revision), or None.

    Queries: one for the upstreams; when there are some, one for their open late
    incidents, one for their failed partitions and, when one failed, one for when."""
    period = _period(dataset, key)
    if period is None:
        return None
    needed: list[tuple[Dataset, tuple[str, ...]]] = []
    for upstream in verified_upstreams(dataset):
        keys = covering_keys(period, upstream)
        if keys is not None:
            needed.append((upstream, keys))
    if not needed:
        return None
    wanted = Q(pk__in=[])
    for upstream, keys in needed:
        wanted |= Q(dataset_id=upstream.pk, key__in=keys)
    failed = {
        (dataset_id, part_key): (revision_id, created_at)
        for dataset_id, part_key, revision_id, created_at in Partition.objects.filter(
            wanted, current_revision__state=PartitionRevision.State.FAILED
        ).values_list("dataset_id", "key", "current_revision_id", "current_revision__created_at")
    }
    failed_at = {}
    if failed:
        failed_at = dict(
            ReadinessEvent.objects.filter(
                revision_id__in=[revision for revision, _ in failed.values()],
                state=PartitionRevision.State.FAILED,
            ).values_list("revision_id", "received_at")
        )
    late_wanted = Q(pk__in=[])
    for upstream, keys in needed:
        late_wanted |= Q(dataset_id=upstream.pk, partition_key__in=keys)
    late = {
        (dataset_id, part_key): late_at
        for dataset_id, part_key, late_at in LatePartition.objects.filter(
            late_wanted, recovered_at__isnull=True
        ).values_list("dataset_id", "partition_key", "late_at")
    }
    for upstream, keys in needed:
        for part_key in keys:
            found = (upstream.pk, part_key)
            if found in failed:
                revision, created_at = failed[found]
                # Without its event (a revision created failed by the poll): its creation.
                since = failed_at.get(revision, created_at)
                return Cause(upstream, part_key, LatePartition.CauseState.FAILED, since)
            if found in late:
                return Cause(upstream, part_key, LatePartition.CauseState.LATE, late[found])
    return None


def root_cause(dataset: Dataset, key: str) -> Cause | None:
    """The cause furthest up the chain of partition ``key`` of ``dataset``: follow
    ``direct_cause`` up to ``MAX_DEPTH`` steps, stopping at a partition met before (a
    cycle in lineage). None when no upstream partition it needs is late or failed.

    Queries: ``direct_cause``'s per step (at most four), so at most ``4 * MAX_DEPTH``."""
    seen = {(dataset.pk, key)}
    found: Cause | None = None
    current_dataset, current_key = dataset, key
    for _ in range(MAX_DEPTH):
        cause = direct_cause(current_dataset, current_key)
        if cause is None or (cause.dataset.pk, cause.partition) in seen:
            break
        seen.add((cause.dataset.pk, cause.partition))
        found = cause
        current_dataset, current_key = cause.dataset, cause.partition
    return found


def root_causes(incidents: list[LatePartition]) -> list[Cause | None]:
    """``root_cause`` of each of ``incidents`` (late rows), in order; one query for the
    whole list when none of their datasets is written by a job in verified lineage (a
    deadline shared by thousands of datasets costs one query, not one each)."""
    written = set(
        DatasetUsage.objects.filter(
            dataset_id__in={i.dataset_id for i in incidents},
            direction=DatasetUsage.Direction.WRITE,
            verified=True,
        ).values_list("dataset_id", flat=True)
    )
    return [
        root_cause(i.dataset, i.partition_key) if i.dataset_id in written else None
        for i in incidents
    ]


def record(incident: LatePartition, cause: Cause | None) -> None:
    """Store ``cause`` on ``incident`` (a late row just opened, in the caller's
    transaction); nothing when None."""
    if cause is None:
        return
    incident.caused_by_dataset = cause.dataset
    incident.caused_by_partition_key = cause.partition
    incident.caused_by_state = cause.state
    incident.caused_by_since = cause.since
    LatePartition.objects.filter(pk=incident.pk).update(
        caused_by_dataset=cause.dataset,
        caused_by_partition_key=cause.partition,
        caused_by_state=cause.state,
        caused_by_since=cause.since,
    )
