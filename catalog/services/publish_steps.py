"""The steps every way of publishing readiness shares: what a publish answers
(``PublishResult``), the checks a publish passes, the content of a new revision and of
its readiness event, the notification that tells it, and what follows a ready arrival.
The statement-by-statement path (``publishing``) and the one-statement path
(``one_statement``) both build on these, so neither imports the other's internals."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from problems import FieldError, ValidationProblem, required
from schedules.periods import KEY_FORMATS, LogicalInterval, PartitionKeyError, parse_partition_key

from .. import errors, freshness, future_partitions, unknown_datasets, watchdog_feed
from ..actors import Actor
from ..models import Dataset, Notification, Partition, PartitionRevision, ReadinessEvent
from ..notices import iso


@dataclass(frozen=True)
class PublishResult:
    """What ``publishing.readiness_publish`` answers: an HTTP status, a JSON body, and
    whether the body is a replay of the first response to the same Idempotency-Key."""

    status_code: int
    body: dict[str, Any]
    replayed: bool = False
    deliveries_created: int = field(default=0, compare=False)


def check_publishable(
    actor: Actor | None,
    dataset: Dataset | None,
    *,
    namespace: str,
    name: str,
    key: str,
    now: datetime,
) -> LogicalInterval | None:
    """The checks every publish passes: the dataset exists, the actor may publish it
    (None: the poll, which may), it is not retired, ``key`` is in its partitioning's
    format, and its period has started by ``now`` plus the clock-skew allowance unless
    the dataset accepts future partitions (``future_partitions.check_accepted``).

    Args:
        now: aware UTC instant the publish is judged at.

    Returns:
        The partition's logical interval (None when unpartitioned).

    Raises:
        DatasetNotFound (404), PublishNotAllowed (403), DatasetRetired (409),
        InvalidPartitionKey (400), PartitionInFuture (422).
    """
    if dataset is None:
        raise unknown_datasets.dataset_not_found(
            namespace, name, among=None if actor is None else publishable_by(actor)
        )
    if actor is not None:
        _check_may_publish(actor, dataset)
    if dataset.lifecycle == Dataset.Lifecycle.RETIRED:
        raise errors.DatasetRetired(
            f"{dataset} is retired; readiness can no longer be published",
            errors=[FieldError("name", "the dataset is retired", "lifecycle_retired")],
        )
    if not key and dataset.partitioning != Dataset.Partitioning.NONE:
        expected = KEY_FORMATS[dataset.partitioning]
        raise ValidationProblem(
            f"partition is required: {dataset} is partitioned {dataset.partitioning} "
            f"(key format {expected})",
            errors=[required("partition")],
            extra={"expected_format": expected},
        )
    try:
        interval = parse_partition_key(dataset.partitioning, key, dataset.partition_timezone)
    except PartitionKeyError as exc:
        raise errors.InvalidPartitionKey(
            str(exc),
            errors=[FieldError("partition", str(exc), "partition_key_format")],
            extra={"expected_format": exc.expected_format},
        ) from exc
    future_partitions.check_accepted(dataset, key, interval, now=now)
    return interval


def revision_content(
    *,
    actor: Actor | None,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
    found: dict | None = None,
    missed_event: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a new revision (or a revision changing state) records, and the fields of its
    ``ReadinessEvent`` (``actor`` None: the poll found it)."""
    content = {
        "state": state,
        "ready_at": now if state == PartitionRevision.State.READY else None,
        "manifest": manifest,
        "metadata": metadata,
        "code_version": code_version,
        "detected_by": PartitionRevision.DetectedBy.EVENT
        if actor is not None
        else PartitionRevision.DetectedBy.POLL,
    }
    event_fields = {
        "state": state,
        "source": actor.source if actor is not None else ReadinessEvent.Source.POLL,
        "published_by": actor.team if actor is not None else None,
        "api_key": actor.api_key if actor is not None else None,
        "restated_version": None,  # a new partition restates nothing; publishing._publish sets it
        "payload": {
            "version": version,
            "state": state,
            "manifest": manifest,
            "metadata": metadata,
            "code_version": code_version,
            **({"found": found, "missed_event": missed_event} if actor is None else {}),
        },
    }
    return content, event_fields


def publishable_by(actor: Actor) -> QuerySet[Dataset]:
    """The datasets ``actor`` may publish: its team's, and those its key is delegated."""
    allowed = Q(owner=actor.team)
    if actor.api_key is not None:
        allowed |= Q(pk__in=actor.api_key.delegated_datasets.values("pk"))
    return Dataset.objects.filter(allowed)


def _check_may_publish(actor: Actor, dataset: Dataset) -> None:
    if dataset.owner_id == actor.team.pk:
        return
    if (
        actor.api_key is not None
        and actor.api_key.delegated_datasets.filter(pk=dataset.pk).exists()
    ):
        return
    raise errors.PublishNotAllowed(
        f"{dataset} is owned by team {dataset.owner.slug}; only its keys, or a key delegated "
        "for this dataset, may publish"
    )


def partition_lock_or_create(
    *, dataset: Dataset, key: str, interval: LogicalInterval | None, exists: bool = False
) -> tuple[Partition, bool]:
    """The partition row, locked for this transaction; created if missing.

    One ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` (PostgreSQL and SQLite alike): a
    new row is ours and locked by the insert itself; a concurrent creator waits on the
    unique index until the first commits and then finds the row, which it locks.

    Args:
        exists: the caller's own insert of the row just conflicted, so lock it first (and
            insert it only if it has gone since).

    Returns:
        ``(partition, created)``.
    """
    if exists:
        # No join here: the current revision must be read after the lock is granted, or a
        # waiter would act on the revision as it was before the holder changed it.
        part = Partition.objects.select_for_update().filter(dataset=dataset, key=key).first()
        if part is not None:
            return part, False
    now = timezone.now()
    start, end = (interval.start, interval.end) if interval else (None, None)
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Partition._meta.db_table} "  # noqa: S608 - table name from the model
            "(dataset_id, key, start_at, end_at, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (dataset_id, key) DO NOTHING RETURNING id",
            [dataset.pk, key, adapt(start), adapt(end), adapt(now), adapt(now)],
        )
        row = cursor.fetchone()
    if row is not None:
        part = Partition(
            id=row[0], dataset=dataset, key=key, start_at=start, end_at=end, created_at=now
        )
        part.updated_at = now
        return part, True
    # No join here (see above).
    return Partition.objects.select_for_update().get(dataset=dataset, key=key), False


def revision_arrived(
    *, dataset: Dataset, key: str, revision: PartitionRevision, maybe_late: bool, now: datetime
) -> None:
    """After a new readiness event: a ready revision closes the partition's late incident
    (if ``maybe_late``: one may be open) and pings the watchdog."""
    if revision.state != PartitionRevision.State.READY:
        return
    if maybe_late:
        # A savepoint in a publish's transaction; its own after ``one_statement.publish_at_once``.
        with transaction.atomic():
            freshness.partition_arrived(dataset=dataset, partition_key=key, now=now)
    watchdog_feed.ping_partition(dataset, partition_key=key, revision_id=revision.pk, now=now)


def readiness_notice(
    dataset: Dataset,
    part: Partition,
    revision: PartitionRevision,
    *,
    restated_version: str | None,
    missed_event: bool,
    backfill: bool = False,
) -> tuple[str, dict[str, Any]]:
    """The notification type and ``data`` telling a readiness event of ``revision``
    (schemas: ``catalog.event_types.partitions``).

    Args:
        backfill: a newer partition of the dataset was already ready
            (``newer_ready_exists``); a ``partition.ready`` says so in ``backfill``. The
            one-statement publish passes False and lets its statement decide
            (``one_statement._OUTBOX_CTES``).
    """
    if revision.state == PartitionRevision.State.FAILED:
        kind = Notification.Type.PARTITION_FAILED
    elif restated_version is not None and dataset.partitioning != Dataset.Partitioning.NONE:
        kind = Notification.Type.PARTITION_RESTATED
    else:
        kind = Notification.Type.PARTITION_READY
    data = {
        "dataset": {"namespace": dataset.namespace, "name": dataset.name},
        "partition": part.key,
        "logical_start": iso(part.start_at),
        "logical_end": iso(part.end_at),
        "version": revision.version or None,
        "previous_version": (restated_version or None)
        if kind == Notification.Type.PARTITION_RESTATED
        else None,
        "state": revision.state,
        "ready_at": iso(revision.ready_at),
        "manifest": revision.manifest,
        "metadata": revision.metadata,
        "detected_by": revision.detected_by,
        "missed_event": missed_event,
    }
    if kind == Notification.Type.PARTITION_READY:
        data["backfill"] = backfill
    return kind, data


def newer_ready_exists(*, dataset: Dataset, start_at: datetime | None, now: datetime) -> bool:
    """Whether a partition of ``dataset`` newer than the one starting at ``start_at``
    (aware UTC; None: unpartitioned, never) is ready and has started by ``now``: then a
    partition becoming ready is a backfill, and a restatement is of an old period.

    Reads what the caller's transaction sees: two partitions made
    ready concurrently may both be told as not backfills.
    """
    if start_at is None:
        return False
    # The same rule as ``one_statement._NEWER_READY``; the partition_newest index serves it.
    return Partition.objects.filter(
        dataset=dataset,
        start_at__gt=start_at,
        start_at__lte=now,
        current_revision__state=PartitionRevision.State.READY,
    ).exists()


def publish_response(
    dataset: Dataset,
    part: Partition,
    revision: PartitionRevision,
    *,
    status_code: int,
    event_id: int | None = None,
    restatement_id: int | None = None,
) -> PublishResult:
    if event_id is None:
        event_id = (
            ReadinessEvent.objects.filter(revision=revision, state=revision.state)
            .values_list("pk", flat=True)
            .first()
        )
    current_version = part.current_revision.version if part.current_revision else revision.version
    body = {
        "dataset": {"namespace": dataset.namespace, "name": dataset.name},
        "partition": part.key,
        "logical_start": iso(part.start_at),
        "logical_end": iso(part.end_at),
        "version": revision.version or None,
        "state": revision.state,
        "ready_at": iso(revision.ready_at),
        "current_version": current_version or None,
        "event_id": event_id,
    }
    if restatement_id is not None:
        body["restatement"] = restatement_id
    return PublishResult(status_code=status_code, body=body)
