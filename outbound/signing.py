"""Standard Webhooks v1 signatures (https://www.standardwebhooks.com), via the
``standardwebhooks`` library: HMAC-SHA256 over ``"{id}.{timestamp}.{body}"``."""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format prefix, not a secret


def generate_secret() -> str:
    """A new endpoint secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signature_header(secrets_in_use: list[str], *, msg_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` value: one ``v1,<base64>`` per secret, space-separated.

    Signing with every secret in use lets a consumer rotating its secret verify with
    either the old or the new one during the overlap.

    Args:
        secrets_in_use: ``whsec_...`` secrets, newest first; at least one.
        msg_id: the ``webhook-id`` (stable across retries); must not contain ".".
        timestamp: the ``webhook-timestamp``, integer Unix seconds.
        body: the exact request body sent.
    """
    # standardwebhooks replaces the tzinfo without converting: give it UTC explicitly.
    when = datetime.fromtimestamp(timestamp, tz=UTC)
    return " ".join(Webhook(secret).sign(msg_id, when, body) for secret in secrets_in_use)
