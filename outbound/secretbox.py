"""Encryption at rest for secrets that must be used, not just checked (webhook signing):
Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) over several keys with
``MultiFernet``. The first key encrypts, every key decrypts, so keys rotate by prepending
a new one and re-encrypting at leisure. Pure: callers pass the keys."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

__all__ = ["InvalidToken", "decrypt", "encrypt"]


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def encrypt(keys: Sequence[str], plaintext: str) -> str:
    """Encrypt ``plaintext`` with the first of ``keys``; returns a URL-safe token."""
    return _fernet(tuple(keys)).encrypt(plaintext.encode()).decode()


def decrypt(keys: Sequence[str], token: str) -> str:
    """Decrypt a token made by :func:`encrypt` with any of ``keys``.

    Raises:
        InvalidToken: no key opens it.
    """
    return _fernet(tuple(keys)).decrypt(token.encode()).decode()
