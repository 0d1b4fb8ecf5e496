"""Where a channel may send: its target checked when the channel is created.

URL targets (Slack incoming webhooks, signed webhooks) follow the rules the catalog applies
to consumer webhooks (``outbound.targets`` with the outbound guard's policy from
``TIDEMARK_OUTBOUND_ALLOW_NETWORKS`` and ``TIDEMARK_OUTBOUND_ALLOW_HTTP``): https, no
credentials, and no host that is a loopback, link-local or private address unless
allow-listed. Email targets are one valid address, so user text never reaches a header
through ``To``. PagerDuty targets are Events API v2 routing keys (32 letters or digits).
At send time the connect-time guard still checks every resolved address, and a refusal
there fails the page at once (``paging``).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

import outbound
from outbound import targets
from problems import FieldError, ValidationProblem

from .models import Channel

EMAIL_ADDRESS = "email_address"  # rule: the target of an email channel is one address
URL_KINDS = (Channel.Kind.SLACK, Channel.Kind.WEBHOOK)


def address_policy() -> outbound.AddressPolicy:
    """The outbound guard's policy from settings (the allow-list and plain http)."""
    return outbound.AddressPolicy.from_strings(
        settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS,
        allow_http=settings.TIDEMARK_OUTBOUND_ALLOW_HTTP,
    )


def target_refusal(*, kind: str, target: str) -> targets.Refusal | None:
    """Why ``target`` may not be the target of a ``kind`` channel, or None.

    Slack and webhook targets: ``outbound.targets.url_refusal`` (rules ``https_url``,
    ``no_credentials``, ``public_address``). Email: one valid address (rule
    ``email_address``). PagerDuty: a routing key, not a URL (the Events API URL is
    ``WATCHDOG_PAGING["pagerduty_url"]``, an operator's setting), of 32 letters or digits
    (``outbound.targets.routing_key_refusal``, rule ``pagerduty_routing_key``).
    """
    if kind in URL_KINDS:
        return targets.url_refusal(target, policy=address_policy())
    if kind == Channel.Kind.PAGERDUTY:
        return targets.routing_key_refusal(target)
    if kind == Channel.Kind.EMAIL:
        try:
            validate_email(target)
        except ValidationError:
            return targets.Refusal(EMAIL_ADDRESS, "must be one valid email address")
    return None


def refusal_detail(refusal: targets.Refusal, *, target: str) -> str:
    """A refusal as problem detail naming the value."""
    return f"{target!r}: {refusal.detail}"


def check_target(*, kind: str, target: str, field: str = "target") -> None:
    """Refuse a channel target (``target_refusal``) as a 400 problem.

    Raises:
        ValidationProblem: one ``FieldError`` naming ``field``, the value and the rule.
    """
    refusal = target_refusal(kind=kind, target=target)
    if refusal is not None:
        detail = refusal_detail(refusal, target=target)
        raise ValidationProblem(
            f"{field}: {detail}", errors=[FieldError(field, detail, refusal.rule)]
        )
