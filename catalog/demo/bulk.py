"""The demo history's one bulk write: partitions the fallback poll found on time, a month
of hours of them, inserted in a few statements instead of a sweep each.

Each row is what ``publishing.readiness_found`` writes for a find (the partition, its
revision detected by the poll, the readiness event with what was found, the
``partition.ready`` notification), with the same content helpers, stamped at the instant
the poll found it. Nobody subscribed then, so nobody is told; the freshness evaluation
later judges every deadline of them ready, as it would have.
"""

from __future__ import annotations

from django.db import connection, transaction

from .. import freshness_state, notices
from ..models import Dataset, Notification, Partition, PartitionRevision, ReadinessEvent
from ..services import publish_steps
from .landings import Landing

EXPECTED_FILES = 3


@transaction.atomic
def found_by_poll(dataset: Dataset, landings: list[Landing]) -> int:
    """Insert ``landings`` of a poll-only dataset as found complete at their
    ``ready_at``.

    Returns:
        How many partitions it inserted.
    """
    if not landings:
        return 0
    manifest = {"expected_files": EXPECTED_FILES, "row_count": 1200 * EXPECTED_FILES}
    found = {
        "files": EXPECTED_FILES,
        "expected_files": EXPECTED_FILES,
        "reason": f"{EXPECTED_FILES} of {EXPECTED_FILES} expected files present",
    }
    parts = Partition.objects.bulk_create(
        Partition(dataset=dataset, key=x.key, start_at=x.period.start, end_at=x.period.end)
        for x in landings
    )
    revisions, events = [], []
    for part, landing in zip(parts, landings, strict=True):
        content, event_fields = publish_steps.revision_content(
            actor=None,
            version=None,
            state=PartitionRevision.State.READY,
            manifest=manifest,
            metadata={"poll": found},
            code_version="",
            now=landing.ready_at,
            found=found,
            missed_event=False,
        )
        revisions.append(PartitionRevision(partition=part, version="", **content))
        events.append(event_fields)
    PartitionRevision.objects.bulk_create(revisions)
    event_rows = ReadinessEvent.objects.bulk_create(
        ReadinessEvent(dataset=dataset, partition=part, revision=revision, **fields)
        for part, revision, fields in zip(parts, revisions, events, strict=True)
    )
    notifications = []
    for part, revision, event, landing in zip(parts, revisions, event_rows, landings, strict=True):
        kind, data = publish_steps.readiness_notice(
            dataset, part, revision, restated_version=None, missed_event=False
        )
        notification = Notification(
            type=kind, dataset=dataset, dedup_key=f"readiness-event:{event.pk}"
        )
        notification.payload = notices.notification_payload(
            notification.id, type=kind, data=data, now=landing.ready_at
        )
        notifications.append(notification)
    Notification.objects.bulk_create(notifications)
    _point_and_stamp(parts, revisions, event_rows, notifications, landings)
    return len(parts)


def _point_and_stamp(parts, revisions, events, notifications, landings) -> None:
    """Point each partition at its revision, and stamp every row at its find
    (``bulk_create`` stamps ``auto_now`` fields with one instant for all): one
    ``executemany`` per table."""
    stamps = [connection.ops.adapt_datetimefield_value(x.ready_at) for x in landings]

    def key(row):
        return row._meta.pk.get_db_prep_value(row.pk, connection)

    statements = [
        (
            PartitionRevision,
            "created_at = %s",
            [[t, key(r)] for t, r in zip(stamps, revisions, strict=True)],
        ),
        (
            ReadinessEvent,
            "received_at = %s",
            [[t, key(e)] for t, e in zip(stamps, events, strict=True)],
        ),
        (
            Notification,
            "created_at = %s",
            [[t, key(n)] for t, n in zip(stamps, notifications, strict=True)],
        ),
        (
            Partition,
            "created_at = %s, updated_at = %s, current_revision_id = %s",
            [[t, t, r.pk, key(p)] for t, p, r in zip(stamps, parts, revisions, strict=True)],
        ),
    ]
    with connection.cursor() as cursor:
        for model, assignments, rows in statements:
            cursor.executemany(
                f"UPDATE {model._meta.db_table} SET {assignments} WHERE id = %s",  # noqa: S608
                rows,
            )


def judged_through(dataset: Dataset, landings: list[Landing]) -> None:
    """Move the dataset's stored next deadline past the deadlines of ``landings`` (all
    found on time): what judging each of them would have concluded, none being late."""
    sla = freshness_state.sla_of(dataset)
    if sla is None or not landings:
        return
    deadline = sla.next_deadline(landings[-1].deadline)
    Dataset.objects.filter(pk=dataset.pk, next_deadline_at__lte=deadline).update(
        next_deadline_at=deadline, next_check_at=sla.late_after(deadline)
    )
