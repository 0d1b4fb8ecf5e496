"""Which answers are retried, how long to wait, and what a ``Retry-After`` header means."""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# Retry-After is honoured up to this many seconds; a longer ask is capped, not obeyed.
MAX_RETRY_AFTER_SECONDS = 3600.0
RETRYABLE_STATUSES = frozenset({408, 425, 429})
# ``AttemptResult.error_kind`` values meaning the target itself is refused by policy (the
# SSRF guard blocked its address, or the URL is not one outbound may call): a resend to
# the same target is refused the same way, so it fails at once.
REFUSED_ERROR_KINDS = frozenset({"blocked", "invalid_url"})


class Decision(enum.StrEnum):
    """What to do with a delivery after one attempt."""

    SUCCEEDED = "succeeded"
    RETRY = "retry"
    REJECTED = "rejected"  # the same request cannot succeed: fail now, keep it replayable
    GONE = "gone"  # 410: the receiver says the endpoint no longer exists


@dataclass(frozen=True)
class Classification:
    decision: Decision
    retry_after_seconds: float | None = None


def classify(
    status_code: int | None,
    *,
    retry_after: str | None = None,
    error_kind: str = "",
    now: datetime,
) -> Classification:
    """Classify one attempt's outcome.

    Args:
        status_code: the HTTP status, or None when no response arrived (connection error,
            timeout, total deadline): those are retried.
        retry_after: the response's ``Retry-After`` header, honoured for 429 and 503.
        error_kind: the attempt's ``AttemptResult.error_kind``; one of
            ``REFUSED_ERROR_KINDS`` (the target refused by policy) is rejected.
        now: aware UTC instant, for HTTP-date ``Retry-After`` values.

    Returns:
        2xx succeeded; 408, 425, 429 and 5xx retry; 410 gone; any other status (other 4xx,
        and 3xx, since redirects are not followed) rejected. Standard Webhooks and Svix retry
        every non-2xx; Tidemark rejects the 4xx a resend cannot fix, so a wrong credential
        or URL surfaces at once instead of after days of retries, and stays replayable.
        No response: rejected when the target was refused by policy, else retried.
    """
    if error_kind in REFUSED_ERROR_KINDS:
        return Classification(Decision.REJECTED)
    if status_code is None:
        return Classification(Decision.RETRY)
    if 200 <= status_code < 300:
        return Classification(Decision.SUCCEEDED)
    if status_code == 410:
        return Classification(Decision.GONE)
    if status_code in RETRYABLE_STATUSES or 500 <= status_code < 600:
        honoured = status_code in (429, 503)
        return Classification(
            Decision.RETRY, parse_retry_after(retry_after, now=now) if honoured else None
        )
    return Classification(Decision.REJECTED)


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 10.2.3), capped at one hour.

    Accepts delta-seconds or an HTTP-date; returns None for a missing or unreadable value.
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def backoff_delay(
    failed_attempts: int,
    *,
    base_seconds: float,
    cap_seconds: float,
    retry_after_seconds: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Seconds before the next attempt: capped exponential backoff with full jitter.

    ``uniform(0, min(cap, base * 2 ** (failed_attempts - 1)))`` ("Full Jitter", AWS
    Architecture Blog, "Exponential Backoff And Jitter", 2015): retries of many deliveries
    to one struggling endpoint spread out instead of arriving in waves. A ``Retry-After``
    the receiver sent is a floor.

    Args:
        failed_attempts: attempts made so far, at least 1.
        base_seconds, cap_seconds: the first window and the largest one.
        retry_after_seconds: the receiver's own ask, if any.
    """
    window = min(cap_seconds, base_seconds * 2 ** max(failed_attempts - 1, 0))
    delay = (rng or random).uniform(0, window)
    if retry_after_seconds is not None:
        delay = max(delay, retry_after_seconds)
    return delay
