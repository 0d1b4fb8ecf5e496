"""Writes for a subscription's endpoints: a subscription delivers every notification its
filters let through to each of its webhook endpoints (up to ``MAX_ENDPOINTS``), as a
delivery of its own: own attempts and retries, signed with that endpoint's secret, with
the notification's ``webhook-id`` (the same for every endpoint, as Svix and Hookdeck send
one message id to every endpoint it fans out to).

The first endpoint is ``Subscription.endpoint`` (the one a declaration names); the others
are ``SubscriptionEndpoint`` rows. Removing the first promotes the oldest other one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from problems import FieldError, ValidationProblem

from .. import endpoint_actions, errors, notices
from ..actors import Actor
from ..models import Dataset, Endpoint, Subscription, SubscriptionEndpoint
from .subscriptions import catch_up, subscription_locked, webhook_endpoint_for

# Webhook endpoints one subscription may deliver to (Svix's default is no limit; a bound
# keeps one publish's fan-out, written in its transaction, predictable).
MAX_ENDPOINTS = 10


@dataclass(frozen=True)
class EndpointAdded:
    """``subscription_endpoint_add``'s answer: ``added`` False when the subscription
    already delivered there (nothing changed); ``endpoint_secret`` only when the endpoint
    was new to the team (the one time it is shown); ``caught_up``: deliveries written
    for a ``since``."""

    subscription: Subscription
    endpoint: Endpoint
    added: bool
    endpoint_secret: str | None = None
    caught_up: int = 0


@transaction.atomic
def subscription_endpoint_add(
    *,
    actor: Actor,
    subscription_id: int,
    url: str,
    since: datetime | None = None,
    now: datetime | None = None,
) -> EndpointAdded:
    """Have one of the actor's team's subscriptions deliver to the webhook at ``url`` too.

    Idempotent: a URL it already delivers to changes nothing (``added`` False). The
    team's endpoint at ``url`` is reused (its secret, health and rate limit), or created
    with a new signing secret. From the commit on, every notification the subscription's
    filters let through gets a delivery to it; with ``since``, the dataset's
    notifications since then are delivered to it too (as ``subscription_create``'s
    catch-up, to this endpoint alone).

    Args:
        url: an https URL without credentials (the serializer checks the form).
        since: aware instant, at most ``subscriptions.MAX_SINCE_DAYS`` back; None: only
            what happens from now on.
        now: aware UTC instant (default: the current time).

    Returns:
        An ``EndpointAdded``.

    Raises:
        SubscriptionNotFound: no such subscription of this team (404).
        ValidationProblem: ``url``'s host is an address the outbound guard blocks (rule
            ``public_address``); the subscription has ``MAX_ENDPOINTS`` already (rule
            ``max_endpoints``); ``since`` too far back (rule ``max_age``) (400).
        DatasetRetired: the subscription's dataset is retired (409).

    Side effects: rings the delivery doorbell after commit when ``since`` queued any.
    """
    now = now or timezone.now()
    refusal = endpoint_actions.webhook_address_refusal(url)
    if refusal:
        raise ValidationProblem(refusal, errors=[FieldError("url", refusal, "public_address")])
    subscription = subscription_locked(actor, subscription_id)
    if subscription.dataset.lifecycle == Dataset.Lifecycle.RETIRED:
        raise errors.DatasetRetired(
            f"{subscription.dataset} is retired; its subscriptions take no new endpoints",
            errors=[FieldError("url", "the dataset is retired", "lifecycle_retired")],
        )
    current = notices.subscription_endpoint_ids(subscription)
    already = Endpoint.objects.filter(pk__in=current, url=url, kind=Endpoint.Kind.WEBHOOK).first()
    if already is not None:
        return EndpointAdded(subscription, already, added=False)
    if len(current) >= MAX_ENDPOINTS:
        raise ValidationProblem(
            f"subscription {subscription.pk} delivers to {len(current)} endpoints already, "
            f"the most one subscription may; remove one first",
            errors=[FieldError("url", f"at most {MAX_ENDPOINTS} endpoints", "max_endpoints")],
        )
    endpoint, secret = webhook_endpoint_for(team=actor.team, url=url, now=now)
    if subscription.endpoint_id is None:
        subscription.endpoint = endpoint
        subscription.save(update_fields=["endpoint"])
    else:
        SubscriptionEndpoint.objects.create(subscription=subscription, endpoint=endpoint)
    caught_up = 0
    if since is not None:
        caught_up = catch_up(subscription, {endpoint.pk}, since=since, now=now)
    return EndpointAdded(subscription, endpoint, True, secret, caught_up)


@transaction.atomic
def subscription_endpoint_remove(
    *, actor: Actor, subscription_id: int, endpoint_id: int
) -> Subscription:
    """Stop one of the actor's team's subscriptions delivering to one of its endpoints.

    Notifications made after the commit get no delivery to it through this subscription
    (another subscription of the team may still send it the same dataset's news);
    deliveries already queued to it are still sent. The endpoint itself stays in
    ``/api/v1/endpoints`` with its log. Removing the first endpoint makes the oldest
    other one first; removing the last leaves the subscription declared, told nothing.

    Returns:
        The subscription as saved.

    Raises:
        SubscriptionNotFound: no such subscription of this team (404).
        EndpointNotFound: the subscription does not deliver to ``endpoint_id`` (404).
    """
    subscription = subscription_locked(actor, subscription_id)
    if subscription.endpoint_id is not None and subscription.endpoint_id == endpoint_id:
        successor = (
            SubscriptionEndpoint.objects.filter(subscription=subscription)
            .order_by("created_at", "pk")
            .first()
        )
        subscription.endpoint_id = successor.endpoint_id if successor else None
        if successor is not None:
            successor.delete()
        subscription.save(update_fields=["endpoint"])
        return subscription
    deleted = 0
    if 0 < endpoint_id <= 2**63 - 1:
        deleted, _ = SubscriptionEndpoint.objects.filter(
            subscription=subscription, endpoint_id=endpoint_id
        ).delete()
    if not deleted:
        raise errors.EndpointNotFound(
            f"subscription {subscription.pk} does not deliver to an endpoint {endpoint_id}"
        )
    return subscription
