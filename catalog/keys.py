"""API key format: ``tm_<public id>_<secret>`` (``httpkit.tokens``), stored as the public id
plus a SHA-256 digest."""

from __future__ import annotations

from httpkit import tokens
from httpkit.tokens import GeneratedToken as GeneratedKey
from httpkit.tokens import ParsedToken as ParsedKey
from httpkit.tokens import digest, matches

PREFIX = "tm_"

__all__ = ["PREFIX", "GeneratedKey", "ParsedKey", "digest", "generate_key", "matches", "parse_key"]


def generate_key() -> GeneratedKey:
    """Make a new random API key."""
    return tokens.generate(PREFIX)


def parse_key(token: str) -> ParsedKey | None:
    """Split a presented token; None when it is not shaped like a Tidemark API key."""
    return tokens.parse(PREFIX, token)
