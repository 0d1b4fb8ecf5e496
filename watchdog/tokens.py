"""Watchdog API tokens: ``wd_<public id>_<secret>``, stored as the public id plus a
SHA-256 digest of the secret (tokens are random, so no salt is needed)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from .models import ApiToken

PREFIX = "wd_"


def create(name: str) -> tuple[ApiToken, str]:
    """Make a token; returns the row and the token, which is shown once."""
    public_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    row = ApiToken.objects.create(name=name, public_id=public_id, digest=_digest(secret))
    return row, f"{PREFIX}{public_id}_{secret}"


def authenticate(token: str) -> ApiToken | None:
    """The live token row for a presented token, or None (malformed, unknown, revoked)."""
    if not token.startswith(PREFIX):
        return None
    public_id, sep, secret = token[len(PREFIX) :].partition("_")
    if not sep or len(public_id) != 12 or not secret:
        return None
    row = ApiToken.objects.filter(public_id=public_id, revoked_at__isnull=True).first()
    if row is None or not hmac.compare_digest(_digest(secret), row.digest):
        return None
    return row


def revoke(row: ApiToken, *, now: datetime) -> None:
    ApiToken.objects.filter(pk=row.pk).update(revoked_at=now)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
