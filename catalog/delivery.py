"""Delivering notifications: claim due outbox rows, send them, record what happened.

At-least-once, from the database (DESIGN.md principles 1, 2 and 4):

1. **Claim** (short transaction): due deliveries are locked with ``FOR UPDATE SKIP
   LOCKED``, given a lease (``claimed_until``, on the database clock) and a claim token,
   and their attempt is counted, so a worker that dies mid-send still uses up attempts.
2. **Send** outside any transaction, through ``outbound`` (SSRF guard, timeouts, deadline),
   signed per Standard Webhooks with the same ``webhook-id`` on every attempt.
3. **Record** (short transaction): only if the claim token still matches, so a worker
   whose lease expired cannot overwrite a newer attempt. The next attempt time is a row
   value (``next_attempt_at``), never a Celery countdown.

A lost doorbell or a killed worker only delays a delivery: the beat sweeper re-rings
every 30 s and expired leases are claimable again.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter, namedtuple
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import Exists, F, FloatField, OuterRef, Q, Value, Window
from django.db.models.functions import Cast, Coalesce, Now, RowNumber

import outbound
from outbound import mail, slack

from . import endpoint_rates, metrics, notices, success_counts, watchdog_feed
from .endpoint_actions import address_policy, secrets_in_use
from .models import Delivery, DeliveryAttempt, Endpoint, Notification

logger = logging.getLogger(__name__)

_DUE_STATES = (Delivery.State.PENDING, Delivery.State.RETRYING)


def _config() -> dict:
    return settings.TIDEMARK_DELIVERY


# --- claim, send, record ----------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """One claimed delivery: everything needed to send it without the database."""

    delivery_id: int
    token: uuid.UUID
    attempt: int
    attempt_in_budget: int  # counted from the last replay, against max_attempts
    endpoint_id: int
    endpoint_failing: bool  # had a failure streak when claimed
    kind: str
    url: str
    msg_id: str
    body: str
    secrets: tuple[str, ...]


def delivery_claim_due(
    *,
    limit: int,
    lease_seconds: int,
    now: datetime,
    room: Mapping[int, int] | None = None,
    default_room: int | None = None,
) -> list[Claim]:
    """Claim up to ``limit`` due deliveries for this worker, within endpoints' rate limits.

    Due: pending or retrying, ``next_attempt_at`` reached, and not leased (or the lease
    expired); its endpoint active, not throttled (``throttled_until`` passed or unset) and
    with rate credit left (``catalog.endpoint_rates``). Two statements choose them:

    1. lock up to ``limit`` such endpoints that have a due delivery (``FOR UPDATE SKIP
       LOCKED``: rows other workers are claiming from are skipped, not waited for, and two
       workers never spend one endpoint's credit twice), longest unclaimed first, so
       thousands of endpoints take turns;
    2. rank each one's due deliveries oldest first (a window function, on the
       ``delivery_due_by_endpoint`` index) and keep as many as its credit allows;
       the chosen ones are then locked (``SKIP LOCKED`` again) and leased.

    Args:
        lease_seconds: how long the claim is exclusive; longer than one send's deadline
            (a pass hands back what it could not send before its lease runs short).
        now: aware UTC instant: picks signing secrets, and is the clock of throttles and
            rate credit (leases and ``next_attempt_at`` use the database clock).
        room: how many more claims the caller can take, by endpoint id (0: none), as
            ``catalog.sending`` keeps each endpoint's share; ``default_room`` for
            endpoints not in it (None: no cap beyond rate credit and ``limit``).

    Returns:
        The claims, oldest ``next_attempt_at`` first; ``attempt`` is this try's number.
    """
    token = uuid.uuid4()
    default_rate = _config()["endpoint_rate_per_second"]
    with transaction.atomic():
        room = room or {}
        candidates = _sendable_endpoints(now=now, default_rate=default_rate)
        full = [pk for pk, n in room.items() if n <= 0]
        if default_room is not None and default_room <= 0:  # only those named with room
            candidates = candidates.filter(pk__in=[pk for pk, n in room.items() if n > 0])
        elif full:
            candidates = candidates.exclude(pk__in=full)
        endpoints = list(candidates[:limit])
        if not endpoints:
            return []
        rates = {ep.pk: ep.rate_limit_per_second or default_rate for ep in endpoints}
        allowed = {
            ep.pk: endpoint_rates.allowance(
                rate=rates[ep.pk], credit_from=ep.rate_credit_from, now=now.timestamp()
            )
            for ep in endpoints
        }
        for pk in allowed:
            cap = room.get(pk, default_room)
            if cap is not None:
                allowed[pk] = min(allowed[pk], cap)
        ranked = (
            Delivery.objects.filter(_due(), endpoint_id__in=list(allowed))
            .annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=F("endpoint_id"),
                    order_by=[F("next_attempt_at").asc(), F("id").asc()],
                )
            )
            .filter(rank__lte=max(allowed.values()))
            .values_list("id", "endpoint_id", "rank", "next_attempt_at")
        )
        chosen = sorted(
            (row for row in ranked if row[2] <= allowed[row[1]]), key=lambda row: (row[3], row[0])
        )[:limit]
        if not chosen:
            return []
        rows = _lease([row[0] for row in chosen], token=token, lease_seconds=lease_seconds)
        per_endpoint = Counter(row.endpoint_id for row in rows)
        spent = [ep for ep in endpoints if per_endpoint[ep.pk]]
        for ep in spent:
            ep.rate_credit_from = endpoint_rates.credit_after(
                rate=rates[ep.pk],
                credit_from=ep.rate_credit_from,
                now=now.timestamp(),
                claimed=per_endpoint[ep.pk],
            )
        Endpoint.objects.bulk_update(spent, ["rate_credit_from"])
    signing: dict[int, tuple[str, ...]] = {}  # decrypted once per endpoint, not per row
    bodies: dict[uuid.UUID, str] = {}  # serialised once per notification, not per endpoint
    claims = []
    for row in rows:
        if row.endpoint_id not in signing:
            signing[row.endpoint_id] = tuple(
                secrets_in_use(row.endpoint_secret_encrypted, row.endpoint_previous_secrets, now)
                if row.endpoint_secret_encrypted
                else ()
            )
        body = bodies.get(row.notification_id)
        if body is None:
            # Sorted keys: every attempt sends (and signs) byte-identical bodies.
            body = json.dumps(row.notification_payload, sort_keys=True, separators=(",", ":"))
            bodies[row.notification_id] = body
        claims.append(
            Claim(
                delivery_id=row.id,
                token=token,
                attempt=row.attempts,
                attempt_in_budget=row.attempts - row.attempts_before_replay,
                endpoint_id=row.endpoint_id,
                endpoint_failing=row.endpoint_consecutive_failures > 0,
                kind=row.endpoint_kind,
                url=row.endpoint_url,
                msg_id=str(row.notification_id),
                body=body,
                secrets=signing[row.endpoint_id],
            )
        )
    return claims


# What a claim reads of each delivery, its notification and its endpoint.
_CLAIM_COLUMNS = (
    "id",
    "attempts",
    "attempts_before_replay",
    "endpoint_id",
    "notification_id",
    "notification__payload",
    "endpoint__consecutive_failures",
    "endpoint__kind",
    "endpoint__url",
    "endpoint__secret_encrypted",
    "endpoint__previous_secrets",
)
_ClaimRow = namedtuple("_ClaimRow", [c.replace("__", "_") for c in _CLAIM_COLUMNS], rename=False)


def _lease(ids: list[int], *, token: uuid.UUID, lease_seconds: int) -> list:
    """Lease those of ``ids`` still due and not locked, count their attempt, and read them
    (``_CLAIM_COLUMNS``, oldest ``next_attempt_at`` first). Inside the claim's transaction.

    Rows a worker recording an expired claim still holds are skipped (``SKIP LOCKED``):
    waiting for them while holding endpoint locks that worker may need next could
    deadlock. On PostgreSQL one statement locks, leases and reads them; elsewhere (the
    embedded SQLite, which has no row locks to skip) three.
    """
    if connection.vendor == "postgresql":
        return _lease_postgresql(ids, token=token, lease_seconds=lease_seconds)
    locked = list(
        Delivery.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(_due(), id__in=ids)
        .values_list("id", flat=True)
    )
    Delivery.objects.filter(id__in=locked).update(
        claim_token=token,
        claimed_until=Now() + timedelta(seconds=lease_seconds),
        attempts=F("attempts") + 1,
    )
    return [
        _ClaimRow(*row)
        for row in Delivery.objects.filter(id__in=locked, claim_token=token)
        .order_by("next_attempt_at", "id")
        .values_list(*_CLAIM_COLUMNS)
    ]


def _lease_postgresql(ids: list[int], *, token: uuid.UUID, lease_seconds: int) -> list:
    delivery_table = Delivery._meta.db_table
    sql = (
        f"WITH leased AS (UPDATE {delivery_table} SET claim_token = %(token)s, "  # noqa: S608
        "claimed_until = STATEMENT_TIMESTAMP() + make_interval(secs => %(lease)s), "
        "attempts = attempts + 1 "
        f"WHERE id IN (SELECT id FROM {delivery_table} WHERE id = ANY(%(ids)s) "
        "AND state IN (%(pending)s, %(retrying)s) AND next_attempt_at <= STATEMENT_TIMESTAMP() "
        "AND (claimed_until IS NULL OR claimed_until < STATEMENT_TIMESTAMP()) "
        "FOR UPDATE SKIP LOCKED) "
        "RETURNING id, attempts, attempts_before_replay, endpoint_id, notification_id, "
        "next_attempt_at) "
        "SELECT l.id, l.attempts, l.attempts_before_replay, l.endpoint_id, l.notification_id, "
        "n.payload::text, e.consecutive_failures, e.kind, e.url, e.secret_encrypted, "
        "e.previous_secrets::text "
        f"FROM leased l JOIN {Notification._meta.db_table} n ON n.id = l.notification_id "
        f"JOIN {Endpoint._meta.db_table} e ON e.id = l.endpoint_id "
        "ORDER BY l.next_attempt_at, l.id"
    )
    params = {
        "token": token,
        "lease": float(lease_seconds),
        "ids": ids,
        "pending": Delivery.State.PENDING.value,
        "retrying": Delivery.State.RETRYING.value,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    return [
        _ClaimRow(*row[:5], json.loads(row[5]), *row[6:10], json.loads(row[10])) for row in fetched
    ]


def _due() -> Q:
    """Deliveries due now and not leased (or their lease expired)."""
    return Q(state__in=_DUE_STATES, next_attempt_at__lte=Now()) & (
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=Now())
    )


def _not_throttled(now: datetime, prefix: str = "") -> Q:
    return Q(**{f"{prefix}throttled_until__isnull": True}) | Q(
        **{f"{prefix}throttled_until__lte": now}
    )


def _sendable_endpoints(*, now: datetime, default_rate: int):
    """Active endpoints, not throttled, with credit for one send and a due delivery,
    locked (skipping those locked), longest unclaimed first."""
    rate = Cast(Coalesce(F("rate_limit_per_second"), Value(default_rate)), FloatField())
    return (
        Endpoint.objects.select_for_update(skip_locked=True)
        .filter(_not_throttled(now), is_active=True)
        .alias(one_send=Value(1.0) / rate)
        .filter(
            Q(rate_credit_from__isnull=True)
            | Q(rate_credit_from__lte=Value(now.timestamp()) - F("one_send"))
        )
        .filter(Exists(Delivery.objects.filter(_due(), endpoint_id=OuterRef("pk"))))
        .order_by(F("rate_credit_from").asc(nulls_first=True), "id")
        .only("id", "rate_limit_per_second", "rate_credit_from")
    )


def deliveries_held_by_rate(*, now: datetime) -> bool:
    """Whether a delivery is due to an active endpoint that is not throttled: after a claim
    found nothing, such a delivery waits only for its endpoint's rate credit (or for
    another worker's lock on its endpoint)."""
    return Delivery.objects.filter(
        _due(), _not_throttled(now, "endpoint__"), endpoint__is_active=True
    ).exists()


def delivery_send(
    claim: Claim, *, sender: outbound.Sender, now: datetime
) -> outbound.AttemptResult:
    """Send one claimed delivery; no database access.

    Webhooks get the JSON body with Standard Webhooks headers; Slack contacts a text
    message through the same guarded sender; email contacts go through Django's mail
    backend, whose acceptance is recorded as status 200 (any error is retried); the
    watchdog gets calls to its REST API (``watchdog_feed.send``).
    """
    if claim.kind == Endpoint.Kind.EMAIL:
        return _send_email(claim)
    if claim.kind == Endpoint.Kind.WATCHDOG:
        return watchdog_feed.send(claim.body, base_url=claim.url, sender=sender)
    if claim.kind == Endpoint.Kind.SLACK:
        body = slack.payload(notices.render_slack(json.loads(claim.body)))
        return sender.post(claim.url, body, {"Content-Type": "application/json"})
    timestamp = int(now.timestamp())
    headers = {
        "Content-Type": "application/json",
        "webhook-id": claim.msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": outbound.signature_header(
            list(claim.secrets), msg_id=claim.msg_id, timestamp=timestamp, body=claim.body
        ),
    }
    return sender.post(claim.url, claim.body.encode(), headers)


def _send_email(claim: Claim) -> outbound.AttemptResult:
    started = time.monotonic()
    subject, text = notices.render_text(json.loads(claim.body))
    # A subject of one line, cut: user-supplied words never add a header nor fail the send.
    subject, text = mail.subject(subject), mail.body(text)
    try:
        send_mail(subject, text, None, [claim.url.removeprefix("mailto:")])
    except Exception as exc:  # any backend failure (SMTP, DNS, auth) is worth a retry
        return outbound.AttemptResult(
            status_code=None,
            duration_ms=int((time.monotonic() - started) * 1000),
            error_kind="mail",
            error=f"{type(exc).__name__}: {exc}",
        )
    return outbound.AttemptResult(
        status_code=200,
        duration_ms=int((time.monotonic() - started) * 1000),
        response_excerpt="accepted by the mail backend",
    )


def delivery_record(
    *, claim: Claim, result: outbound.AttemptResult, started_at: datetime, now: datetime
) -> str | None:
    """Write one attempt's outcome, fenced by the claim token.

    Succeeded, retrying (with ``next_attempt_at`` from backoff and ``Retry-After``), dead
    (attempts exhausted), or rejected (a 4xx that a resend cannot fix; 410 also disables
    the endpoint). An endpoint failing longer than ``disable_after_failing_seconds`` is
    disabled. A 429 or 503 with ``Retry-After`` throttles the whole endpoint until then
    (``throttled_until``, never moved earlier): no delivery to it is claimed before. A
    success adds one to the endpoint's counter for the hour of ``now``
    (``success_counts``), in the same transaction.

    Returns:
        The delivery's new state, or None when the claim was lost (its lease expired and
        another worker took over); then nothing is written.
    """
    config = _config()
    # A target refused by the guard (``blocked``, ``invalid_url``) is rejected: a resend
    # is refused the same way.
    verdict = outbound.classify(
        result.status_code, retry_after=result.retry_after, error_kind=result.error_kind, now=now
    )
    delay = None
    if verdict.decision == outbound.Decision.SUCCEEDED:
        state = Delivery.State.SUCCEEDED
    elif verdict.decision == outbound.Decision.RETRY:
        if claim.attempt_in_budget >= config["max_attempts"]:
            state = Delivery.State.DEAD
        else:
            state = Delivery.State.RETRYING
            delay = outbound.backoff_delay(
                claim.attempt_in_budget,
                base_seconds=config["backoff_base_seconds"],
                cap_seconds=config["backoff_cap_seconds"],
                retry_after_seconds=verdict.retry_after_seconds,
            )
    else:
        state = Delivery.State.REJECTED
    error = result.error or (
        f"HTTP {result.status_code}" if state != Delivery.State.SUCCEEDED else ""
    )
    changes = {
        "state": state,
        "claimed_until": None,
        "claim_token": None,
        "last_attempt_at": started_at,
        "last_status_code": result.status_code,
        "last_error_kind": result.error_kind,
        "last_error": error,
        "finished_at": now if state != Delivery.State.RETRYING else None,
    }
    if delay is not None:
        changes["next_attempt_at"] = Now() + timedelta(seconds=delay)
    with transaction.atomic():
        updated = Delivery.objects.filter(pk=claim.delivery_id, claim_token=claim.token).update(
            **changes
        )
        if updated != 1:
            logger.warning("delivery %s: claim lost before write-back", claim.delivery_id)
            metrics.record_delivery(kind=claim.kind, outcome="claim_lost", duration_ms=None)
            return None
        DeliveryAttempt.objects.create(
            delivery_id=claim.delivery_id,
            endpoint_id=claim.endpoint_id,
            number=claim.attempt,
            started_at=started_at,
            duration_ms=result.duration_ms,
            status_code=result.status_code,
            decision=verdict.decision.value,
            error_kind=result.error_kind,
            error=result.error[:2000],
            response_excerpt=result.response_excerpt,
            next_attempt_in_seconds=delay,
        )
        if state == Delivery.State.SUCCEEDED:
            # One upsert per success here: on PostgreSQL most successes are batched
            # (``success_batches``), each batch one upsert; this path has the rest.
            success_counts.successes_add({(claim.endpoint_id, success_counts.hour_of(now)): 1})
        _endpoint_health(claim, verdict.decision, now=now, config=config)
        if verdict.retry_after_seconds:
            _throttle(claim.endpoint_id, until=now + timedelta(seconds=verdict.retry_after_seconds))
    metrics.record_delivery(kind=claim.kind, outcome=state, duration_ms=result.duration_ms)
    return state


def _endpoint_health(claim: Claim, decision: outbound.Decision, *, now: datetime, config) -> None:
    if decision == outbound.Decision.SUCCEEDED:
        if claim.endpoint_failing:  # most successes have no streak to clear: skip the UPDATE
            Endpoint.objects.filter(pk=claim.endpoint_id).update(
                failing_since=None, consecutive_failures=0
            )
        return
    endpoints = Endpoint.objects.filter(pk=claim.endpoint_id)
    if decision == outbound.Decision.GONE:
        _disable(claim, "the receiver answered 410 Gone", now=now)
        return
    if decision != outbound.Decision.RETRY:
        return  # a rejected 4xx is the consumer's answer, not an outage
    endpoints.filter(failing_since__isnull=True).update(failing_since=now)
    endpoints.update(consecutive_failures=F("consecutive_failures") + 1)
    too_long = now - timedelta(seconds=config["disable_after_failing_seconds"])
    streak = endpoints.filter(
        is_active=True,
        failing_since__lte=too_long,
        consecutive_failures__gte=config["disable_after_failures"],
    )
    if streak.exists():
        reason = (
            f"every attempt failed for {config['disable_after_failing_seconds']} s "
            f"({config['disable_after_failures']}+ failures in a row)"
        )
        _disable(claim, reason, now=now)


def _throttle(endpoint_id: int, *, until: datetime) -> None:
    """Pause the endpoint until ``until``; a longer pause it already has stays."""
    Endpoint.objects.filter(pk=endpoint_id).filter(
        Q(throttled_until__isnull=True) | Q(throttled_until__lt=until)
    ).update(throttled_until=until)


def _disable(claim: Claim, reason: str, *, now: datetime) -> None:
    """Disable the endpoint (compare-and-set) and tell its owner team, once."""
    # A 410 may end a streak of none: the outage then starts at this attempt.
    flipped = Endpoint.objects.filter(pk=claim.endpoint_id, is_active=True).update(
        is_active=False,
        disabled_reason=reason,
        disabled_at=now,
        outage_started_at=Coalesce(F("failing_since"), Value(now)),
    )
    if flipped != 1 or claim.kind != Endpoint.Kind.WEBHOOK:
        return  # already disabled, or a contact channel (telling it about itself is moot)
    endpoint = Endpoint.objects.select_related("team").get(pk=claim.endpoint_id)
    notices.notify_owner(
        team=endpoint.team,
        type=Notification.Type.ENDPOINT_DISABLED,
        data={"endpoint_id": endpoint.pk, "url": endpoint.url, "reason": reason},
        dedup_key=f"endpoint-disabled:{endpoint.pk}:{now.isoformat()}",
        now=now,
    )


def _exhausted() -> outbound.AttemptResult:
    return outbound.AttemptResult(
        status_code=None,
        duration_ms=0,
        error_kind="exhausted",
        error="attempts exhausted (a worker died during the last one)",
    )


@dataclass
class PassSummary:
    """What one delivery pass did, by final state of each attempt."""

    claimed: int = 0
    by_state: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    released: int = 0
    throttled: int = 0  # claims handed back unsent because their endpoint was throttled
    unsent: int = 0  # claims left unsent, to their leases, when the database stopped answering
    more_due: bool = False
    claims_made: int = 0  # claims made (``delivery_claim_due`` calls)
    claims_empty: int = 0  # of which found nothing to claim

    def __str__(self) -> str:
        states = ", ".join(f"{k} {v}" for k, v in sorted(self.by_state.items())) or "none"
        released = f"; released {self.released}" if self.released else ""
        throttled = f" ({self.throttled} throttled)" if self.throttled else ""
        unsent = f"; unsent {self.unsent} (database lost)" if self.unsent else ""
        return (
            f"claimed {self.claimed}: {states}; claims lost {self.lost}{released}{throttled}"
            f"{unsent}; in {self.claims_made} claims ({self.claims_empty} empty)"
        )


# After a claim found nothing while deliveries wait for rate credit, a pass waits this
# long before claiming again (a second's worth of credit comes back within a second).
RATE_WAIT_SECONDS = 0.25


def delivery_release(claims: list[Claim]) -> int:
    """Hand unsent claims back (fenced by their tokens), uncounting their attempts, so the
    next claim takes them at once. Returns how many were released."""
    released = 0
    with transaction.atomic():
        for claim in claims:
            released += Delivery.objects.filter(
                pk=claim.delivery_id, claim_token=claim.token
            ).update(claimed_until=None, claim_token=None, attempts=F("attempts") - 1)
    return released


def deliver_due(
    *,
    sender: outbound.Sender,
    batch_size: int | None = None,
    max_batches: int = 20,
    max_seconds: float | None = None,
) -> PassSummary:
    """Run claim, send, record until nothing is due, ``max_batches`` batches are claimed,
    or ``max_seconds`` (default ``TIDEMARK_DELIVERY["pass_seconds"]``, 45) have passed
    (no claim after that; sends in flight finish within one total deadline, so a pass
    ends well inside Celery's 90 s soft time limit).

    Sends run concurrently, ``TIDEMARK_DELIVERY_CONCURRENCY`` in flight at most and
    ``TIDEMARK_DELIVERY_ENDPOINT_CONCURRENCY`` per endpoint, while this thread claims
    more and records outcomes (``catalog.sending``, which says how and why). While
    deliveries wait only for their endpoints' rate credit, a claim that finds nothing
    waits ``RATE_WAIT_SECONDS`` and claims again. A claim whose endpoint got throttled
    after it was claimed (a 429 or 503 with Retry-After) is handed back unsent, its
    attempt uncounted; so is one whose lease could no longer cover a send. Once the
    database stops answering, nothing more is sent.

    Returns:
        A summary; ``more_due`` says the pass stopped with work possibly left.
    """
    from . import sending  # it builds on this module: imported here, not at the top

    config = _config()
    return sending.Pass(
        sender=sender,
        summary=PassSummary(),
        batch_size=batch_size or config["batch_size"],
        max_batches=max_batches,
        max_seconds=config["pass_seconds"] if max_seconds is None else max_seconds,
        limits=sending.Limits.from_settings(),
    ).run()


def sender_from_settings() -> outbound.Sender:
    """A ``Sender`` configured from settings (one per worker process)."""
    config = _config()
    return outbound.Sender(
        policy=address_policy(),
        connect_timeout=config["connect_timeout"],
        read_timeout=config["read_timeout"],
        total_deadline=config["total_deadline"],
        max_connections=config["concurrency"],
    )
