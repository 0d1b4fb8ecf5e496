"""Sending pages: the second half of each loop cycle, inside the watchdog's own process.

Pages are rows (the paging outbox). A sender claims due ones under SKIP LOCKED with a lease
and a claim token, renews a page's lease just before sending it (and sends nothing once
the lease ran out: another loop may have taken it over), sends outside any transaction,
and records the outcome only if it still holds the claim (fencing). Failures are
classified and retried with the same rules and backoff as consumer webhooks (the shared
``outbound`` package). A resolve is never claimed while the trigger of the same
incident and channel is still pending, so a trigger is never sent after its resolve.

Channels: PagerDuty Events API v2 (``dedup_key`` per incident, so trigger and resolve
pair and a repeated trigger attaches to the open alert), Slack incoming webhooks, signed
webhooks (Standard Webhooks v1) and email through Django's mail backend. What a page says
(summary, severity, links, the failing ping's body tail) is ``page_words``'. What user-supplied
words (monitor names, owners, run ids, partitions) may become for each is decided in
``outbound``: ``pagerduty`` (a one-line summary, details as JSON values), ``slack`` (every
piece escaped, links built there) and ``mail`` (a one-line subject, a plain-text body).
A target the SSRF guard refuses at send time fails the page at once, without retries.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q

import outbound
from outbound import mail, pagerduty, secretbox, slack
from outbound.secretbox import InvalidToken

from . import db, holds, metrics, page_words
from .channels import address_policy
from .models import Channel, Incident, Monitor, Page, PageGroup

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str = ""
    retry_after: str | None = None
    error_kind: str = ""  # outbound.AttemptResult.error_kind when no response arrived


def _config(name: str):
    return settings.WATCHDOG_PAGING[name]


def sender_from_settings() -> outbound.Sender:
    """The watchdog's HTTP sender: the same SSRF guard, timeouts and deadline as webhooks."""
    return outbound.Sender(
        policy=address_policy(),
        total_deadline=_config("deadline_seconds"),
        user_agent="Tidemark-Watchdog/1",
    )


def send_due(*, sender: outbound.Sender, now: datetime, limit: int | None = None) -> int:
    """Hold and release triggers (``holds``), group floods, then claim and send up to
    ``limit`` due pages; returns how many were attempted."""
    holds.hold_and_release(now=now)
    hold = degraded(now=now)
    if not hold:
        # Held triggers are grouped when they are released: by then those whose data
        # landed meanwhile are cancelled, and the group names only what is still missing.
        group_floods(now=now)
    began = time.monotonic()
    claimed = _claim(now=now, limit=limit or _config("batch_size"), hold=hold)
    for page, token in claimed:
        if not _renew(page, token, at=now + timedelta(seconds=time.monotonic() - began)):
            continue  # the lease ran out: another loop may have taken it over and sent it
        outcome = _send(page, sender=sender, now=now)
        _record(page, token, outcome, now=now)
    return len(claimed)


def _renew(page: Page, token: uuid.UUID, *, at: datetime) -> bool:
    """Whether the sender still holds ``page``'s claim just before sending it, renewing
    its lease from ``at`` (``now`` plus the seconds spent since the claim).

    A batch shares one lease and is sent page after page, each within the send deadline:
    the later pages of a full batch come after the lease, when another loop may have
    claimed the page, sent it, and sent its resolve since. Sending it again would be a
    trigger after its resolve, so a page whose lease ran out is left to whichever loop
    claims it next (compare-and-set on the claim token and the lease). Not sent, it is
    let go of, so that its incident resolving first still cancels it."""
    if Page.objects.filter(
        pk=page.pk, claim_token=token, state=Page.State.PENDING, lease_until__gt=at
    ).update(lease_until=at + timedelta(seconds=_config("lease_seconds"))):
        return True
    Page.objects.filter(pk=page.pk, claim_token=token).update(lease_until=None, claim_token=None)
    return False


def _due_triggers(now: datetime):
    return Page.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        state=Page.State.PENDING,
        action=Page.Action.TRIGGER,
        incident__isnull=False,
        next_attempt_at__lte=now,
    ).exclude(holds.HELD)


def group_floods(*, now: datetime) -> list[PageGroup]:
    """Merge the due triggers of any channel holding more than ``group_threshold`` of them
    into one group page (after an outage, many deadlines come due in the same cycle).

    The members are marked ``grouped`` (never sent alone); the group is resolved, and its
    resolve sent, when every member incident has resolved.
    """
    threshold = _config("group_threshold")
    groups = []
    with transaction.atomic(using=db.alias()):
        flooded = (
            _due_triggers(now)
            .values("channel_id")
            .annotate(n=Count("id"))
            .filter(n__gt=threshold)
            .values_list("channel_id", flat=True)
        )
        for channel_id in list(flooded):
            members = list(
                _due_triggers(now)
                .filter(channel_id=channel_id)
                .select_for_update(skip_locked=True, of=("self",))
                .select_related("incident__monitor")
                .order_by("id")
            )
            # Held by a hold pass that committed after this one's first read: left alone.
            again = holds.held_now([p.pk for p in members])
            members = [p for p in members if p.pk not in again]
            if len(members) <= threshold:
                continue
            names = sorted({p.incident.monitor.name for p in members})
            group = PageGroup.objects.create(
                channel_id=channel_id,
                summary=(
                    f"{len(members)} deadlines missed at once ({len(names)} monitors: "
                    f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"
                )[:1024],
                monitors=names[:500],
                opened_at=now,
            )
            Page.objects.filter(pk__in=[p.pk for p in members]).update(
                state=Page.State.GROUPED, group=group
            )
            Page.objects.create(
                group=group, channel_id=channel_id, action=Page.Action.TRIGGER, next_attempt_at=now
            )
            groups.append(group)
            logger.warning("grouped %d triggers into one page: %s", len(members), group.summary)
    return groups


def degraded(*, now: datetime) -> bool:
    """Whether Tidemark is degraded: a system monitor (Tidemark watching itself) is down,
    or one recovered less than ``hold_after_recovery_seconds`` ago. The catalog's workers
    are then still catching up on what queued during the outage; data that landed
    meanwhile must resolve its incidents before their held triggers go out."""
    settle = _config("hold_after_recovery_seconds")
    degraded_now = Q(state=Monitor.State.DOWN)
    if settle > 0:
        degraded_now |= Exists(
            Incident.objects.filter(
                monitor=OuterRef("pk"), resolved_at__gt=now - timedelta(seconds=settle)
            )
        )
    # One statement over the few system monitors (partial index), each incident lookup
    # by monitor: the history of every other monitor is never read.
    return Monitor.objects.filter(degraded_now, system=True).exists()


def _claim(*, now: datetime, limit: int, hold: bool) -> list[tuple[Page, uuid.UUID]]:
    incident_trigger_pending = Page.objects.filter(
        incident_id=OuterRef("incident_id"),
        channel_id=OuterRef("channel_id"),
        action=Page.Action.TRIGGER,
        state=Page.State.PENDING,
    )
    group_trigger_pending = Page.objects.filter(
        incident__isnull=True,
        group_id=OuterRef("group_id"),
        action=Page.Action.TRIGGER,
        state=Page.State.PENDING,
    )
    # One late root, one page: triggers held under an upstream's incident (``holds``).
    held = holds.HELD
    if hold:
        # Tidemark is degraded: its operators were paged; the triggers its outage causes
        # wait, and those whose data still lands resolve without waking anyone.
        held |= Q(action=Page.Action.TRIGGER) & ~Q(incident__monitor__system=True)
    token = uuid.uuid4()
    with transaction.atomic(using=db.alias()):
        pages = list(
            Page.objects.select_for_update(skip_locked=True, of=("self",))
            .exclude(held)
            .filter(state=Page.State.PENDING, next_attempt_at__lte=now)
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
            .exclude(
                Q(action=Page.Action.RESOLVE)
                & (Exists(incident_trigger_pending) | Exists(group_trigger_pending))
            )
            .select_related("incident__monitor", "channel", "group")
            .order_by("next_attempt_at", "id")[:limit]
        )
        # A hold pass may have held some of them between this statement's read and its
        # locks (it locks a trigger before holding it, and lets go only at commit).
        again = holds.held_now([p.pk for p in pages if p.action == Page.Action.TRIGGER], held=held)
        pages = [p for p in pages if p.pk not in again]
        Page.objects.filter(pk__in=[p.pk for p in pages]).update(
            lease_until=now + timedelta(seconds=_config("lease_seconds")), claim_token=token
        )
    return [(page, token) for page in pages]


def _send(page: Page, *, sender: outbound.Sender, now: datetime) -> Outcome:
    channel = page.channel
    try:
        if channel.kind == Channel.Kind.EMAIL:
            subject, text = page_words.words(page)
            # A subject of one line, cut: a monitor's name never adds a header.
            subject, text = mail.subject(subject), mail.body(text)
            send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, [channel.target])
            return Outcome(200)
        url, body, headers = _request(page, now=now)
    except (OSError, ValueError, InvalidToken) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}")
    result = sender.post(url, body, headers)
    return Outcome(
        result.status_code,
        result.error or (result.response_excerpt if (result.status_code or 0) >= 300 else ""),
        result.retry_after,
        result.error_kind,
    )


def _request(page: Page, *, now: datetime) -> tuple[str, bytes, dict[str, str]]:
    channel = page.channel
    subject = page_words.subject(page, with_failing_ping=True)
    details = subject.details
    if channel.kind == Channel.Kind.PAGERDUTY:
        if page.action == Page.Action.TRIGGER:
            event = pagerduty.trigger(
                routing_key=channel.target,
                dedup_key=subject.dedup_key,
                summary=subject.summary,
                source="tidemark-watchdog",
                timestamp=subject.opened_at,
                severity=subject.severity,
                component=subject.component,
                group=subject.group,
                kind=subject.kind,
                custom_details=details,
                client=page_words.CLIENT,
                client_url=page_words.oncall_url(page) or "",
                links=page_words.links(page),
            )
        else:
            event = pagerduty.resolve(routing_key=channel.target, dedup_key=subject.dedup_key)
        return _config("pagerduty_url"), pagerduty.body(event), {"Content-Type": "application/json"}
    if channel.kind == Channel.Kind.SLACK:
        return (
            channel.target,
            slack.payload(page_words.slack_text(page), page_words.slack_blocks(page, subject)),
            {"Content-Type": "application/json"},
        )
    # Signed webhook, Standard Webhooks v1: the page id is the stable webhook-id.
    payload = {
        "type": "monitor.resolved" if page.action == Page.Action.RESOLVE else "monitor.down",
        "timestamp": now.astimezone(UTC).isoformat(),
        "data": {"summary": subject.summary, "dedup_key": subject.dedup_key, **details},
    }
    body = json.dumps(payload, separators=(",", ":"))
    msg_id, timestamp = f"page_{page.pk}", int(now.timestamp())
    headers = {
        "Content-Type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
    }
    if channel.secret_encrypted:
        secret = decrypt(channel.secret_encrypted)
        headers["webhook-signature"] = outbound.signature_header(
            [secret], msg_id=msg_id, timestamp=timestamp, body=body
        )
    return channel.target, body.encode(), headers


def _record(page: Page, token: uuid.UUID, outcome: Outcome, *, now: datetime) -> None:
    """Write the attempt's outcome, fenced by the claim token: a sender whose lease ran out
    and was taken over writes nothing."""
    # A target the guard refused (``blocked``, ``invalid_url``) is rejected: failed at once.
    decision = outbound.classify(
        outcome.status_code,
        retry_after=outcome.retry_after,
        error_kind=outcome.error_kind,
        now=now,
    )
    attempts = page.attempts + 1
    changes: dict = {
        "attempts": attempts,
        "last_status": outcome.status_code,
        "last_error": outcome.error[:2000],
        "lease_until": None,
        "claim_token": None,
    }
    if decision.decision == outbound.Decision.SUCCEEDED:
        changes.update(state=Page.State.SENT, sent_at=now)
    elif decision.decision == outbound.Decision.RETRY and attempts < _config("max_attempts"):
        delay = outbound.backoff_delay(
            attempts,
            base_seconds=_config("backoff_base_seconds"),
            cap_seconds=_config("backoff_cap_seconds"),
            retry_after_seconds=decision.retry_after_seconds,
        )
        changes["next_attempt_at"] = now + timedelta(seconds=delay)
    else:
        changes["state"] = Page.State.FAILED
    written = Page.objects.filter(pk=page.pk, claim_token=token).update(**changes)
    if written:
        metrics.record_page(channel=page.channel.kind, result=changes.get("state", "retrying"))
        logger.info(
            "page %s %s to %s: %s",
            page.action,
            page_words.subject(page).dedup_key,
            page.channel,
            outcome,
        )


def encrypt(secret: str) -> str:
    """Encrypt a channel's signing secret at rest (``TIDEMARK_ENCRYPTION_KEYS``)."""
    return secretbox.encrypt(settings.TIDEMARK_ENCRYPTION_KEYS, secret)


def decrypt(token: str) -> str:
    """Decrypt a channel secret. Raises InvalidToken when no configured key opens it."""
    return secretbox.decrypt(settings.TIDEMARK_ENCRYPTION_KEYS, token)
