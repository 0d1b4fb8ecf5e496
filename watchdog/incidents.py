"""Opening and resolving incidents, and queueing their pages (one row per channel).

Every write happens inside the caller's transaction on the watchdog's database. An incident
is unique per (monitor, deadline, reason), so two loops judging the same deadline open it
once and queue one trigger per channel.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from . import db
from .models import Incident, Monitor, Page, PageGroup


def open_incident(
    monitor: Monitor,
    *,
    reason: str,
    deadline_at: datetime,
    partition: str = "",
    summary: str,
    now: datetime,
    page: bool = True,
) -> Incident | None:
    """Open the incident for (monitor, deadline, reason) and queue a trigger to each of the
    monitor's channels; None when it is already open (another loop got there first).

    Args:
        deadline_at: the missed deadline (UTC), or the failure's time for ``failed``.
        partition: the partition the deadline expected, if any.
        page: queue the triggers (False records the incident without paging).
    """
    try:
        with transaction.atomic(using=db.alias()):
            incident = Incident.objects.create(
                monitor=monitor,
                reason=reason,
                deadline_at=deadline_at,
                partition=partition,
                summary=summary[:1024],
                opened_at=now,
            )
    except IntegrityError:
        return None
    if not page:
        return incident
    Page.objects.bulk_create(
        Page(incident=incident, channel=channel, action=Page.Action.TRIGGER, next_attempt_at=now)
        for channel in monitor.channels.all()
    )
    return incident


def resolve(incidents: list[Incident], *, now: datetime) -> int:
    """Resolve open incidents and queue their resolves.

    A trigger still waiting to be sent (not claimed by a sender) is cancelled instead, so a
    trigger is never sent after its resolve and nobody is woken for what already recovered.

    Returns:
        How many incidents this call resolved (compare-and-set on ``resolved_at``).
    """
    resolved = 0
    for incident in incidents:
        if not Incident.objects.filter(pk=incident.pk, resolved_at__isnull=True).update(
            resolved_at=now
        ):
            continue
        resolved += 1
        Page.objects.filter(
            Q(lease_until__isnull=True) | Q(lease_until__lt=now),
            incident=incident,
            action=Page.Action.TRIGGER,
            state=Page.State.PENDING,
        ).update(state=Page.State.CANCELLED, last_error="resolved before it was sent")
        to_tell = Page.objects.filter(incident=incident, action=Page.Action.TRIGGER).exclude(
            state__in=(Page.State.CANCELLED, Page.State.GROUPED)
        )
        Page.objects.bulk_create(
            [
                Page(
                    incident=incident,
                    channel_id=page.channel_id,
                    action=Page.Action.RESOLVE,
                    next_attempt_at=now,
                )
                for page in to_tell
            ],
            ignore_conflicts=True,
        )
        _resolve_groups(incident, now=now)
    return resolved


def _resolve_groups(incident: Incident, *, now: datetime) -> None:
    """Resolve each page group this incident was paged in once all its incidents are."""
    group_ids = Page.objects.filter(incident=incident, state=Page.State.GROUPED).values_list(
        "group_id", flat=True
    )
    for group in PageGroup.objects.filter(pk__in=list(group_ids), resolved_at__isnull=True):
        still_open = Page.objects.filter(
            group=group, state=Page.State.GROUPED, incident__resolved_at__isnull=True
        ).exists()
        if still_open or not PageGroup.objects.filter(pk=group.pk, resolved_at__isnull=True).update(
            resolved_at=now
        ):
            continue
        # The compare-and-set above lets exactly one caller queue the group's resolve, or
        # cancel its trigger if that was never sent (held while Tidemark was degraded).
        if Page.objects.filter(
            Q(lease_until__isnull=True) | Q(lease_until__lt=now),
            group=group,
            incident__isnull=True,
            action=Page.Action.TRIGGER,
            state=Page.State.PENDING,
        ).update(state=Page.State.CANCELLED, last_error="resolved before it was sent"):
            continue
        Page.objects.create(
            group=group,
            channel_id=group.channel_id,
            action=Page.Action.RESOLVE,
            next_attempt_at=now,
        )
