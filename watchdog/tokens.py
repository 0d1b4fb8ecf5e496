"""Watchdog API tokens: ``wd_<public id>_<secret>`` (``httpkit.tokens``), kept in the
watchdog's own database as the public id plus a digest."""

from __future__ import annotations

from datetime import datetime

from httpkit import tokens

from .models import ApiToken

PREFIX = "wd_"


def create(name: str) -> tuple[ApiToken, str]:
    """Make a token; returns the row and the token, which is shown once."""
    generated = tokens.generate(PREFIX)
    row = ApiToken.objects.create(name=name, public_id=generated.public_id, digest=generated.digest)
    return row, generated.token


def authenticate(token: str) -> ApiToken | None:
    """The live token row for a presented token, or None (malformed, unknown, revoked)."""
    parsed = tokens.parse(PREFIX, token)
    if parsed is None:
        return None
    row = ApiToken.objects.filter(public_id=parsed.public_id, revoked_at__isnull=True).first()
    if row is None or not tokens.matches(parsed.secret, row.digest):
        return None
    return row


def revoke(row: ApiToken, *, now: datetime) -> None:
    ApiToken.objects.filter(pk=row.pk).update(revoked_at=now)
