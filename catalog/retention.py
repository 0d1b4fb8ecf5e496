"""The catalog's retention rules, one per table that grows with time (run by
``pruning.engine``; defaults in ``TIDEMARK_RETENTION``, documented in docs/operations.md).

Never deleted here: deliveries still to be sent (pending, retrying), dead letters younger
than their window (still replayable), a notification any delivery still names, a
``watchdog.monitor`` notification (it is how the feed knows a dataset was watched), an
unexpired idempotency record, the readiness events of a partition's current revision and
those a schema observation names, the endpoints' success counters of the hours their
health reads. The audit trail, partitions and revisions, change notices, usage and
schemas are kept: they are the catalog's record, not its history log.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet

from pruning.engine import Rule

from . import success_counts
from .models import (
    Delivery,
    EndpointSuccessHour,
    IdempotencyRecord,
    Notification,
    Partition,
    ReadinessEvent,
    SchemaObservation,
)

FINISHED_STATES = (Delivery.State.SUCCEEDED, Delivery.State.CANCELLED)
DEAD_LETTER_STATES = (Delivery.State.REJECTED, Delivery.State.DEAD)


def _days(name: str) -> timedelta:
    return timedelta(days=settings.TIDEMARK_RETENTION[name])


def _finished_before(cutoff: datetime) -> Q:
    # A terminal delivery always has finished_at; rows from before it was kept fall back
    # on when they were created.
    return Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, created_at__lt=cutoff)


def prunable_deliveries(now: datetime) -> QuerySet[Delivery]:
    """Succeeded or cancelled deliveries finished more than ``succeeded_deliveries_days``
    before ``now``, and dead letters (rejected, dead) more than ``dead_letters_days``
    before; never pending or retrying ones. Their attempts go with them."""
    return Delivery.objects.filter(
        (Q(state__in=FINISHED_STATES) & _finished_before(now - _days("succeeded_deliveries_days")))
        | (Q(state__in=DEAD_LETTER_STATES) & _finished_before(now - _days("dead_letters_days")))
    )


def prunable_notifications(now: datetime) -> QuerySet[Notification]:
    """Notifications created more than ``notifications_days`` before ``now`` that no
    delivery names any more; never ``watchdog.monitor`` ones."""
    return Notification.objects.filter(
        created_at__lt=now - _days("notifications_days"),
    ).exclude(
        Q(type=Notification.Type.WATCHDOG_MONITOR)
        | Q(Exists(Delivery.objects.filter(notification_id=OuterRef("pk"))))
    )


def prunable_idempotency_records(now: datetime) -> QuerySet[IdempotencyRecord]:
    """Idempotency records whose window (``TIDEMARK_IDEMPOTENCY_TTL_SECONDS``, fixed when
    each was written) ended before ``now``: a reuse of the key is a new request then."""
    return IdempotencyRecord.objects.filter(expires_at__lt=now)


def prunable_readiness_events(now: datetime) -> QuerySet[ReadinessEvent]:
    """Readiness events received more than ``readiness_events_days`` before ``now``,
    except those of a revision that is some partition's current one and those a schema
    observation names."""
    return ReadinessEvent.objects.filter(
        received_at__lt=now - _days("readiness_events_days"),
    ).exclude(
        Q(Exists(Partition.objects.filter(current_revision_id=OuterRef("revision_id"))))
        | Q(Exists(SchemaObservation.objects.filter(readiness_event_id=OuterRef("pk"))))
    )


def prunable_endpoint_success_hours(now: datetime) -> QuerySet[EndpointSuccessHour]:
    """Endpoints' success counters of hours that began more than
    ``endpoint_success_hours_days`` before ``now``; never an hour the health window
    still reads (``success_counts.health_window_start``), however short the setting."""
    cutoff = min(
        now - _days("endpoint_success_hours_days"), success_counts.health_window_start(now)
    )
    return EndpointSuccessHour.objects.filter(hour__lt=cutoff)


RULES = [
    Rule(
        "deliveries",
        Delivery,
        prunable_deliveries,
        keeps="pending and retrying deliveries; dead letters inside their window",
    ),
    Rule(
        "notifications",
        Notification,
        prunable_notifications,
        keeps="notifications a delivery names; watchdog.monitor notifications",
        # Their ids are random (uuid4): oldest first along notification_created.
        order=("created_at", "pk"),
        after="deliveries",
    ),
    Rule(
        "idempotency_records",
        IdempotencyRecord,
        prunable_idempotency_records,
        keeps="records whose window has not ended",
    ),
    Rule(
        "readiness_events",
        ReadinessEvent,
        prunable_readiness_events,
        keeps="events of current revisions; events a schema observation names",
    ),
    Rule(
        "endpoint_success_hours",
        EndpointSuccessHour,
        prunable_endpoint_success_hours,
        keeps="the hours an endpoint's health reads (the last 24 to 25)",
        order=("hour", "pk"),  # along endpoint_success_hour_by_hour
    ),
]
