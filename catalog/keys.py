"""API key format: ``tm_<public id>_<secret>``, stored as the public id plus a SHA-256 digest.

The public id (12 hex characters) is indexed for lookup; the secret (32 bytes, urlsafe) is
compared by digest in constant time. The ``tm_`` prefix lets secret scanners spot a leak.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

PREFIX = "tm_"


@dataclass(frozen=True)
class GeneratedKey:
    """A new key: ``token`` is shown once; only ``public_id`` and ``digest`` are stored."""

    token: str
    public_id: str
    digest: str


@dataclass(frozen=True)
class ParsedKey:
    public_id: str
    secret: str


def generate_key() -> GeneratedKey:
    """Make a new random key."""
    public_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return GeneratedKey(
        token=f"{PREFIX}{public_id}_{secret}", public_id=public_id, digest=digest(secret)
    )


def digest(secret: str) -> str:
    """SHA-256 hex digest of a key's secret part (keys are random, so no salt is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(token: str) -> ParsedKey | None:
    """Split a presented token; None when it is not shaped like a Tidemark key."""
    if not token.startswith(PREFIX):
        return None
    public_id, sep, secret = token[len(PREFIX) :].partition("_")
    if not sep or len(public_id) != 12 or not secret:
        return None
    return ParsedKey(public_id=public_id, secret=secret)


def matches(secret: str, stored_digest: str) -> bool:
    """Constant-time check of a presented secret against a stored digest."""
    return hmac.compare_digest(digest(secret), stored_digest)
