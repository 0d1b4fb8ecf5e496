"""Settling the demo history's outbox: every delivery the history wrote is attempted as
the delivery workers would have, at its ``next_attempt_at``, against how each endpoint
behaved then, with the engine's own classification, backoff and attempt budget
(``outbound.classify``, ``outbound.backoff_delay``, ``TIDEMARK_DELIVERY``).

The demo's receivers answered (its webhook receiver, the mail backend, the watchdog)
except the analytics reconciliation webhook, which has failed since
``world.FAILING_FOR`` ago: its deliveries since then were retried, the oldest ran out
of attempts (dead letters, replayable), the rest wait for their next attempt after
``now``, which the workers make for real.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

import outbound

from .. import success_counts
from ..models import Delivery, DeliveryAttempt, Endpoint
from . import world

# The error a name that no longer resolves gives (httpx's ConnectError from getaddrinfo).
UNRESOLVED = "[Errno -2] Name or service not known"


def _answer(endpoint: Endpoint, at: datetime, *, failing_from: datetime, rng: random.Random):
    """What ``endpoint`` answered an attempt at ``at``."""
    took = int(rng.uniform(15, 240))
    if endpoint.url == world.FAILING_WEBHOOK and at >= failing_from:
        return outbound.AttemptResult(
            status_code=None,
            duration_ms=int(rng.uniform(2, 40)),
            error_kind="connect",
            error=UNRESOLVED,
        )
    if endpoint.kind == Endpoint.Kind.EMAIL:
        return outbound.AttemptResult(
            status_code=200, duration_ms=took, response_excerpt="accepted by the mail backend"
        )
    if endpoint.kind == Endpoint.Kind.WEBHOOK and "/demo/hooks/" in endpoint.url:
        return outbound.AttemptResult(status_code=204, duration_ms=took)
    return outbound.AttemptResult(status_code=200, duration_ms=took)


def settle(*, now: datetime, rng: random.Random) -> dict[str, int]:
    """Attempt every due delivery up to ``now`` as the workers would have.

    Side effects: deliveries get their attempts, state and times; endpoints their failure
    streak (``failing_since``, ``consecutive_failures``) and their successes per hour
    (``success_counts``, what the team page's health reads).

    Returns:
        ``{state: count}`` of the deliveries settled.

    Raises:
        RuntimeError: an endpoint failed long enough to be disabled, which this demo's
            story does not tell (``world.FAILING_FOR`` must stay under the engine's
            ``disable_after_failing_seconds``).
    """
    config = settings.TIDEMARK_DELIVERY
    failing_from = now - world.FAILING_FOR
    deliveries = list(
        Delivery.objects.filter(
            state__in=(Delivery.State.PENDING, Delivery.State.RETRYING), next_attempt_at__lte=now
        )
        .select_related("endpoint")
        .order_by("next_attempt_at", "pk")
    )
    attempts: list[DeliveryAttempt] = []
    streaks: dict[int, list[tuple[datetime, bool]]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for delivery in deliveries:
        at = delivery.next_attempt_at + timedelta(seconds=rng.uniform(0.3, 4))
        while True:
            delivery.attempts += 1
            result = _answer(delivery.endpoint, at, failing_from=failing_from, rng=rng)
            verdict = outbound.classify(result.status_code, now=at)
            delay = None
            if verdict.decision == outbound.Decision.SUCCEEDED:
                state = Delivery.State.SUCCEEDED
            elif verdict.decision != outbound.Decision.RETRY:
                state = Delivery.State.REJECTED
            elif delivery.attempts - delivery.attempts_before_replay >= config["max_attempts"]:
                state = Delivery.State.DEAD
            else:
                state = Delivery.State.RETRYING
                delay = outbound.backoff_delay(
                    delivery.attempts - delivery.attempts_before_replay,
                    base_seconds=config["backoff_base_seconds"],
                    cap_seconds=config["backoff_cap_seconds"],
                    rng=rng,
                )
            attempts.append(
                DeliveryAttempt(
                    delivery=delivery,
                    endpoint_id=delivery.endpoint_id,
                    number=delivery.attempts,
                    started_at=at,
                    duration_ms=result.duration_ms,
                    status_code=result.status_code,
                    decision=verdict.decision.value,
                    error_kind=result.error_kind,
                    error=result.error,
                    response_excerpt=result.response_excerpt,
                    next_attempt_in_seconds=delay,
                )
            )
            streaks[delivery.endpoint_id].append((at, verdict.decision == outbound.Decision.RETRY))
            delivery.state = state
            delivery.last_attempt_at = at
            delivery.last_status_code = result.status_code
            delivery.last_error_kind = result.error_kind
            delivery.last_error = result.error or (
                f"HTTP {result.status_code}" if state != Delivery.State.SUCCEEDED else ""
            )
            finished = at + timedelta(milliseconds=result.duration_ms)
            if delay is None:
                delivery.finished_at = finished
                break
            delivery.next_attempt_at = finished + timedelta(seconds=delay)
            if delivery.next_attempt_at > now:
                break  # the workers make this attempt, for real
            at = delivery.next_attempt_at + timedelta(seconds=rng.uniform(0.3, 4))
        counts[delivery.state] += 1
    _write_back(deliveries)
    DeliveryAttempt.objects.bulk_create(attempts, batch_size=500)
    success_counts.successes_add(
        Counter(
            (d.endpoint_id, success_counts.hour_of(d.finished_at))
            for d in deliveries
            if d.state == Delivery.State.SUCCEEDED
        )
    )
    _endpoint_health(streaks, now=now, config=config)
    return dict(counts)


def _endpoint_health(streaks, *, now: datetime, config: dict) -> None:
    """Each endpoint's failure streak after its attempts: the first failure since its
    last success, and how many in a row (as ``catalog.delivery`` keeps them)."""
    for endpoint_id, outcomes in streaks.items():
        outcomes.sort()
        failing_since, failures = None, 0
        for at, failed in outcomes:
            if not failed:
                failing_since, failures = None, 0
                continue
            failing_since = failing_since or at
            failures += 1
        if failing_since is None:
            continue
        if (
            failing_since <= now - timedelta(seconds=config["disable_after_failing_seconds"])
            and failures >= config["disable_after_failures"]
        ):
            raise RuntimeError(
                f"endpoint {endpoint_id} failed since {failing_since}: the engine would have "
                "disabled it; shorten world.FAILING_FOR"
            )
        Endpoint.objects.filter(pk=endpoint_id).update(
            failing_since=failing_since, consecutive_failures=failures
        )


def _write_back(deliveries: list[Delivery]) -> None:
    """Each delivery's state after its attempts: one ``executemany`` (``bulk_update``
    compiles a CASE per column and row, seconds for a few hundred)."""
    adapt = connection.ops.adapt_datetimefield_value
    rows = [
        [
            d.state,
            d.attempts,
            adapt(d.next_attempt_at),
            adapt(d.last_attempt_at),
            d.last_status_code,
            d.last_error_kind,
            d.last_error,
            adapt(d.finished_at),
            d.pk,
        ]
        for d in deliveries
    ]
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {Delivery._meta.db_table} SET state = %s, attempts = %s, "  # noqa: S608
            "next_attempt_at = %s, last_attempt_at = %s, last_status_code = %s, "
            "last_error_kind = %s, last_error = %s, finished_at = %s WHERE id = %s",
            rows,
        )
