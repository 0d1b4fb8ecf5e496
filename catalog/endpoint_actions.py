"""Endpoints: the rules their URLs follow, their signing secrets (rotated with an overlap),
and what owners and operators do to them: replay dead letters, enable a disabled one, set
its rate limit, rotate its secret. ``catalog.delivery`` claims, sends and records."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

import outbound
from outbound import targets

from . import doorbell, errors, secrets
from .models import Delivery, Endpoint

logger = logging.getLogger(__name__)


# --- endpoint secrets -------------------------------------------------------------------


def webhook_url_refusal(url: str) -> targets.Refusal | None:
    """Why ``url`` may not be a subscription's webhook by its form, or None: https (or http
    where ``TIDEMARK_OUTBOUND_ALLOW_HTTP``) with a host, rule ``https_url``, and no
    credentials in it, rule ``no_credentials`` (``outbound.targets.scheme_refusal``). The
    API and the web pages both check it before ``subscription_create``."""
    return targets.scheme_refusal(url, allow_http=settings.TIDEMARK_OUTBOUND_ALLOW_HTTP)


def webhook_address_refusal(url: str) -> str | None:
    """Why ``url`` may not be a webhook or Slack webhook because of its host, or None.

    ``outbound.targets.address_refusal`` with the outbound guard's policy: a host written
    as an IP address (``169.254.169.254``, ``[::1]``, the legacy IPv4 forms such as
    ``127.1``) or ``localhost`` that the guard would block (private, loopback,
    link-local, reserved... unless in ``TIDEMARK_OUTBOUND_ALLOW_NETWORKS``, as loopback is
    in embedded mode for the demo receiver) is refused with this reason. A host name is
    not resolved here: delivery checks every resolved address at connect time
    (``outbound.Sender``), which is the guard; this check only refuses early what can
    never be delivered. The watchdog judges its channels' URLs by the same rules.
    """
    refusal = targets.address_refusal(url, policy=address_policy())
    return refusal.detail if refusal else None


def slack_webhook_refusal(url: str) -> str | None:
    """Why ``url`` may not be a team's Slack webhook, or None: the rules of consumer
    webhooks (https, no credentials, no blocked address; ``outbound.targets.url_refusal``).
    The admin checks it when a team's ``contact_slack_webhook`` is set."""
    refusal = targets.url_refusal(url, policy=address_policy())
    return refusal.detail if refusal else None


def address_policy() -> outbound.AddressPolicy:
    """The outbound guard's policy from settings (the allow-list and plain http)."""
    return outbound.AddressPolicy.from_strings(
        settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS,
        allow_http=settings.TIDEMARK_OUTBOUND_ALLOW_HTTP,
    )


def endpoint_set_new_secret(*, endpoint: Endpoint, now: datetime) -> str:
    """Give ``endpoint`` a new signing secret and return it (shown to its owner once).

    Every secret replaced less than ``secret_overlap_seconds`` ago keeps signing until its
    overlap ends, so a consumer can switch without rejecting a delivery, even after two
    rotations in a row. Saves the endpoint.
    """
    secret = outbound.generate_secret()
    still_signing = [
        p for p in endpoint.previous_secrets if datetime.fromisoformat(p["expires_at"]) > now
    ]
    if endpoint.secret_encrypted:
        expires_at = now + timedelta(seconds=settings.TIDEMARK_DELIVERY["secret_overlap_seconds"])
        still_signing.append(
            {"encrypted": endpoint.secret_encrypted, "expires_at": expires_at.isoformat()}
        )
    endpoint.previous_secrets = still_signing[-MAX_PREVIOUS_SECRETS:]
    endpoint.secret_encrypted = secrets.encrypt(secret)
    endpoint.save()
    return secret


MAX_PREVIOUS_SECRETS = 4


def endpoint_secrets_in_use(endpoint: Endpoint, now: datetime) -> list[str]:
    """The secrets a delivery is signed with at ``now``: the current one first, then every
    replaced one whose overlap has not ended, newest first."""
    return secrets_in_use(endpoint.secret_encrypted, endpoint.previous_secrets, now)


def secrets_in_use(secret_encrypted: str, previous_secrets: list[dict], now: datetime) -> list[str]:
    """``endpoint_secrets_in_use`` from an endpoint's stored columns (a claim reads them
    as plain row values): decrypted, the current one first."""
    in_use = [secrets.decrypt(secret_encrypted)]
    for previous in reversed(previous_secrets):
        if datetime.fromisoformat(previous["expires_at"]) > now:
            in_use.append(secrets.decrypt(previous["encrypted"]))
    return in_use


# --- operator and consumer actions ------------------------------------------------------

DEAD_LETTER_STATES = (Delivery.State.REJECTED, Delivery.State.DEAD)

_KIND_NAMES = {
    Endpoint.Kind.WEBHOOK: "a webhook endpoint",
    Endpoint.Kind.EMAIL: "an email endpoint (the team's email contact)",
    Endpoint.Kind.SLACK: "a slack endpoint (the team's Slack contact)",
    Endpoint.Kind.WATCHDOG: "a watchdog endpoint (Tidemark's feed to the watchdog)",
}


def replay_changes(now: datetime) -> dict:
    """The update that makes a dead letter due again at ``now``: same notification (so
    the same ``webhook-id``), a fresh attempt budget. For ``QuerySet.update``."""
    return {
        "state": Delivery.State.PENDING,
        "next_attempt_at": now,
        "attempts_before_replay": F("attempts"),
        "claimed_until": None,
        "claim_token": None,
        "finished_at": None,
    }


@transaction.atomic
def delivery_replay(*, delivery: Delivery, now: datetime) -> Delivery:
    """Send a dead letter (rejected or dead) again, with the same ``webhook-id`` and a
    fresh attempt budget.

    Raises:
        NotADeadLetter: the delivery is not rejected or dead (409).
    """
    updated = Delivery.objects.filter(pk=delivery.pk, state__in=DEAD_LETTER_STATES).update(
        **replay_changes(now)
    )
    if updated != 1:
        raise errors.NotADeadLetter(
            f"delivery {delivery.pk} is {delivery.state}; only rejected or dead deliveries "
            "can be replayed"
        )
    doorbell.ring_deliveries()
    delivery.refresh_from_db()
    return delivery


@transaction.atomic
def endpoint_replay_dead_letters(*, endpoint: Endpoint, now: datetime) -> int:
    """Replay every dead letter of ``endpoint``; returns how many."""
    count = Delivery.objects.filter(endpoint=endpoint, state__in=DEAD_LETTER_STATES).update(
        **replay_changes(now)
    )
    if count:
        doorbell.ring_deliveries()
    return count


@transaction.atomic
def endpoint_enable(*, endpoint: Endpoint) -> Endpoint:
    """Re-enable a disabled endpoint (after a 410 or days of failures); what waited for
    it is delivered again.

    Idempotent: an endpoint that is already active is left exactly as it is (a failing
    streak it is in stays recorded). A disabled one starts afresh: no disabled reason,
    no failing streak (``failing_since`` None, ``consecutive_failures`` 0), so the next
    day of failures is judged on its own; ``outage_started_at`` stays, as the default
    start of a recovery (``catalog.recovery.endpoint_recover``). The flip is
    compare-and-set. Deliveries that waited while it was disabled (pending, retrying) are
    claimed again; dead letters are not: recover or replay them.

    Side effects: rings the delivery doorbell after commit when it re-enabled.
    """
    flipped = Endpoint.objects.filter(pk=endpoint.pk, is_active=False).update(
        is_active=True,
        disabled_reason="",
        disabled_at=None,
        failing_since=None,
        consecutive_failures=0,
    )
    if flipped:
        doorbell.ring_deliveries()
    endpoint.refresh_from_db()
    return endpoint


@transaction.atomic
def endpoint_set_rate_limit(*, endpoint: Endpoint, rate_limit_per_second: int | None) -> Endpoint:
    """Set how many deliveries per second ``endpoint`` is sent at most (None: the
    ``TIDEMARK_DELIVERY_ENDPOINT_RATE`` setting). Takes effect at the next claim.

    Raises:
        ValidationError: a rate below 1 (the serializer refuses it first).
    """
    endpoint.rate_limit_per_second = rate_limit_per_second
    endpoint.full_clean(validate_unique=False, validate_constraints=True)
    Endpoint.objects.filter(pk=endpoint.pk).update(rate_limit_per_second=rate_limit_per_second)
    return endpoint


@transaction.atomic
def endpoint_rotate_secret(*, endpoint: Endpoint, now: datetime) -> str:
    """A new signing secret for ``endpoint``, shown once; the old one keeps signing for
    ``secret_overlap_seconds``.

    Raises:
        EndpointHasNoSecret: ``endpoint`` is not a webhook (409): a team's email or Slack
            contact and the watchdog are not sent signed requests.
    """
    if endpoint.kind != Endpoint.Kind.WEBHOOK:
        raise errors.EndpointHasNoSecret(
            f"endpoint {endpoint.pk} is {_KIND_NAMES[endpoint.kind]}; only webhook endpoints "
            "sign what they send, so only they have a secret to rotate",
            extra={"endpoint_kind": endpoint.kind},
        )
    endpoint = Endpoint.objects.select_for_update().get(pk=endpoint.pk)
    return endpoint_set_new_secret(endpoint=endpoint, now=now)
