"""Encryption at rest for the catalog's webhook signing secrets, with the Fernet keys in
``TIDEMARK_ENCRYPTION_KEYS`` (``outbound.secretbox``: the first encrypts, all decrypt)."""

from __future__ import annotations

from django.conf import settings

from outbound import secretbox


def encrypt(plaintext: str) -> str:
    """Encrypt ``plaintext`` with the newest key; returns a URL-safe token."""
    return secretbox.encrypt(settings.TIDEMARK_ENCRYPTION_KEYS, plaintext)


def decrypt(token: str) -> str:
    """Decrypt a token made by :func:`encrypt` with any configured key.

    Raises:
        cryptography.fernet.InvalidToken: no configured key opens it.
    """
    return secretbox.decrypt(settings.TIDEMARK_ENCRYPTION_KEYS, token)
