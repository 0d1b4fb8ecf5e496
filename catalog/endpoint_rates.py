"""Per-endpoint rate limits as a token bucket kept in one number; no ORM.

Each endpoint earns one send per ``1 / rate`` seconds and keeps at most one second's
worth (``burst(rate)`` sends, at least one). The bucket is GCRA's "theoretical arrival
time" (``Endpoint.rate_credit_from``, Unix seconds): the endpoint has earned
``(now - credit_from) * rate`` sends, capped at the burst. Claiming ``n`` moves it
``n / rate`` seconds on. Over any window of ``w`` seconds at most ``burst + rate * w``
deliveries are claimed for an endpoint, however many workers claim: the claim locks the
endpoint rows it takes from (``catalog.delivery.delivery_claim_due``).
"""

from __future__ import annotations

import math


def burst(rate: int) -> int:
    """Most sends an idle endpoint limited to ``rate`` per second may get at once."""
    return max(1, rate)


def allowance(*, rate: int, credit_from: float | None, now: float) -> int:
    """How many deliveries may be claimed for the endpoint at ``now`` (Unix seconds).

    ``credit_from`` None (never claimed under a limit): a full burst.
    """
    if credit_from is None:
        return burst(rate)
    earned = (now - credit_from) * rate
    return max(0, min(burst(rate), math.floor(earned + 1e-9)))


def credit_after(*, rate: int, credit_from: float | None, now: float, claimed: int) -> float:
    """``rate_credit_from`` after ``claimed`` deliveries were claimed at ``now``.

    Credit older than a burst's worth is forfeited first, so an endpoint idle for an hour
    still gets one second's worth, not an hour's.
    """
    oldest = now - burst(rate) / rate
    start = oldest if credit_from is None else max(credit_from, oldest)
    return start + claimed / rate
