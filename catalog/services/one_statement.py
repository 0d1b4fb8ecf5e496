"""PostgreSQL's one-statement publish: a new partition with its first revision and all it
owes (readiness event, notification, deliveries) written by one statement without a
transaction around it (``publish_at_once``), and a new revision of a locked partition
written with its outbox in one round trip (``insert_revision_with_outbox``); their SQL
and the outbox CTEs they share. Kept apart from ``publishing`` because it is raw SQL
that tests compare row by row with the ORM's."""

from __future__ import annotations

import dataclasses
import functools
import json
import uuid
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection, models
from django.utils import timezone

from problems import Problem
from schedules.periods import LogicalInterval

from .. import doorbell, notices, watchdog_feed
from ..actors import Actor
from ..crashpoints import crashpoint
from ..models import Dataset, Delivery, Partition, PartitionRevision
from . import publish_steps, publish_targets

_Model = TypeVar("_Model", bound=models.Model)


def publish_at_once(
    *,
    actor: Actor,
    namespace: str,
    name: str,
    key: str,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
) -> tuple[publish_steps.PublishResult | None, publish_targets.PublishTarget | None]:
    """The common publish, a first revision of a new partition, committed by its one
    statement (``_CREATE_PARTITION_SQL``) without a transaction around it (PostgreSQL
    only). BEGIN, COMMIT and reading the target were three of a publish's four round
    trips: the statement acts on the target this process kept of the dataset
    (``publish_targets.kept_publish_target``) and writes only if that is still current;
    otherwise the target is read, outside a transaction too, and the statement tried
    again. A plain repeat is answered from one read (``_publish_repeat``).

    Every check of ``publish_steps.check_publishable`` (a partition from the future
    included) is made on the target it acts on, and the target's version covers each
    dataset field those checks read (``accepts_future_partitions`` too), so a change
    committed between the read and the statement makes it write nothing.

    Only what needs nothing else in the same transaction takes this way: not a dataset the
    watchdog watches (its ping must commit with the partition); the caller keeps a publish
    recording a schema off it. Closing the partition's late incident (if the statement saw
    one open) commits just after, in its own transaction; ``freshness.recover_arrived``
    closes one that a crash in between left open.

    Returns:
        ``(response, None)`` when published; else ``(None, target)``, for the
        transactional way: the target it may act on (None: it reads it).

    Raises:
        What ``publish_steps.check_publishable`` raises about the target as read (nothing
        is written).
    """
    content, event_fields = publish_steps.revision_content(
        actor=actor,
        version=version,
        state=state,
        manifest=manifest,
        metadata=metadata,
        code_version=code_version,
        now=now,
    )

    def write(target: publish_targets.PublishTarget, interval: LogicalInterval | None):
        """``(response or None, whether the target was current; None: not tried, the
        publish is not a new partition of an unwatched dataset)``."""
        if (
            target.partition_exists
            or target.subscribers is None
            or watchdog_feed.watches(target.dataset)
        ):
            return None, None
        return publish_new_partition(
            target=target,
            key=key,
            interval=interval,
            version=version,
            content=content,
            event_fields=event_fields,
            now=now,
        )

    repeat = functools.partial(_publish_repeat, key=key, version=version, state=state)
    kept = publish_targets.kept_publish_target(namespace, name)
    # A kept target may be out of date: only a publish it plainly allows (by the owner,
    # of a dataset not retired, with a key in its format) acts on it; anything else, and
    # every refusal, is judged on a fresh one.
    if kept is not None and kept.dataset.owner_id == actor.team.pk:
        try:
            interval = publish_steps.check_publishable(
                actor, kept.dataset, namespace=namespace, name=name, key=key, now=now
            )
        except Problem:
            kept = None
    else:
        kept = None
    if kept is not None:
        result, current = write(kept, interval)
        if result is not None:
            return result, None
        if current:  # the partition exists: the kept target is the one to act on
            kept = dataclasses.replace(kept, partition_exists=True)
            result = repeat(kept)
            return result, (None if result is not None else kept)
    target = publish_targets.publish_target(namespace, name, key)
    interval = publish_steps.check_publishable(
        actor, target.dataset, namespace=namespace, name=name, key=key, now=now
    )
    result, current = write(target, interval)
    if result is None and current is False:
        return None, None  # changed since this very read: the transactional way reads again
    if result is None and target.partition_exists:
        result = repeat(target)
    return result, (None if result is not None else target)


# The partition's current revision, and the id of its first event in its state.
_CURRENT_REVISION_SQL = """
SELECT p.id, p.start_at, p.end_at, r.id, r.version, r.state, r.ready_at, (
    SELECT e.id FROM catalog_readinessevent e
    WHERE e.revision_id = r.id AND e.state = r.state ORDER BY e.id LIMIT 1
)
FROM catalog_partition p JOIN catalog_partitionrevision r ON r.id = p.current_revision_id
WHERE p.dataset_id = %s AND p.key = %s
"""


def _publish_repeat(
    target: publish_targets.PublishTarget, *, key: str, version: str | None, state: str
) -> publish_steps.PublishResult | None:
    """The answer to a repeat of what the partition's current revision already says (no
    ``version``, or its version, and its state), read without a lock or a transaction:
    nothing is written, so the answer holds as of the read. None (the transactional way
    decides) for anything else."""
    with connection.cursor() as cursor:
        cursor.execute(_CURRENT_REVISION_SQL, [target.dataset.pk, key])
        row = cursor.fetchone()
    if row is None:
        return None
    part_id, start_at, end_at, revision_id, current_version, current_state, ready_at, event = row
    if current_state != state or version not in (None, current_version):
        return None
    part = Partition(id=part_id, dataset=target.dataset, key=key, start_at=start_at, end_at=end_at)
    revision = PartitionRevision(
        id=revision_id, partition=part, version=current_version, state=state, ready_at=ready_at
    )
    part.current_revision = revision
    return publish_steps.publish_response(
        target.dataset, part, revision, status_code=200, event_id=event
    )


def publish_new_partition(
    *,
    target: publish_targets.PublishTarget,
    key: str,
    interval: LogicalInterval | None,
    version: str | None,
    content: dict[str, Any],
    event_fields: dict[str, Any],
    now: datetime,
) -> tuple[publish_steps.PublishResult | None, bool]:
    """Create the partition with its first revision and all it owes in one statement, if
    ``target`` is current: ``(response, True)``; ``(None, current)`` when nothing was
    written (the partition exists, or the target is not current)."""
    created, current = _create_partition_with_revision(
        target=target,
        key=key,
        interval=interval,
        version=version or "",
        content=content,
        event_fields=event_fields,
        now=now,
    )
    if created is None:
        return None, current
    dataset = target.dataset
    part, revision, event_id, maybe_late = created
    publish_steps.revision_arrived(
        dataset=dataset, key=key, revision=revision, maybe_late=maybe_late, now=now
    )
    return publish_steps.publish_response(
        dataset, part, revision, status_code=201, event_id=event_id
    ), True


# PostgreSQL: what a new revision owes, after a ``revision`` CTE (id, partition_id): its
# readiness event, the notification (deduplicated by the event's id) and one delivery per
# endpoint. Every column the models fill is given, as the ORM would (auto_now and
# auto_now_add from ``stamp``); tests/catalog/test_publish_one_statement.py compares the
# rows with the ORM's. ``newer`` is ``publish_steps.newer_ready_exists`` judged by the
# statement itself: a ``partition.ready`` says whether it is a backfill, and the
# deliveries go to the endpoints for that case (``notices.matching_endpoints``).
_OUTBOX_CTES = """
newer AS (
    SELECT %(ready)s AND EXISTS (
        SELECT 1 FROM catalog_partition newer_partition
        JOIN catalog_partitionrevision newer_revision
            ON newer_revision.id = newer_partition.current_revision_id
        WHERE newer_partition.dataset_id = %(dataset)s
          AND newer_partition.start_at > %(start)s AND newer_partition.start_at <= %(now)s
          AND newer_revision.state = 'ready'
    ) AS superseded
), event AS (
    INSERT INTO catalog_readinessevent
        (dataset_id, partition_id, revision_id, state, source, published_by_id, api_key_id,
         restated_version, payload, received_at)
    SELECT %(dataset)s, revision.partition_id, revision.id, %(state)s, %(source)s,
           %(published_by)s, %(api_key)s, %(restated_version)s, %(event_payload)s::jsonb,
           %(stamp)s
    FROM revision
    RETURNING id
), notification AS (
    INSERT INTO catalog_notification (id, type, dataset_id, dedup_key, payload, created_at)
    SELECT %(notification)s, %(type)s, %(dataset)s, 'readiness-event:' || event.id,
           CASE WHEN %(tells_backfill)s
                THEN jsonb_set(%(notification_payload)s::jsonb, '{data,backfill}',
                               to_jsonb(newer.superseded))
                ELSE %(notification_payload)s::jsonb END,
           %(stamp)s
    FROM event, newer
    RETURNING id
), deliveries AS (
    INSERT INTO catalog_delivery
        (notification_id, endpoint_id, state, attempts, attempts_before_replay,
         next_attempt_at, last_error_kind, last_error, created_at)
    SELECT notification.id, endpoint.id, %(pending)s, 0, 0, %(now)s, '', '', %(stamp)s
    FROM notification, newer, unnest(
        CASE WHEN newer.superseded THEN %(endpoints_superseded)s::bigint[]
             ELSE %(endpoints)s::bigint[] END
    ) AS endpoint (id)
)"""
# Whether the partition has an open late incident for ``freshness.partition_arrived``.
_MAYBE_LATE = """%(ready)s AND EXISTS (
    SELECT 1 FROM catalog_latepartition
    WHERE dataset_id = %(dataset)s AND partition_key = %(key)s AND recovered_at IS NULL
)"""

# A new revision of a locked partition with everything it owes, and (if it becomes
# current) the partition's pointer to it, in one round trip.
_INSERT_REVISION_SQL = f"""
WITH revision AS (
    INSERT INTO catalog_partitionrevision
        (partition_id, version, state, manifest, metadata, code_version, detected_by,
         ready_at, created_at)
    VALUES (%(partition)s, %(version)s, %(state)s, %(manifest)s::jsonb, %(metadata)s::jsonb,
            %(code_version)s, %(detected_by)s, %(ready_at)s, %(stamp)s)
    RETURNING id, partition_id
), {_OUTBOX_CTES}, pointer AS (
    UPDATE catalog_partition SET current_revision_id = revision.id, updated_at = %(stamp)s
    FROM revision
    WHERE catalog_partition.id = revision.partition_id AND %(becomes_current)s
)
SELECT revision.id, event.id, {_MAYBE_LATE}
FROM revision, event
"""  # noqa: S608 - constant fragments, no input

# A new partition, created already pointing at its first revision (whose id is drawn
# first: the foreign keys are checked at commit), and everything the revision owes, in one
# round trip, if the publish target (``publish_targets.publish_target``) still has the version the
# publish acted on. One row: whether it had, and, if the partition was created (the
# version held and the insert did not conflict), its ids.
_CREATE_PARTITION_SQL = f"""
WITH target AS (
    SELECT 1 {publish_targets.TARGET_FROM}
    WHERE catalog_dataset.id = %(dataset)s AND {publish_targets.TARGET_VERSION} = %(target_version)s
), partition AS (
    INSERT INTO catalog_partition
        (dataset_id, key, start_at, end_at, current_revision_id, created_at, updated_at)
    SELECT %(dataset)s, %(key)s, %(start)s, %(end)s,
           nextval(pg_get_serial_sequence('catalog_partitionrevision', 'id')),
           %(stamp)s, %(stamp)s
    FROM target
    ON CONFLICT (dataset_id, key) DO NOTHING
    RETURNING id, current_revision_id
), revision AS (
    INSERT INTO catalog_partitionrevision
        (id, partition_id, version, state, manifest, metadata, code_version, detected_by,
         ready_at, created_at)
    SELECT current_revision_id, id, %(version)s, %(state)s, %(manifest)s::jsonb,
           %(metadata)s::jsonb, %(code_version)s, %(detected_by)s, %(ready_at)s, %(stamp)s
    FROM partition
    RETURNING id, partition_id
), {_OUTBOX_CTES}
SELECT EXISTS (SELECT 1 FROM target), revision.partition_id, revision.id, event.id,
       {_MAYBE_LATE}
FROM (VALUES (1)) AS one (x) LEFT JOIN (revision CROSS JOIN event) ON true
"""  # noqa: S608 - constant fragments, no input


def _create_partition_with_revision(
    *,
    target: publish_targets.PublishTarget,
    key: str,
    interval: LogicalInterval | None,
    version: str,
    content: dict[str, Any],
    event_fields: dict[str, Any],
    now: datetime,
) -> tuple[tuple[Partition, PartitionRevision, int, bool] | None, bool]:
    """PostgreSQL only: create the partition with its first revision and everything that
    owes (``_CREATE_PARTITION_SQL``), the common publish, in one statement: the rows the
    statement-by-statement path of ``publishing._publish`` writes in eight. The statement
    writes only if ``target`` (its dataset, subscribers and version, read earlier or kept
    by this process) is still current. Rings the doorbell after commit.

    Returns:
        ``(created, current)``: ``created`` is ``(partition, revision, event id,
        maybe_late)``, or None when nothing was written (the partition exists, or the
        target is not current); ``current``: the target's version still held;
        ``maybe_late``: the partition has an open late incident (ready revisions only).
    """
    dataset = target.dataset
    start, end = (interval.start, interval.end) if interval else (None, None)
    stamp = timezone.now()  # what auto_now and auto_now_add would set
    part = Partition(dataset=dataset, key=key, start_at=start, end_at=end, created_at=stamp)
    part.updated_at = stamp
    revision = PartitionRevision(partition=part, version=version, created_at=stamp, **content)
    kind, data = publish_steps.readiness_notice(
        dataset, part, revision, restated_version=None, missed_event=_missed(event_fields)
    )
    endpoint_ids = _endpoints_either_way(target.subscribers, kind=kind, key=key)
    params = _outbox_params(dataset, revision, event_fields, kind, data, endpoint_ids, now=now)
    params.update(end=end, target_version=target.version)
    with connection.cursor() as cursor:
        cursor.execute(_CREATE_PARTITION_SQL, params)
        current, part.pk, revision.pk, event_id, maybe_late = cursor.fetchone()
    if part.pk is None:
        return None, current
    revision.partition = _saved(part)  # its id is known now
    part.current_revision = _saved(revision)
    _outbox_written(endpoint_ids)
    return (part, revision, event_id, maybe_late), current


def insert_revision_with_outbox(
    *,
    dataset: Dataset,
    part: Partition,
    version: str,
    content: dict[str, Any],
    event_fields: dict[str, Any],
    becomes_current: bool,
    now: datetime,
) -> tuple[PartitionRevision, int, bool]:
    """PostgreSQL only: write a new revision of the locked ``part`` and everything it
    owes in two statements (the subscribers, then ``_INSERT_REVISION_SQL``): the rows the
    statement-by-statement path of ``publishing._publish`` writes in six or seven. Rings
    the doorbell after commit.

    Returns:
        ``(revision, event id, maybe_late)``; ``maybe_late``: the partition has an open
        late incident (ready revisions only).
    """
    stamp = timezone.now()  # what auto_now and auto_now_add would set
    revision = PartitionRevision(partition=part, version=version, created_at=stamp, **content)
    kind, data = publish_steps.readiness_notice(
        dataset,
        part,
        revision,
        restated_version=event_fields["restated_version"],
        missed_event=_missed(event_fields),
    )
    subscribers = notices.dataset_subscribers(dataset_id=dataset.pk)
    endpoint_ids = _endpoints_either_way(subscribers, kind=kind, key=part.key)
    params = _outbox_params(dataset, revision, event_fields, kind, data, endpoint_ids, now=now)
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_REVISION_SQL, {**params, "becomes_current": becomes_current})
        revision.pk, event_id, maybe_late = cursor.fetchone()
    _saved(revision)
    if becomes_current:
        part.current_revision = revision
        part.updated_at = stamp
    _outbox_written(endpoint_ids)
    return revision, event_id, maybe_late


# The endpoints a revision's notification goes to: (when no newer partition is ready,
# when one is); the statement picks one by its ``newer`` CTE.
EndpointsEitherWay = tuple[set[int], set[int]]


def _endpoints_either_way(
    subscribers: list[notices.Subscriber], *, kind: str, key: str
) -> EndpointsEitherWay:
    return (
        notices.matching_endpoints(subscribers, type=kind, partition_key=key),
        notices.matching_endpoints(subscribers, type=kind, partition_key=key, superseded=True),
    )


def _missed(event_fields: dict[str, Any]) -> bool:
    return bool(event_fields["payload"].get("missed_event"))


def _outbox_params(
    dataset: Dataset,
    revision: PartitionRevision,
    event_fields: dict[str, Any],
    kind: str,
    data: dict[str, Any],
    endpoint_ids: EndpointsEitherWay,
    *,
    now: datetime,
) -> dict[str, Any]:
    """The parameters of ``_INSERT_REVISION_SQL`` and ``_CREATE_PARTITION_SQL`` (but
    ``becomes_current``, ``end`` and ``target_version``): JSON as text for ``::jsonb``."""
    notification_id = uuid.uuid4()
    published_by, api_key = event_fields["published_by"], event_fields["api_key"]
    return {
        "dataset": dataset.pk,
        "partition": revision.partition.pk,
        "key": revision.partition.key,
        "start": revision.partition.start_at,
        "version": revision.version,
        "state": revision.state,
        # SQL NULL, not JSON null, as the ORM stores None.
        "manifest": None if revision.manifest is None else json.dumps(revision.manifest),
        "metadata": json.dumps(revision.metadata),
        "code_version": revision.code_version,
        "detected_by": revision.detected_by,
        "ready_at": revision.ready_at,
        "source": event_fields["source"],
        "published_by": published_by.pk if published_by is not None else None,
        "api_key": api_key.pk if api_key is not None else None,
        "restated_version": event_fields["restated_version"],
        "event_payload": json.dumps(event_fields["payload"]),
        "notification": notification_id,
        "type": kind,
        "notification_payload": json.dumps(
            notices.notification_payload(notification_id, type=kind, data=data, now=now)
        ),
        "pending": Delivery.State.PENDING,
        "endpoints": sorted(endpoint_ids[0]),
        "endpoints_superseded": sorted(endpoint_ids[1]),
        # Whether the payload has a ``backfill`` for the statement to set (``newer``).
        "tells_backfill": "backfill" in data,
        "ready": revision.state == PartitionRevision.State.READY,
        "now": now,
        "stamp": revision.created_at,
    }


def _saved(instance: _Model) -> _Model:
    """Mark an instance built in Python as the row a raw statement just wrote."""
    instance._state.adding, instance._state.db = False, connection.alias
    return instance


def _outbox_written(endpoint_ids: EndpointsEitherWay) -> None:
    # The crash points of the statement-by-statement path: here one statement wrote all
    # the rows, so a crash at either loses them all (inside a transaction) or keeps them
    # all (``publish_at_once``: committed), never some.
    crashpoint("publish.after_event")
    crashpoint("publish.between_outbox_inserts")
    if endpoint_ids[0] or endpoint_ids[1]:
        doorbell.ring_deliveries()
