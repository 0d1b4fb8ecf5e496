"""Recovering an endpoint after an outage: every delivery to it that failed, of
notifications made since a time, sent again with its original ``webhook-id``.

Svix's "recover failed messages since" is the model: a bounded window (14 days by
default, Svix's), failed deliveries only (a delivery that eventually succeeded is never
sent again), oldest first. Failed means a dead letter: ``dead`` (attempts exhausted) or
``rejected`` (a 4xx answer, or a URL the SSRF guard refused). Deliveries still pending or
retrying are not failed: those that waited while the endpoint was disabled are claimed
again as soon as it is enabled (``delivery.endpoint_enable``), without a recovery.

Unlike Svix's server, which accepts a recovery of a disabled endpoint and then sends
nothing to it, a disabled endpoint is refused (409 ``endpoint_disabled``): enable it,
then recover.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min

from problems import FieldError

from . import doorbell, errors
from .delivery import DEAD_LETTER_STATES, replay_changes
from .models import Delivery, Endpoint, Notification
from .notices import iso

# A ``since`` computed by a client as "now minus the window" arrives a little late; this
# much older than the window is still accepted (as Svix allows five minutes).
CLOCK_SLACK = timedelta(minutes=5)
# Without an outage on record, the team page proposes recovering this far back.
DEFAULT_LOOKBACK = timedelta(days=1)


@dataclass(frozen=True)
class RecoverWindow:
    """The times a recovery's ``since`` may take at one instant: ``earliest`` to
    ``latest`` (now), both aware UTC; ``days`` is the window's length."""

    earliest: datetime
    latest: datetime
    days: int


def recover_window(*, now: datetime) -> RecoverWindow:
    """The recovery window at ``now``: ``TIDEMARK_DELIVERY["recover_window_days"]`` back
    (14 by default), never longer than dead letters are kept
    (``TIDEMARK_RETENTION["dead_letters_days"]``), since older ones may be pruned."""
    days = min(
        settings.TIDEMARK_DELIVERY["recover_window_days"],
        settings.TIDEMARK_RETENTION["dead_letters_days"],
    )
    return RecoverWindow(earliest=now - timedelta(days=days), latest=now, days=days)


def recover_default_since(*, endpoint: Endpoint, now: datetime) -> datetime:
    """ "Since it started failing": the ``since`` the team page proposes for ``endpoint``.

    The start of its current failing streak (``failing_since``), or else of the outage
    that last disabled it (``outage_started_at``, kept after it is enabled again); moved
    earlier to the oldest dead letter that failed (finished) during that outage, since a
    notification made just before the first failure failed with it. Without an outage on
    record, one day back. Never earlier than the window allows.

    Returns:
        An aware UTC datetime inside ``recover_window(now=now)``.
    """
    window = recover_window(now=now)
    outage = endpoint.failing_since or endpoint.outage_started_at
    if outage is None:
        since = now - DEFAULT_LOOKBACK
    else:
        oldest = Delivery.objects.filter(
            endpoint=endpoint, state__in=DEAD_LETTER_STATES, finished_at__gte=outage
        ).aggregate(oldest=Min("notification__created_at"))["oldest"]
        since = min(outage, oldest) if oldest else outage
    return min(max(since, window.earliest), now)


@transaction.atomic
def endpoint_recover(*, endpoint: Endpoint, since: datetime, now: datetime) -> int:
    """Send again every failed delivery (``dead`` or ``rejected``) to ``endpoint`` whose
    notification was made at or after ``since``: same notification, so the same
    ``webhook-id`` and body, with a fresh attempt budget, due at ``now``. They are claimed
    in their original order (by creation: equal ``next_attempt_at``, then id).

    Idempotent while the first recovery is pending: a recovered delivery is pending, so
    a second call (or a concurrent one: the update re-checks each row's state under its
    lock) does not queue it again. A delivery that fails again becomes a dead letter
    again, and a later recovery sends it once more.

    Args:
        since: aware datetime; at most ``now``, and no earlier than the recovery window
            (``recover_window``) minus five minutes of clock slack.
        now: aware UTC instant of the request.

    Returns:
        How many deliveries were queued (0 when none failed since ``since``).

    Raises:
        RecoverSinceOutOfRange: ``since`` is later than ``now`` or older than the window
            (422, ``errors[]`` names ``since``).
        EndpointDisabled: the endpoint is disabled (409): enable it first.

    Side effects: rings the delivery doorbell after commit when it queued any.
    """
    window = recover_window(now=now)
    if since > now:
        raise errors.RecoverSinceOutOfRange(
            f"since ({iso(since)}) is later than now ({iso(now)}): nothing has failed yet",
            errors=[FieldError("since", f"must not be later than {iso(now)}", "not_in_future")],
            extra={"earliest_since": iso(window.earliest)},
        )
    if since < window.earliest - CLOCK_SLACK:
        raise errors.RecoverSinceOutOfRange(
            f"deliveries are recovered from at most {window.days} days back: since must be "
            f"at or after {iso(window.earliest)}",
            errors=[
                FieldError("since", f"must be at or after {iso(window.earliest)}", "max_window")
            ],
            extra={"earliest_since": iso(window.earliest)},
        )
    current = Endpoint.objects.get(pk=endpoint.pk)  # its state now, not when it was read
    if not current.is_active:
        raise errors.EndpointDisabled(
            f"endpoint {current.pk} is disabled ({current.disabled_reason or 'no reason'}); "
            f"enable it first (POST /api/v1/endpoints/{current.pk}/enable), then recover",
            extra={"disabled_reason": current.disabled_reason},
        )
    # By when the notification was made, not the delivery: a subscription's catch-up
    # delivers now what was made days ago. A subquery, not a join, so the UPDATE stays
    # on the delivery table alone and re-checks each row's state under its lock.
    made_since = Notification.objects.filter(created_at__gte=since).values("pk")
    count = Delivery.objects.filter(
        endpoint=current, state__in=DEAD_LETTER_STATES, notification__in=made_since
    ).update(**replay_changes(now))
    if count:
        doorbell.ring_deliveries()
    return count
