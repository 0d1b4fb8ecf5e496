"""Ping keys and slug URLs: ``/ping/<ping key>/<slug>`` pings the monitor with that slug
among the key owner's monitors, and with ``?create=1`` creates it on its first ping (the
common ping services' auto-provisioning).

A key belongs to an owner label (a team slug, as the catalog labels monitors). It is in
URLs, so it is 22 lowercase letters and digits (about 113 bits, as those services make
theirs); it is shown once and kept as its SHA-256 digest (a key that random needs no salt
or slow hash, and a digest can be looked up by index).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError
from django.db.models import QuerySet

from problems import FieldError, NotFound, ValidationProblem

from . import monitors
from .models import Channel, Monitor, PingKey

# What ``?create=1`` makes: a period monitor with the common services' defaults (a ping a
# day, an hour of grace), named by its slug, paging its owner's channels.
CREATED_PERIOD_SECONDS = 86400
CREATED_GRACE_SECONDS = 3600
# An owner label a key may have: a team slug.
OWNER = re.compile(r"[A-Za-z0-9_-]{1,64}")


class CreateRefused(Exception):
    """``?create=1`` may not create the monitor: its owner has reached
    ``WATCHDOG_AUTO_CREATE_LIMIT`` monitors."""


def generate() -> str:
    """A new key: 22 characters of ``a-z0-9`` (``-`` and ``_`` left out, so the key reads as
    one word and no case or URL quoting can change it)."""
    while True:
        key = secrets.token_urlsafe(16).lower()
        if "-" not in key and "_" not in key:
            return key


def digest(key: str) -> str:
    """The SHA-256 hex digest a key is kept and looked up as."""
    return hashlib.sha256(key.encode()).hexdigest()


def ping_key_create(*, owner: str, name: str = "", now: datetime) -> tuple[PingKey, str]:
    """Make a ping key for ``owner``'s monitors.

    Args:
        owner: an owner label (a team slug): 1 to 64 of letters, digits, ``-``, ``_``.
        name: what the key is for, up to 100 characters.
        now: aware UTC, its ``created_at``.

    Returns:
        ``(row, key)``; the key is shown once, only its digest is kept.

    Raises:
        ValidationProblem: ``owner`` or ``name`` breaks its rule (400).
    """
    problems = []
    if not OWNER.fullmatch(owner):
        problems.append(
            FieldError("owner", "an owner label: 1 to 64 of a-z, A-Z, 0-9, '-' and '_'", "slug")
        )
    if len(name) > 100:
        problems.append(FieldError("name", "at most 100 characters", "max_length"))
    if problems:
        raise ValidationProblem.of("The ping key is not valid.", problems)
    key = generate()
    row = PingKey.objects.create(
        owner=owner, name=name, digest=digest(key), prefix=key[:4], created_at=now
    )
    return row, key


def ping_key_list(*, owner: str | None = None) -> QuerySet[PingKey]:
    """Ping keys, newest first, revoked ones too (``revoked_at`` set); only ``owner``'s
    when given."""
    keys = PingKey.objects.order_by("-created_at", "-id")
    return keys.filter(owner=owner) if owner is not None else keys


def ping_key_revoke(key_id: int, *, now: datetime) -> PingKey:
    """Revoke a ping key: its slug URLs answer 404 from now on (its monitors stay, and
    their UUID URLs still work). Revoking it again changes nothing.

    Raises:
        NotFound: no ping key ``key_id`` (404).
    """
    row = PingKey.objects.filter(pk=key_id).first()
    if row is None:
        raise NotFound(f"no ping key {key_id}")
    if row.revoked_at is None:
        PingKey.objects.filter(pk=row.pk, revoked_at__isnull=True).update(revoked_at=now)
        row.refresh_from_db()
    return row


@dataclass(frozen=True)
class SlugTarget:
    """Where a slug URL points: the monitor's ``ping_key`` (None when no monitor of the
    key's owner has the slug) and the key's ``owner`` (None when the key is unknown or
    revoked; then so is the monitor)."""

    ping_key: uuid.UUID | None
    owner: str | None


def slug_target(*, key: str, slug: str) -> SlugTarget:
    """Resolve a slug URL: one indexed query when the monitor exists, two when not."""
    keys = PingKey.objects.filter(digest=digest(key), revoked_at__isnull=True)
    found = (
        Monitor.objects.filter(slug=slug, owner__in=keys.values("owner"))
        .values_list("ping_key", "owner")
        .first()
    )
    if found is not None:
        return SlugTarget(ping_key=found[0], owner=found[1])
    owner = keys.values_list("owner", flat=True).first()
    return SlugTarget(ping_key=None, owner=owner)


def monitor_create_for_slug(*, owner: str, slug: str, now: datetime) -> tuple[uuid.UUID, bool]:
    """The monitor ``?create=1`` asks for: ``owner``'s monitor with ``slug``, created as a
    period monitor (a ping a day, an hour of grace, named by its slug, paging the
    channels labelled with its owner) unless another request just created it.

    Returns:
        ``(ping_key, created)``.

    Raises:
        CreateRefused: the owner has ``WATCHDOG_AUTO_CREATE_LIMIT`` monitors already.
        ValidationProblem: ``slug`` is not a slug (400).
    """
    limit = settings.WATCHDOG_AUTO_CREATE_LIMIT
    if Monitor.objects.filter(owner=owner).count() >= limit:
        raise CreateRefused(f"owner {owner!r} has {limit} monitors, the most create=1 makes")
    try:
        monitor = monitors.monitor_create(
            channels=list(Channel.objects.filter(owner=owner)),
            now=now,
            name=slug,
            slug=slug,
            owner=owner,
            kind=Monitor.Kind.PERIOD,
            period_seconds=CREATED_PERIOD_SECONDS,
            grace_seconds=CREATED_GRACE_SECONDS,
        )
    except (IntegrityError, ValidationProblem):
        # Two first pings at once: the other request created it (the unique constraint,
        # or ``slug_taken`` if it committed before our check).
        existing = (
            Monitor.objects.filter(owner=owner, slug=slug).values_list("ping_key", flat=True)
        ).first()
        if existing is None:
            raise
        return existing, False
    return monitor.ping_key, True
