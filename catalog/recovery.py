"""Recovering an endpoint after an outage: every delivery to it that failed, of
notifications made since a time, sent again with its original ``webhook-id``.

Svix's "recover failed messages since" is the model: a bounded window (14 days by
default, Svix's), failed deliveries only (a delivery that eventually succeeded is never
sent again), oldest first. Failed means a dead letter: ``dead`` (attempts exhausted) or
``rejected`` (a 4xx answer, or a URL the SSRF guard refused). Deliveries still pending or
retrying are not failed: those that waited while the endpoint was disabled are claimed
again as soon as it is enabled (``endpoint_actions.endpoint_enable``), without a recovery.

Unlike Svix's server, which accepts a recovery of a disabled endpoint and then sends
nothing to it, a disabled endpoint is refused (409 ``endpoint_disabled``): enable it,
then recover.

A recovery is bounded: it queues at most ``recover_max_per_request`` deliveries (10,000
by default), oldest first, in statements of ``recover_batch_size`` (1,000), each its own
short transaction, so no request holds thousands of row locks or runs for minutes. What
is left is counted (``remaining``): the same recovery again (same ``since``) queues the
next ones, since those already queued are pending, not failed. The owning team is told
of each recovery that queued any (``endpoint.recovered``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min

from problems import FieldError

from . import doorbell, errors, notices
from .endpoint_actions import DEAD_LETTER_STATES, replay_changes
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


@dataclass(frozen=True)
class Recovered:
    """What one recovery did: ``queued`` failed deliveries sent again (each with its
    original ``webhook-id``), and ``remaining`` failed ones since the same ``since`` left
    for the next recovery (0: it is complete)."""

    queued: int
    remaining: int


def endpoint_recover(*, endpoint: Endpoint, since: datetime, now: datetime) -> Recovered:
    """Send again every failed delivery (``dead`` or ``rejected``) to ``endpoint`` whose
    notification was made at or after ``since``, up to ``recover_max_per_request`` of
    them: same notification, so the same ``webhook-id`` and body, with a fresh attempt
    budget, due at ``now``. Oldest first (by delivery id, the order they were made), in
    batches of ``recover_batch_size``, each batch its own transaction; they are claimed
    in that order (equal ``next_attempt_at``, then id).

    Idempotent while the first recovery is pending: a recovered delivery is pending, so
    a second call (or a concurrent one: each batch's update re-checks each row's state
    under its lock) does not queue it again; a second call after a capped one queues the
    next ones. A delivery that fails again becomes a dead letter again, and a later
    recovery sends it once more.

    Args:
        since: aware datetime; at most ``now``, and no earlier than the recovery window
            (``recover_window``) minus five minutes of clock slack.
        now: aware UTC instant of the request.

    Returns:
        A ``Recovered``: how many were queued (0 when none failed since ``since``, or a
        recovery already queued them) and how many are left past the maximum.

    Raises:
        RecoverSinceOutOfRange: ``since`` is later than ``now`` or older than the window
            (422, ``errors[]`` names ``since``).
        EndpointDisabled: the endpoint is disabled (409): enable it first.

    Side effects: after each batch's commit, rings the delivery doorbell; when any were
    queued, tells the endpoint's team (``endpoint.recovered``, webhook endpoints only).
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
            f"deliveries are recovered from at most {window.days} days back: since "
            f"({iso(since)}) must be at or after {iso(window.earliest)}",
            errors=[
                FieldError("since", f"must be at or after {iso(window.earliest)}", "max_window")
            ],
            extra={"earliest_since": iso(window.earliest)},
        )
    current = Endpoint.objects.select_related("team").get(pk=endpoint.pk)  # its state now
    if not current.is_active:
        raise errors.EndpointDisabled(
            f"endpoint {current.pk} is disabled ({current.disabled_reason or 'no reason'}); "
            f"enable it first (POST /api/v1/endpoints/{current.pk}/enable), then recover",
            extra={"disabled_reason": current.disabled_reason},
        )
    config = settings.TIDEMARK_DELIVERY
    most, batch = config["recover_max_per_request"], config["recover_batch_size"]
    # By when the notification was made, not the delivery: a subscription's catch-up
    # delivers now what was made days ago. A subquery, not a join, so the UPDATE stays
    # on the delivery table alone and re-checks each row's state under its lock.
    made_since = Notification.objects.filter(created_at__gte=since).values("pk")
    failed = Delivery.objects.filter(
        endpoint=current, state__in=DEAD_LETTER_STATES, notification__in=made_since
    )
    queued = 0
    while queued < most:
        size = min(batch, most - queued)
        with transaction.atomic():
            # The oldest ``size`` (ids only, locked), then the update of exactly those:
            # a batch never queues more than its share, whatever a concurrent recovery did.
            oldest = failed.order_by("pk").select_for_update()
            ids = list(oldest.values_list("pk", flat=True)[:size])
            count = Delivery.objects.filter(pk__in=ids, state__in=DEAD_LETTER_STATES).update(
                **replay_changes(now)
            )
            if count:
                doorbell.ring_deliveries()
        queued += count
        if len(ids) < size:
            break  # none older left
    remaining = failed.count()
    if queued and current.kind == Endpoint.Kind.WEBHOOK:
        with transaction.atomic():
            notices.notify_owner(
                team=current.team,
                type=Notification.Type.ENDPOINT_RECOVERED,
                data={
                    "endpoint_id": current.pk,
                    "url": current.url,
                    "since": iso(since),
                    "queued": queued,
                    "remaining": remaining,
                },
                dedup_key=f"endpoint-recovered:{current.pk}:{now.isoformat()}",
                now=now,
            )
    return Recovered(queued, remaining)
