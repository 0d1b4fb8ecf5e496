"""Writes for an endpoint's lifecycle that its owning team is told about: enabling a
disabled endpoint (``endpoint.enabled``). Disabling is told where the delivery engine
decides it (``catalog.delivery``), a recovery where it is made (``catalog.recovery``)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from .. import endpoint_actions, notices
from ..endpoint_actions import DEAD_LETTER_STATES
from ..models import Delivery, Endpoint, Notification


@transaction.atomic
def endpoint_enable(*, endpoint: Endpoint, now: datetime) -> Endpoint:
    """Enable a disabled endpoint (``endpoint_actions.endpoint_enable``: the deliveries that
    waited for it are sent, its dead letters are not) and tell its team's contacts
    (``endpoint.enabled``, with how many deliveries waited and how many dead letters a
    recovery could send).

    Idempotent: an endpoint that is already active is left as it is and nobody is told.
    The endpoint's row is locked first, so of two concurrent calls only the one that
    flips it tells.

    Args:
        now: aware UTC instant of the request; names the notice (one per enabling).

    Returns:
        The endpoint as saved.

    Side effects: after commit, rings the delivery doorbell when it enabled it (the
    waiting deliveries and the notice).
    """
    before = (
        Endpoint.objects.select_for_update(of=("self",)).select_related("team").get(pk=endpoint.pk)
    )
    enabled = endpoint_actions.endpoint_enable(endpoint=endpoint)
    if before.is_active or before.kind != Endpoint.Kind.WEBHOOK:
        return enabled  # nothing flipped, or a contact channel (told about itself: moot)
    counts = Delivery.objects.filter(endpoint=enabled)
    waiting = (Delivery.State.PENDING, Delivery.State.RETRYING)
    notices.notify_owner(
        team=before.team,
        type=Notification.Type.ENDPOINT_ENABLED,
        data={
            "endpoint_id": enabled.pk,
            "url": enabled.url,
            "disabled_at": notices.iso(before.disabled_at),
            "disabled_reason": before.disabled_reason,
            "waiting": counts.filter(state__in=waiting).count(),
            "dead_letters": counts.filter(state__in=DEAD_LETTER_STATES).count(),
        },
        dedup_key=f"endpoint-enabled:{enabled.pk}:{now.isoformat()}",
        now=now,
    )
    return enabled
