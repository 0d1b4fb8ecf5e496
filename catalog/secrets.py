"""Encryption at rest for secrets Tidemark must use, not just check (webhook signing).

Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) with a ``MultiFernet`` over
``TIDEMARK_ENCRYPTION_KEYS``: the first key encrypts, every key decrypts, so keys rotate
by prepending a new one and re-encrypting at leisure.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings


@lru_cache(maxsize=1)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def encrypt(plaintext: str) -> str:
    """Encrypt ``plaintext`` with the newest key; returns a URL-safe token."""
    return _fernet(tuple(settings.TIDEMARK_ENCRYPTION_KEYS)).encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """Decrypt a token made by :func:`encrypt` with any configured key.

    Raises:
        cryptography.fernet.InvalidToken: no configured key opens it.
    """
    return _fernet(tuple(settings.TIDEMARK_ENCRYPTION_KEYS)).decrypt(token.encode()).decode()
