"""System checks for the watchdog's deployment."""

from __future__ import annotations

import os

import environ
from django.conf import settings
from django.core import checks

from outbound import targets

from . import channels
from .channels import address_policy, target_refusal


@checks.register(checks.Tags.database, deploy=False)
def separate_database(app_configs=None, **kwargs):
    """The watchdog must keep paging when the catalog's database is down, so
    ``WATCHDOG_DATABASE_URL`` may not name the same database as ``DATABASE_URL``
    (DESIGN.md principle 5)."""
    catalog_url = os.environ.get("DATABASE_URL")
    watchdog_url = os.environ.get("WATCHDOG_DATABASE_URL")
    if not catalog_url or not watchdog_url:
        return []

    def identity(url: str):
        config = environ.Env.db_url_config(url)
        return (
            config.get("ENGINE"),
            config.get("HOST") or "",
            str(config.get("PORT") or ""),
            config.get("NAME"),
        )

    if identity(catalog_url) == identity(watchdog_url):
        return [
            checks.Error(
                "WATCHDOG_DATABASE_URL names the same database as DATABASE_URL.",
                hint="Give the watchdog its own database (ideally its own server), so it "
                "pages when the catalog's database is down.",
                id="watchdog.E001",
            )
        ]
    return []


_URL_HINT = (
    "Give a public https URL, or allow-list its network in TIDEMARK_OUTBOUND_ALLOW_NETWORKS."
)
_HINTS = {
    targets.PAGERDUTY_ROUTING_KEY: "Give the integration key of the PagerDuty service's "
    "Events API v2 integration.",
    channels.EMAIL_ADDRESS: "Give one email address.",
}


@checks.register(deploy=False)
def paging_targets(app_configs=None, **kwargs):
    """The operators' channels (``WATCHDOG_OPERATORS_CHANNELS``) and the PagerDuty Events
    API URL (``WATCHDOG_PAGERDUTY_URL``) follow the rules of a channel created over the
    API (``channels.target_refusal``): a target the outbound guard would refuse at every
    send is a deployment error, found before anyone needs to be paged."""
    errors = []
    for index, spec in enumerate(settings.WATCHDOG_OPERATORS_CHANNELS):
        target = str(spec.get("target", ""))
        refusal = target_refusal(kind=str(spec.get("kind", "")), target=target)
        if refusal is not None:
            errors.append(
                checks.Error(
                    f"WATCHDOG_OPERATORS_CHANNELS[{index}] target {target!r}: {refusal.detail}.",
                    hint=_HINTS.get(refusal.rule, _URL_HINT),
                    id="watchdog.E002",
                )
            )
    url = settings.WATCHDOG_PAGING["pagerduty_url"]
    refusal = targets.url_refusal(url, policy=address_policy())
    if refusal is not None:
        errors.append(
            checks.Error(
                f"WATCHDOG_PAGERDUTY_URL {url!r}: {refusal.detail}.",
                hint="Leave the default (PagerDuty's own Events API), or allow-list the "
                "network of your relay in TIDEMARK_OUTBOUND_ALLOW_NETWORKS.",
                id="watchdog.E003",
            )
        )
    return errors


# A ping body is read into memory whole (up to the limit) and kept in a text column.
MAX_PING_BODY_LIMIT = 1024 * 1024


@checks.register(deploy=False)
def ping_body_limit(app_configs=None, **kwargs):
    """``WATCHDOG_PING_BODY_LIMIT`` keeps between 1 byte and 1 MiB of a ping's body: pings
    are bounded like every inbound body, and a limit of 0 would tell clients to send none."""
    limit = settings.WATCHDOG_PING_BODY_LIMIT
    if 1 <= limit <= MAX_PING_BODY_LIMIT:
        return []
    return [
        checks.Error(
            f"WATCHDOG_PING_BODY_LIMIT is {limit}; it must be 1 to {MAX_PING_BODY_LIMIT} bytes.",
            hint="Leave the default (10000 bytes, as the common ping services keep).",
            id="watchdog.E004",
        )
    ]
