"""Bearer token format shared by the catalog's API keys (``tm_``) and the watchdog's API
tokens (``wd_``): ``<prefix><public id>_<secret>``, stored as the public id plus a SHA-256
digest of the secret.

The public id (12 hex characters) is indexed for lookup; the secret (32 bytes, urlsafe) is
compared by digest in constant time. The prefix lets secret scanners spot a leak. Tokens
are random, so the digest needs no salt.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class GeneratedToken:
    """A new token: ``token`` is shown once; only ``public_id`` and ``digest`` are stored."""

    token: str
    public_id: str
    digest: str


@dataclass(frozen=True)
class ParsedToken:
    public_id: str
    secret: str


def generate(prefix: str) -> GeneratedToken:
    """Make a new random token with ``prefix`` (e.g. ``"tm_"``)."""
    public_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return GeneratedToken(
        token=f"{prefix}{public_id}_{secret}", public_id=public_id, digest=digest(secret)
    )


def digest(secret: str) -> str:
    """SHA-256 hex digest of a token's secret part."""
    return hashlib.sha256(secret.encode()).hexdigest()


def parse(prefix: str, token: str) -> ParsedToken | None:
    """Split a presented token; None when it is not shaped like one with ``prefix``."""
    if not token.startswith(prefix):
        return None
    public_id, sep, secret = token[len(prefix) :].partition("_")
    if not sep or len(public_id) != 12 or not secret:
        return None
    return ParsedToken(public_id=public_id, secret=secret)


def matches(secret: str, stored_digest: str) -> bool:
    """Constant-time check of a presented secret against a stored digest."""
    return hmac.compare_digest(digest(secret), stored_digest)
