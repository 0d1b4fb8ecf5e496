"""Sending a request again when the server asks for it or never answered: 429 and 503
honour ``Retry-After``; other transient failures back off exponentially with jitter.

What is retried:

- 429 and 503, always: the server refused the request before doing it (a rate limit, a
  database outage), and says when to come back;
- 502, 504 and a timeout while reading the answer, only when repeating the request is
  harmless (``idempotent``: a GET, a publish with an ``Idempotency-Key``, an apply);
- a failure to connect, always: the request never left.

Waits are bounded: a ``Retry-After`` longer than ``max_retry_after`` is not waited for
(the error is raised with it), and at most ``attempts`` requests are sent.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from .errors import ProblemError, TransportError

ALWAYS_RETRIED = frozenset({429, 503})
RETRIED_IF_IDEMPOTENT = frozenset({502, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry.

    Attributes:
        attempts: requests sent at most, the first included (1: never retry).
        backoff_base: seconds before the first retry without ``Retry-After``; doubled
            each time, with full jitter.
        backoff_cap: the most seconds one backoff waits.
        max_retry_after: the longest ``Retry-After`` (seconds) waited for; a longer one
            ends the retries at once.
    """

    attempts: int = 5
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    max_retry_after: float = 120.0

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2 ...), without a
        ``Retry-After``: uniform in [0, min(cap, base * 2**(retry-1))]."""
        return random.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (retry - 1)))


NO_RETRIES = RetryPolicy(attempts=1)


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header in seconds (RFC 9110 10.2.3): delay-seconds or an
    HTTP-date (a date in the past is 0). None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def send(
    http: httpx.Client,
    request: httpx.Request,
    *,
    policy: RetryPolicy,
    idempotent: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> httpx.Response:
    """Send ``request`` until it gets an answer that is not retried, or the policy ends.

    Returns:
        The last answer, read, whatever its status (the caller turns an error status into
        a ``ProblemError``), unless the retries ended on a retried status whose
        ``Retry-After`` was over the bound: then that answer too is returned.

    Raises:
        TransportError: no answer to the last attempt (a connection or timeout failure).
    """
    for attempt in range(1, policy.attempts + 1):
        last = attempt == policy.attempts
        try:
            response = http.send(request)
            response.read()
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            if last:
                raise TransportError(f"{request.method} {request.url}: {exc}") from exc
            sleep(policy.backoff(attempt))
            continue
        except httpx.TransportError as exc:  # sent, perhaps done: repeat only if harmless
            if last or not idempotent:
                raise TransportError(f"{request.method} {request.url}: {exc}") from exc
            sleep(policy.backoff(attempt))
            continue
        retried = response.status_code in ALWAYS_RETRIED or (
            idempotent and response.status_code in RETRIED_IF_IDEMPOTENT
        )
        if not retried or last:
            return response
        wait = retry_after_seconds(response.headers.get("Retry-After"))
        if wait is None:
            wait = policy.backoff(attempt)
        elif wait > policy.max_retry_after:
            return response
        sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")


def raise_for_problem(response: httpx.Response) -> None:
    """Raise the ``ProblemError`` an answer of status 400 or above carries."""
    if response.status_code >= 400:
        raise ProblemError.from_answer(
            response.status_code,
            response.content,
            response.headers.get("Content-Type", ""),
            retry_after=retry_after_seconds(response.headers.get("Retry-After")),
        )
