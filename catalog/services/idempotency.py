"""Idempotency-Key handling for publishes: the request fingerprint and claiming a key (or
finding the stored response to replay), inside the publish's transaction."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction

from problems import FieldError

from .. import errors
from ..models import IdempotencyRecord, Team
from . import publish_steps

# How long a request waits for another holding the same Idempotency-Key before 409.
IDEMPOTENCY_LOCK_TIMEOUT = "50ms"


def request_fingerprint(payload: dict[str, Any]) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotency_begin(
    *, team: Team, key: str, fingerprint: str, now: datetime
) -> tuple[IdempotencyRecord | None, publish_steps.PublishResult | None]:
    """Claim ``key`` for this request, or return the stored response to replay.

    Must run inside the caller's transaction: the record commits with the work, so a
    failed request leaves no record and may be retried. A concurrent request holding the
    key makes this one wait at most ``IDEMPOTENCY_LOCK_TIMEOUT`` before 409.

    Returns:
        ``(record, None)`` when this request owns the key, ``(None, replay)`` otherwise.

    Raises:
        IdempotencyKeyReused (422), IdempotencyKeyInProgress (409).
    """
    expires_at = now + timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    existing = IdempotencyRecord.objects.select_for_update().filter(team=team, key=key).first()
    if existing is None:
        try:
            with transaction.atomic():
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute(f"SET LOCAL lock_timeout = '{IDEMPOTENCY_LOCK_TIMEOUT}'")
                record = IdempotencyRecord.objects.create(
                    team=team, key=key, fingerprint=fingerprint, expires_at=expires_at
                )
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
            return record, None
        except OperationalError as exc:
            raise errors.IdempotencyKeyInProgress(
                "another request with this Idempotency-Key is still being processed; "
                "retry after it completes"
            ) from exc
        except IntegrityError:
            existing = IdempotencyRecord.objects.select_for_update().get(team=team, key=key)
    if existing.expires_at <= now:
        existing.fingerprint = fingerprint
        existing.status_code = None
        existing.response_body = None
        existing.expires_at = expires_at
        existing.save()
        return existing, None
    if existing.fingerprint != fingerprint:
        raise errors.IdempotencyKeyReused(
            "this Idempotency-Key was first used with a different request body",
            errors=[FieldError("Idempotency-Key", "reused with a different body", "reuse")],
        )
    if existing.status_code is None:
        raise errors.IdempotencyKeyInProgress("the first request with this key has not finished")
    return None, publish_steps.PublishResult(
        status_code=existing.status_code, body=existing.response_body, replayed=True
    )
