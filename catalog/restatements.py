"""Versioned restatements: a new version of a range of partitions, staged then promoted at once.

An owner reprocessing a range (say seven days after a logic fix) opens a restatement for a
new version, then publishes each partition into it (``readiness_publish(restatement=...)``).
Those revisions are ready but not current: every read goes through
``Partition.current_revision``, so the partition list, the latest ready partition and
freshness keep answering with the revisions that were current, and no consumer is told.

Promotion, once every partition of the range has a ready revision in the restatement (and
a manifest, where the dataset's completion signal is the manifest), repoints every
partition of the range in one transaction: the partitions are locked in key order and
updated together, so a reader's one query sees all old or all new. It writes one
``dataset.version_promoted`` notification listing the range (through the outbox) and an
audit entry. Abandoning a restatement changes nothing readers see.

Locks: staging and closing lock the restatement row first (``FOR UPDATE``), promotion then
the partitions in key order, so a staged publish never lands in a restatement being closed.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction

from problems import FieldError, ValidationProblem
from schedules.periods import PartitionKeyError, parse_partition_key, periods_ending_in

from . import errors, freshness, future_partitions, notices
from .models import (
    AuditEntry,
    Dataset,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    Restatement,
)
from .notices import iso

if TYPE_CHECKING:
    from .actors import Actor

# The most partitions one restatement may span (a runaway range is a typo).
MAX_RESTATEMENT_PARTITIONS = 1000


def _check_owner(actor: Actor, dataset: Dataset) -> None:
    if dataset.owner_id != actor.team.pk:
        raise errors.NotDatasetOwner(f"{dataset} is owned by team {dataset.owner.slug}")


def _range_keys(dataset: Dataset, first: str, last: str, *, now: datetime) -> list[str]:
    """Every partition key from ``first`` to ``last`` inclusive, in order.

    Raises:
        InvalidPartitionKey (400): a bound does not match the dataset's partitioning.
        InvalidRestatementRange (422): unpartitioned dataset, ``last`` before ``first``, or
            more than ``MAX_RESTATEMENT_PARTITIONS`` partitions.
        PartitionInFuture (422): ``last`` names a period that has not started at ``now``
            (plus the clock-skew allowance) and the dataset does not accept future
            partitions: a publish of it would be refused.
    """
    if dataset.partitioning == Dataset.Partitioning.NONE:
        raise errors.InvalidRestatementRange(
            f"{dataset} is not partitioned: publish a new version instead",
            extra={"rule": "partitioned_dataset"},
        )
    intervals = []
    for field_name, key in (("first_partition", first), ("last_partition", last)):
        try:
            intervals.append(
                parse_partition_key(dataset.partitioning, key, dataset.partition_timezone)
            )
        except PartitionKeyError as exc:
            raise errors.InvalidPartitionKey(
                str(exc),
                errors=[FieldError(field_name, str(exc), "partition_key_format")],
                extra={"expected_format": exc.expected_format},
            ) from exc
    start, end = intervals[0], intervals[1]
    future_partitions.check_accepted(dataset, last, end, now=now, field="last_partition")
    if end.start < start.start:
        raise errors.InvalidRestatementRange(
            f"last_partition {last!r} is before first_partition {first!r}",
            errors=[FieldError("last_partition", "before first_partition", "range_order")],
            extra={"rule": "range_order"},
        )
    try:
        periods = periods_ending_in(
            start.start,
            end.end,
            dataset.partitioning,
            dataset.partition_timezone,
            limit=MAX_RESTATEMENT_PARTITIONS,
        )
    except ValueError as exc:
        raise errors.InvalidRestatementRange(
            f"a restatement spans at most {MAX_RESTATEMENT_PARTITIONS} partitions",
            errors=[FieldError("last_partition", "range too long", "max_partitions")],
            extra={"rule": "max_partitions", "max_partitions": MAX_RESTATEMENT_PARTITIONS},
        ) from exc
    return [period.key for period in periods]


@transaction.atomic
def restatement_open(
    *,
    actor: Actor,
    dataset: Dataset,
    version: str,
    first_partition: str,
    last_partition: str,
    now: datetime,
    code_version: str = "",
    reason: str = "",
) -> Restatement:
    """Open a staged restatement of ``dataset``'s partitions ``first_partition`` to
    ``last_partition`` (inclusive) as ``version``, by the dataset's owner team.

    Rules: the dataset is partitioned and not retired; every partition of the range exists
    (a restatement restates what was published; new partitions are published as usual);
    ``version`` names no other restatement of the dataset and no revision of a partition
    in the range; the range's periods have started (``future_partitions``), unless the
    dataset accepts future partitions.

    Args:
        version: the producer's label of the new content (every revision staged in it).
        code_version: what produced it (e.g. the commit of the logic fix).
        now: aware UTC instant recorded as ``opened_at``.

    Returns:
        The saved restatement, ``staged``.

    Raises:
        NotDatasetOwner (403), DatasetRetired (409), InvalidPartitionKey (400),
        InvalidRestatementRange (422, ``rule`` says which, naming ``unknown_partitions``),
        PartitionInFuture (422, naming ``last_partition``), RestatementExists (409).

    Side effects: an ``AuditEntry``.
    """
    _check_owner(actor, dataset)
    if dataset.lifecycle == Dataset.Lifecycle.RETIRED:
        raise errors.DatasetRetired(f"{dataset} is retired; it can no longer be restated")
    keys = _range_keys(dataset, first_partition, last_partition, now=now)
    known = set(
        Partition.objects.filter(dataset=dataset, key__in=keys).values_list("key", flat=True)
    )
    unknown = [key for key in keys if key not in known]
    if unknown:
        raise errors.InvalidRestatementRange(
            f"{len(unknown)} partition(s) of the range were never published: "
            f"{', '.join(unknown[:20])}; a restatement restates existing partitions",
            extra={"rule": "partitions_exist", "unknown_partitions": unknown},
        )
    taken = Restatement.objects.filter(dataset=dataset, version=version).exists() or (
        PartitionRevision.objects.filter(
            partition__dataset=dataset, partition__key__in=keys, version=version
        ).exists()
    )
    if taken:
        raise errors.RestatementExists(
            f"{dataset} already has version {version!r} in this range; choose a new version",
            errors=[FieldError("version", "already used", "unique")],
        )
    restatement = Restatement(
        dataset=dataset,
        version=version,
        first_partition=first_partition,
        last_partition=last_partition,
        partition_keys=keys,
        code_version=code_version,
        reason=reason,
        opened_by=actor.label,
        opened_at=now,
    )
    restatement.full_clean()
    restatement.save()
    _audit(actor, restatement, "restatement.opened", {"state": [None, restatement.state]})
    return restatement


def revision_stage(
    *,
    actor: Actor,
    dataset: Dataset,
    restatement_id: int,
    key: str,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
) -> tuple[Partition, PartitionRevision, int | None]:
    """Stage a revision of partition ``key`` in a restatement: ready (or failed) but not
    current. Runs inside ``readiness_publish``'s transaction, after its permission checks.

    A repeat of the same publish is a no-op; a failed staged revision may be published
    ready again; a ready one cannot become failed.

    Args:
        version: None or the restatement's version.
        code_version: what produced it; the restatement's when empty.

    Returns:
        ``(partition, revision, event id)``; the event id is None when nothing changed.

    Raises:
        RestatementNotFound (404), PartitionNotFound (404), RestatementClosed (409:
        promoted or abandoned), PartitionOutsideRestatement (422), ValidationProblem
        (400: another version), RevisionAlreadyReady (409), RestatementExists (409: the
        version is taken by a revision outside the restatement).

    Side effects: the revision and its ``ReadinessEvent``; no notification, no freshness
    change, no watchdog ping: nothing readers see changes until promotion.
    """
    restatement = (
        Restatement.objects.select_for_update().filter(pk=restatement_id, dataset=dataset).first()
    )
    if restatement is None:
        raise errors.RestatementNotFound(
            f"{dataset} has no restatement {restatement_id}",
            errors=[FieldError("restatement", "no such restatement of this dataset", "exists")],
        )
    if restatement.state != Restatement.State.STAGED:
        raise errors.RestatementClosed(
            f"restatement {restatement.pk} is {restatement.state}: only a staged restatement "
            "takes publishes",
            errors=[FieldError("restatement", f"is {restatement.state}", "restatement_staged")],
            extra={"rule": "restatement_staged", "state": restatement.state},
        )
    if not restatement.covers(key):
        raise errors.PartitionOutsideRestatement(
            f"partition {key!r} is outside restatement {restatement.pk}'s range "
            f"{restatement.first_partition}..{restatement.last_partition}",
            errors=[FieldError("partition", "outside the restatement's range", "in_range")],
            extra={
                "rule": "partition_in_range",
                "first_partition": restatement.first_partition,
                "last_partition": restatement.last_partition,
            },
        )
    if version is not None and version != restatement.version:
        raise ValidationProblem(
            f"restatement {restatement.pk} stages version {restatement.version!r}",
            errors=[
                FieldError("version", f"must be {restatement.version!r} or omitted", "restatement")
            ],
        )
    part = Partition.objects.select_related("current_revision").filter(dataset=dataset, key=key)
    part = part.first()
    if part is None:  # the range's partitions existed at opening; partitions are not removed
        raise errors.PartitionNotFound(f"{dataset} has no partition {key!r}")
    revision = PartitionRevision.objects.filter(partition=part, version=restatement.version).first()
    if revision is not None and revision.restatement_id != restatement.pk:
        raise errors.RestatementExists(
            f"partition {key!r} already has a revision {restatement.version!r} outside "
            f"restatement {restatement.pk}",
            errors=[FieldError("version", "already used", "unique")],
        )
    if revision is not None and revision.state == state:
        return part, revision, None  # a repeat
    if revision is not None and revision.state == PartitionRevision.State.READY:
        raise errors.RevisionAlreadyReady(
            f"partition {key!r} is already staged ready in restatement {restatement.pk}",
            errors=[FieldError("state", "a ready revision cannot change state", "terminal")],
        )
    content = {
        "state": state,
        "ready_at": now if state == PartitionRevision.State.READY else None,
        "manifest": manifest,
        "metadata": metadata,
        "code_version": code_version or restatement.code_version,
        "detected_by": PartitionRevision.DetectedBy.EVENT,
    }
    if revision is None:
        revision = PartitionRevision(
            partition=part, version=restatement.version, restatement=restatement, **content
        )
        revision.full_clean(validate_unique=False, validate_constraints=False)
        revision.save()
    else:
        for field_name, value in content.items():
            setattr(revision, field_name, value)
        revision.save(update_fields=list(content))
    event = ReadinessEvent.objects.create(
        dataset=dataset,
        partition=part,
        revision=revision,
        state=state,
        source=ReadinessEvent.Source.API,
        published_by=actor.team,
        api_key=actor.api_key,
        restated_version=None,
        payload={
            "version": version,
            "state": state,
            "manifest": manifest,
            "metadata": metadata,
            "code_version": code_version,
            "restatement": restatement.pk,
        },
    )
    return part, revision, event.pk


def promotion_blockers(restatement: Restatement) -> list[dict[str, Any]]:
    """The partitions of the range that stop ``restatement`` from being promoted, in key
    order: ``{"partition": key, "state": missing | pending | failed | no_manifest}``.
    Empty when it may be promoted."""
    staged = {
        key: (state, has_manifest)
        for key, state, has_manifest in PartitionRevision.objects.filter(
            restatement=restatement
        ).values_list("partition__key", "state", "manifest")
    }
    needs_manifest = restatement.dataset.completion_signal == Dataset.CompletionSignal.MANIFEST
    blockers = []
    for key in restatement.partition_keys:
        state, manifest = staged.get(key, ("missing", None))
        if state == PartitionRevision.State.READY and needs_manifest and manifest is None:
            state = "no_manifest"
        if state != PartitionRevision.State.READY:
            blockers.append({"partition": key, "state": state})
    return blockers


@transaction.atomic
def restatement_promote(*, actor: Actor, restatement: Restatement, now: datetime) -> Restatement:
    """Make every revision of a staged restatement current, all in this one transaction.

    Steps: lock the restatement, check it is staged, lock the range's partitions in key
    order, check every one has a ready staged revision (``promotion_blockers``), repoint
    them all with one statement, flip the restatement to ``promoted`` (compare-and-set),
    close any late incident the new revisions end, write one ``dataset.version_promoted``
    notification to the subscribers and an audit entry.

    Args:
        now: aware UTC instant of the promotion (``closed_at``, the notification's time).

    Returns:
        The restatement, ``promoted``.

    Raises:
        NotDatasetOwner (403), RestatementClosed (409), RestatementIncomplete (409,
        naming ``missing_partitions``).

    Side effects: the notification's deliveries (the doorbell rings after commit).
    """
    dataset = restatement.dataset
    _check_owner(actor, dataset)
    restatement = _lock_staged(restatement, action="promote")
    parts = list(
        Partition.objects.select_for_update(of=("self",))
        .filter(dataset=dataset, key__in=restatement.partition_keys)
        .order_by("key")
    )
    blockers = promotion_blockers(restatement)
    if blockers:
        missing = [b["partition"] for b in blockers]
        raise errors.RestatementIncomplete(
            f"{len(missing)} of {len(restatement.partition_keys)} partition(s) are not ready "
            f"in restatement {restatement.pk}: {', '.join(missing[:20])}",
            extra={
                "rule": "all_partitions_ready",
                "missing_partitions": missing,
                "partitions": blockers,
            },
        )
    staged = {
        rev.partition_id: rev for rev in PartitionRevision.objects.filter(restatement=restatement)
    }
    previous = {
        rev.pk: rev
        for rev in PartitionRevision.objects.filter(
            pk__in=[p.current_revision_id for p in parts if p.current_revision_id]
        )
    }
    changes = []
    for part in parts:
        before = previous.get(part.current_revision_id)
        revision = staged[part.pk]
        changes.append((part, before, revision))
        part.current_revision = revision
        part.updated_at = now
    Partition.objects.bulk_update(parts, ["current_revision", "updated_at"])
    flipped = Restatement.objects.filter(pk=restatement.pk, state=Restatement.State.STAGED).update(
        state=Restatement.State.PROMOTED, closed_by=actor.label, closed_at=now
    )
    if flipped != 1:  # the row lock makes this unreachable; never promote twice
        raise errors.RestatementClosed(f"restatement {restatement.pk} is no longer staged")
    restatement.refresh_from_db()
    for part, before, _revision in changes:
        if before is None or before.state != PartitionRevision.State.READY:
            freshness.partition_arrived(dataset=dataset, partition_key=part.key, now=now)
    data = _promoted_data(restatement, changes)
    notification = notices.notification_write(
        type=Notification.Type.DATASET_VERSION_PROMOTED,
        dataset=dataset,
        dedup_key=f"restatement:{restatement.pk}:promoted",
        data=data,
        now=now,
    )
    notices.fan_out(notification=notification, dataset=dataset, partition_key=None, now=now)
    _audit(
        actor,
        restatement,
        "restatement.promoted",
        {
            "state": [Restatement.State.STAGED, Restatement.State.PROMOTED],
            "partitions": [None, restatement.partition_keys],
            "notification": [None, str(notification.pk)],
        },
    )
    return restatement


def _promoted_data(restatement: Restatement, changes: list) -> dict[str, Any]:
    dataset = restatement.dataset
    return {
        "restatement_id": restatement.pk,
        "dataset": {"id": dataset.pk, "namespace": dataset.namespace, "name": dataset.name},
        "version": restatement.version,
        "code_version": restatement.code_version,
        "first_partition": restatement.first_partition,
        "last_partition": restatement.last_partition,
        "promoted_at": iso(restatement.closed_at),
        "partitions": [
            {
                "partition": part.key,
                "version": revision.version,
                "code_version": revision.code_version,
                "previous_version": (before.version or None) if before else None,
                "previous_code_version": (before.code_version or None) if before else None,
            }
            for part, before, revision in changes
        ],
    }


@transaction.atomic
def restatement_abandon(*, actor: Actor, restatement: Restatement, now: datetime) -> Restatement:
    """Abandon a staged restatement: its revisions stay staged and never become current,
    and it takes no more publishes. Nothing readers see changes.

    Returns:
        The restatement, ``abandoned``.

    Raises:
        NotDatasetOwner (403), RestatementClosed (409).

    Side effects: an ``AuditEntry``.
    """
    _check_owner(actor, restatement.dataset)
    restatement = _lock_staged(restatement, action="abandon")
    Restatement.objects.filter(pk=restatement.pk).update(
        state=Restatement.State.ABANDONED, closed_by=actor.label, closed_at=now
    )
    restatement.refresh_from_db()
    _audit(
        actor,
        restatement,
        "restatement.abandoned",
        {"state": [Restatement.State.STAGED, Restatement.State.ABANDONED]},
    )
    return restatement


def _lock_staged(restatement: Restatement, *, action: str) -> Restatement:
    """The restatement's row, locked for this transaction; raises RestatementClosed unless
    it is staged."""
    locked = (
        Restatement.objects.select_for_update(of=("self",))
        .select_related("dataset__owner")
        .get(pk=restatement.pk)
    )
    if locked.state != Restatement.State.STAGED:
        raise errors.RestatementClosed(
            f"restatement {locked.pk} is {locked.state} ({iso(locked.closed_at)}); only a "
            f"staged restatement can be {'promoted' if action == 'promote' else 'abandoned'}",
            extra={"rule": "restatement_staged", "state": locked.state},
        )
    return locked


def _audit(actor: Actor, restatement: Restatement, action: str, changes: dict) -> None:
    AuditEntry.objects.create(
        dataset=restatement.dataset,
        team=actor.team,
        actor=actor.label,
        action=action,
        changes={
            "restatement": [None, restatement.pk],
            "version": [None, restatement.version],
            "range": [None, [restatement.first_partition, restatement.last_partition]],
            **changes,
        },
    )
