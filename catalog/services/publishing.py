"""Publishing readiness: ``readiness_publish`` (the API's publish, into a restatement or
not), ``readiness_found`` and ``readiness_incomplete`` (what the fallback poll saw), and
the transactional, statement-by-statement publish they share. On PostgreSQL the common
publish is written by one statement instead (``one_statement``)."""

from __future__ import annotations

import functools
from datetime import datetime

from django.db import transaction

from problems import FieldError
from schedules.periods import PartitionKeyError, parse_partition_key

from .. import errors, future_partitions, notices, restatements, schema_changes, schemas
from ..actors import Actor
from ..crashpoints import crashpoint
from ..models import Dataset, Partition, PartitionRevision, ReadinessEvent, SchemaObservation
from ..models.partitions import MARKER_ETAG_KEPT
from . import datasets, idempotency, one_statement, publish_steps, publish_targets


def readiness_publish(
    *,
    actor: Actor,
    namespace: str,
    name: str,
    partition: str,
    version: str | None = None,
    state: str = PartitionRevision.State.READY,
    manifest: dict | None = None,
    metadata: dict | None = None,
    code_version: str = "",
    restatement: int | None = None,
    idempotency_key: str | None = None,
    now: datetime,
) -> publish_steps.PublishResult:
    """Record that a partition (revision) is ready or failed, in one transaction.

    Steps, all or nothing: the Idempotency-Key record (if a key is sent), the partition
    upsert (row-locked, so concurrent publishers of one partition serialise and those of
    different partitions do not wait on each other), the revision upsert, the immutable
    ``ReadinessEvent``, the ``Notification`` and one ``Delivery`` per matching subscriber
    endpoint. After commit the delivery doorbell rings; a broker outage never fails the
    publish. On PostgreSQL the common case, a new partition without an Idempotency-Key,
    is all written by one statement, which is its own transaction
    (``one_statement.publish_at_once``).

    Rules:
        - without ``version`` the publish refers to the current revision (created with
          version ``""`` when there is none), so a repeat is a no-op;
        - a new version of a partition whose current revision is ready becomes current
          at once and is told as ``partition.restated`` (for unpartitioned datasets, each
          new version is a new snapshot: ``partition.ready``);
        - re-publishing a superseded version changes nothing (a promotion supersedes
          every other revision of the partitions it repoints);
        - a ready revision cannot become failed: publish a new version instead;
        - a partition whose period starts after ``now`` plus the clock-skew allowance
          is refused unless the dataset accepts future partitions
          (``future_partitions``; staged publishes too);
        - with ``restatement`` the revision is staged in that restatement (of this
          dataset, staged, the partition inside its range): ready but not current, told
          to no consumer and not changing freshness until the restatement is promoted
          (``restatements.revision_stage``);
        - a version staged in a restatement is published only through it;
        - ``metadata.schema`` holding an object is the dataset's schema in the shape of
          the OpenLineage SchemaDatasetFacet (``{"fields": [{"name", "type",
          "fields"?}]}``): a ready publish outside a restatement records it as a schema
          observation (``catalog.schema_changes``), which may reveal an unannounced
          breaking change; any other value of ``metadata.schema`` is plain metadata.

    Args:
        partition: key in the dataset's partitioning format; ``""`` when unpartitioned.
        state: ``ready`` or ``failed``.
        restatement: id of a staged restatement of the dataset to publish into.
        idempotency_key: the request's ``Idempotency-Key``, scoped to the actor's team.
        now: the instant the publish is recorded at (aware, UTC).

    Returns:
        ``publish_steps.PublishResult``; status 201 when something changed, 200 when it was a no-op.

    Raises:
        DatasetNotFound (404), PublishNotAllowed (403), DatasetRetired (409),
        InvalidPartitionKey (400), PartitionInFuture (422, naming ``partition`` and the
        newest key accepted now), RevisionAlreadyReady (409), IdempotencyKeyReused (422),
        IdempotencyKeyInProgress (409), RevisionStaged (409), SchemaInvalid (400, naming
        ``metadata.schema.fields...``); with ``restatement`` also
        RestatementNotFound (404), RestatementClosed (409), PartitionOutsideRestatement
        (422).
    """
    identity = datasets.normalised_identity(namespace, name)
    try:
        schema_fields = schema_changes.readiness_schema(metadata)
    except schemas.SchemaInvalid as exc:
        raise errors.SchemaInvalid(
            "metadata.schema must hold the columns as a SchemaDatasetFacet does: "
            '{"fields": [{"name": ..., "type": ...}]}',
            errors=exc.errors,
        ) from exc
    records_schema = (
        schema_fields is not None and state == PartitionRevision.State.READY and restatement is None
    )
    request = {
        "actor": actor,
        "namespace": identity.namespace,
        "name": identity.name,
        "key": partition,
        "version": version,
        "state": state,
        "manifest": manifest,
        "metadata": metadata or {},
        "code_version": code_version,
        "now": now,
    }
    target = None
    if (
        idempotency_key is None
        and restatement is None
        and not records_schema  # its sighting commits with the publish
        and publish_targets.writes_in_one_statement()
    ):
        result, target = one_statement.publish_at_once(**request)
        if result is not None:
            crashpoint("publish.after_commit")
            return result
    with transaction.atomic():
        record = None
        if idempotency_key is not None:
            request_fingerprint = idempotency.request_fingerprint(
                {
                    "namespace": identity.namespace,
                    "name": identity.name,
                    "partition": partition,
                    "version": version,
                    "state": state,
                    "manifest": manifest,
                    "metadata": metadata,
                    "code_version": code_version,
                    # Only when sent: the fingerprints of plain publishes stay as they were.
                    **({"restatement": restatement} if restatement is not None else {}),
                }
            )
            record, replay = idempotency.idempotency_begin(
                team=actor.team, key=idempotency_key, fingerprint=request_fingerprint, now=now
            )
            if replay is not None:
                return replay
        publish = (
            functools.partial(_publish, target=target)
            if restatement is None
            else functools.partial(_publish_staged, restatement_id=restatement)
        )
        result = publish(**request)
        if records_schema:
            schema_changes.schema_sightings_record(
                sightings=[
                    schema_changes.SchemaSighting(identity.namespace, identity.name, schema_fields)
                ],
                observed_at=now,
                source=SchemaObservation.Source.READINESS,
                team=actor.team,
                authorised=True,  # the owner or a key delegated by it
                now=now,
                readiness_event_id=result.body.get("event_id"),
            )
        if record is not None:
            record.status_code = result.status_code
            record.response_body = result.body
            record.save(update_fields=["status_code", "response_body"])
    crashpoint("publish.after_commit")
    return result


def _publish_staged(
    *,
    actor: Actor,
    restatement_id: int,
    namespace: str,
    name: str,
    key: str,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
) -> publish_steps.PublishResult:
    """A publish into a restatement: the checks of ``_publish``, then
    ``restatements.revision_stage``."""
    dataset = _publishable_dataset(actor, namespace, name, key, now=now)
    part, revision, event_id = restatements.revision_stage(
        actor=actor,
        dataset=dataset,
        restatement_id=restatement_id,
        key=key,
        version=version,
        state=state,
        manifest=manifest,
        metadata=metadata,
        code_version=code_version,
        now=now,
    )
    return publish_steps.publish_response(
        dataset,
        part,
        revision,
        status_code=200 if event_id is None else 201,
        event_id=event_id,
        restatement_id=restatement_id,
    )


def _publishable_dataset(
    actor: Actor, namespace: str, name: str, key: str, *, now: datetime
) -> Dataset:
    """The dataset a staged publish names, checked as ``_publish`` checks it."""
    dataset = Dataset.objects.select_related("owner").filter(namespace=namespace, name=name).first()
    publish_steps.check_publishable(
        actor, dataset, namespace=namespace, name=name, key=key, now=now
    )
    return dataset


def _publish(
    *,
    actor: Actor | None,
    namespace: str,
    name: str,
    key: str,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
    found: dict | None = None,
    missed_event: bool = False,
    target: publish_targets.PublishTarget | None = None,
) -> publish_steps.PublishResult:
    """The publish proper, in the caller's transaction. ``actor`` None means the fallback
    poll found it in storage (``found`` says what it saw); such a find is a no-op when the
    partition is ready. ``target``: ``publish_targets.publish_target`` of this publish if
    already read (READ COMMITTED would read it afresh here no more consistently: nothing is
    locked)."""
    content, event_fields = publish_steps.revision_content(
        actor=actor,
        version=version,
        state=state,
        manifest=manifest,
        metadata=metadata,
        code_version=code_version,
        found=found,
        missed_event=missed_event,
        now=now,
    )
    for attempt in range(1, TARGET_READS + 1):
        if target is None:
            target = publish_targets.publish_target(namespace, name, key)
        dataset = target.dataset
        interval = publish_steps.check_publishable(
            actor, dataset, namespace=namespace, name=name, key=key, now=now
        )
        if target.subscribers is None or target.partition_exists:
            break
        result, current = one_statement.publish_new_partition(
            target=target,
            key=key,
            interval=interval,
            version=version,
            content=content,
            event_fields=event_fields,
            now=now,
        )
        if result is not None:
            return result
        if current:
            break  # created meanwhile by a concurrent publish: the lock below decides
        if attempt < TARGET_READS:
            # The dataset or its subscribers changed since the target was read: judge the
            # publish again on them as they are now.
            target = None
    part, part_created = publish_steps.partition_lock_or_create(
        dataset=dataset, key=key, interval=interval, exists=target.partition_exists is not None
    )
    current = None if part_created else part.current_revision
    if version is None or part_created:
        revision = current
    else:
        revision = PartitionRevision.objects.filter(partition=part, version=version).first()
    if revision is not None and revision.restatement_id is not None and revision != current:
        raise errors.RevisionStaged(
            f"partition {key!r} version {version!r} is staged in restatement "
            f"{revision.restatement_id}: publish it with that restatement, and promote it",
            errors=[FieldError("version", "staged in a restatement", "restatement")],
            extra={"rule": "staged_via_restatement", "restatement": revision.restatement_id},
        )
    if revision is not None and current is not None and revision.pk < current.pk:
        # A late retry of a superseded version must not roll the partition back.
        return publish_steps.publish_response(dataset, part, revision, status_code=200)
    promoted = current is not None and current.restatement_id is not None
    if revision is not None and promoted and revision.pk != current.pk:
        # Nor undo a promotion: a version published while the restatement was staged (a
        # newer row than the promoted one) was superseded by it.
        return publish_steps.publish_response(dataset, part, revision, status_code=200)
    if (
        revision is None
        and actor is not None
        and current is not None
        and current.state == PartitionRevision.State.READY
        and current.detected_by == PartitionRevision.DetectedBy.POLL
        and current.version == ""
        and state == PartitionRevision.State.READY
    ):
        # The late event for what the poll already found: the same content, now labelled.
        # Consumers were told once; a restatement would tell them twice. (The poll's own
        # new version is a rewrite it saw: ``readiness_restated``.)
        current.version = version or ""
        current.code_version = code_version or current.code_version
        current.metadata = {**current.metadata, **metadata}
        current.save(update_fields=["version", "code_version", "metadata"])
        return publish_steps.publish_response(dataset, part, current, status_code=200)
    current_is_ready = current is not None and current.state == PartitionRevision.State.READY
    # A failed new version never hides the last good one from readers.
    becomes_current = (revision is None or current is None or revision.pk != current.pk) and (
        state == PartitionRevision.State.READY or not current_is_ready
    )
    event_fields["restated_version"] = (
        current.version if becomes_current and current_is_ready else None
    )

    event_id = None
    if revision is None or revision.state != state:
        if revision is not None and revision.state == PartitionRevision.State.READY:
            raise errors.RevisionAlreadyReady(
                f"partition {key!r} version {revision.version or '(unversioned)'!r} is already "
                "ready; publish a new version to restate it",
                errors=[FieldError("state", "a ready revision cannot change state", "terminal")],
            )
        if revision is None and publish_targets.writes_in_one_statement():
            revision, event_id, maybe_late = one_statement.insert_revision_with_outbox(
                dataset=dataset,
                part=part,
                version=version or "",
                content=content,
                event_fields=event_fields,
                becomes_current=becomes_current,
                now=now,
            )
        else:
            if revision is None:
                revision = PartitionRevision.objects.create(
                    partition=part, version=version or "", **content
                )
            else:
                for field_name, value in content.items():
                    setattr(revision, field_name, value)
                revision.save(update_fields=list(content))
            event = ReadinessEvent.objects.create(
                dataset=dataset, partition=part, revision=revision, **event_fields
            )
            event_id = event.pk
            crashpoint("publish.after_event")
            _notify(dataset=dataset, part=part, revision=revision, event=event, now=now)
            maybe_late = True  # partition_arrived looks
        publish_steps.revision_arrived(
            dataset=dataset, key=key, revision=revision, maybe_late=maybe_late, now=now
        )
    if becomes_current and part.current_revision_id != revision.pk:
        part.current_revision = revision
        part.save(update_fields=["current_revision", "updated_at"])
    changed = becomes_current or event_id is not None
    return publish_steps.publish_response(
        dataset, part, revision, status_code=201 if changed else 200, event_id=event_id
    )


def readiness_found(
    *,
    dataset: Dataset,
    partition: str,
    manifest: dict | None,
    found: dict,
    missed_event: bool,
    now: datetime,
    marker: tuple[str, datetime | None] | None = None,
) -> bool:
    """Record a partition the fallback poll found complete in storage, in one transaction.

    Same effects as a published ready event (revision, ``ReadinessEvent`` with source
    ``poll``, notifications, freshness recovery), with ``detected_by = poll``. A partition
    already ready (published, or found before) is left alone, so a partition both
    published and found is told once.

    Args:
        partition: the key read from the storage path.
        found: what the poll saw (file counts, the reason), kept on the revision.
        missed_event: the dataset otherwise publishes events, so one was lost.
        marker: ``(etag, modified)`` of the success marker or manifest it saw (``""``/None
            when the store gives none), kept on the revision it makes ready, against
            which a later rewrite is told (``catalog.rewritten_markers``).

    Returns:
        True when this call recorded the partition as ready.

    Raises:
        PartitionInFuture (422): the partition's period has not started (the poll leaves
            such partitions alone before calling this: ``future_partitions.accepted``).
    """
    return _poll_publish(
        dataset=dataset,
        partition=partition,
        version=None,
        manifest=manifest,
        found=found,
        marker=marker,
        now=now,
        missed_event=missed_event,
    )


def readiness_restated(
    *,
    dataset: Dataset,
    partition: str,
    version: str,
    manifest: dict | None,
    found: dict,
    marker: tuple[str, datetime | None],
    now: datetime,
) -> bool:
    """Record that the fallback poll saw the success marker or manifest of a ready
    partition rewritten, in one transaction: a new version, made current and told as
    ``partition.restated`` (``detected_by = poll``), as a producer's publish of a new
    version would be (for an unpartitioned dataset, a new snapshot: ``partition.ready``).

    Args:
        partition: the key read from the storage path.
        version: the new version's label, derived from the rewritten object
            (``rewritten_markers.version_for``); publishing it again is a no-op.
        manifest: the manifest read, when the dataset completes by manifest.
        found: what the poll saw (file counts, the reason), kept on the revision.
        marker: ``(etag, modified)`` of the rewritten object, kept on the new revision.
        now: aware UTC instant it is recorded at.

    Returns:
        True when this call made and told the new version; False when the version
        already existed (nothing told).

    Raises:
        As ``readiness_found``.
    """
    return _poll_publish(
        dataset=dataset,
        partition=partition,
        version=version,
        manifest=manifest,
        found=found,
        marker=marker,
        now=now,
    )


def _poll_publish(
    *,
    dataset: Dataset,
    partition: str,
    version: str | None,
    manifest: dict | None,
    found: dict,
    marker: tuple[str, datetime | None] | None,
    now: datetime,
    missed_event: bool = False,
) -> bool:
    """What the poll found, published ready as ``version`` (None: the current revision)
    in one transaction, with ``marker`` kept on the revision it made; True when it made
    one (201)."""
    with transaction.atomic():
        result = _publish(
            actor=None,
            namespace=dataset.namespace,
            name=dataset.name,
            key=partition,
            version=version,
            state=PartitionRevision.State.READY,
            manifest=manifest,
            metadata={"poll": found},
            code_version="",
            now=now,
            found=found,
            missed_event=missed_event,
        )
        if result.status_code == 201 and marker is not None:
            _record_marker(dataset=dataset, key=partition, version=version, marker=marker)
    return result.status_code == 201


def _record_marker(
    *, dataset: Dataset, key: str, version: str | None, marker: tuple[str, datetime | None]
) -> None:
    """Keep ``marker`` on the partition's revision ``version`` (None: its current one)."""
    revisions = PartitionRevision.objects.filter(partition__dataset=dataset, partition__key=key)
    if version is None:
        current = Partition.objects.filter(dataset=dataset, key=key).values("current_revision_id")
        revisions = revisions.filter(pk__in=current)
    else:
        revisions = revisions.filter(version=version)
    etag, modified = marker
    revisions.update(marker_etag=etag[:MARKER_ETAG_KEPT], marker_modified_at=modified)


@transaction.atomic
def readiness_incomplete(
    *, dataset: Dataset, partition: str, manifest: dict | None, found: dict, now: datetime
) -> None:
    """Record what the poll saw of a partition that is not complete yet (e.g. 2 of 3
    expected files), as its pending revision, so the API says why it is not ready.

    Leaves any partition that has a revision from a producer untouched, and records
    nothing for a partition whose period has not started (``future_partitions.accepted``).
    """
    try:
        interval = parse_partition_key(dataset.partitioning, partition, dataset.partition_timezone)
    except PartitionKeyError:
        return
    if not future_partitions.accepted(dataset, interval, now=now):
        return
    part, _ = publish_steps.partition_lock_or_create(
        dataset=dataset, key=partition, interval=interval
    )
    current = part.current_revision
    if current is not None and (
        current.state != PartitionRevision.State.PENDING
        or current.detected_by != PartitionRevision.DetectedBy.POLL
    ):
        return
    metadata = {"poll": found}
    if current is None:
        current = PartitionRevision.objects.create(
            partition=part,
            version="",
            state=PartitionRevision.State.PENDING,
            manifest=manifest,
            metadata=metadata,
            detected_by=PartitionRevision.DetectedBy.POLL,
        )
        part.current_revision = current
        part.save(update_fields=["current_revision", "updated_at"])
    elif current.manifest != manifest or current.metadata != metadata:
        current.manifest = manifest
        current.metadata = metadata
        current.save(update_fields=["manifest", "metadata"])


# Reads of a publish's target before it goes on with one read moments ago even if the
# statement found that out of date again (only a dataset changing that fast could).
TARGET_READS = 3


def _notify(
    *,
    dataset: Dataset,
    part: Partition,
    revision: PartitionRevision,
    event: ReadinessEvent,
    now: datetime,
) -> None:
    """Write the notification for ``event`` and a delivery per matching subscriber
    endpoint; a ready revision of a partition older than the newest ready one is a
    backfill (``publish_steps.newer_ready_exists``), which newest-only subscribers are not
    told."""
    superseded = revision.state == PartitionRevision.State.READY and (
        publish_steps.newer_ready_exists(dataset=dataset, start_at=part.start_at, now=now)
    )
    kind, data = publish_steps.readiness_notice(
        dataset,
        part,
        revision,
        restated_version=event.restated_version,
        missed_event=bool(event.payload.get("missed_event")),
        backfill=superseded,
    )
    notification = notices.notification_write(
        type=kind, dataset=dataset, dedup_key=f"readiness-event:{event.pk}", data=data, now=now
    )
    crashpoint("publish.between_outbox_inserts")

    notices.fan_out(
        notification=notification,
        dataset=dataset,
        partition_key=part.key,
        now=now,
        superseded=superseded,
    )
