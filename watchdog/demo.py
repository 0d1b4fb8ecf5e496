"""The embedded demo's watchdog: its on-call operator, and the month the catalog's demo
history shows from the watchdog's side, replayed through the watchdog's own services.

The catalog writes what the watchdog saw as a JSON feed (``catalog.demo.feed``; the
watchdog imports no catalog module): its monitor definitions and partition pings as the
catalog's workers delivered them, and the critical dataset's pipeline pings. Each event
is applied at its instant as the API applies it (``api.external_monitor_apply``,
``pings.record``), and every deadline due in between is judged at its check time
(``evaluation.evaluate_due``), so incidents open and resolve as the loop would have
opened and resolved them. The pages they queued count as sent by PagerDuty then.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Min

from . import db, evaluation, operators, pings
from .api import external_monitor_apply
from .models import Monitor, Operator, Page

OPERATOR = "oncall"
FORMAT = 1
PAGE_SENT_AFTER = timedelta(seconds=2)


@dataclass(frozen=True)
class Replayed:
    """What ``replay`` did: events applied, deadlines judged, pages marked sent."""

    events: int
    judgements: int
    pages: int


def operator_ensure(*, password: str) -> tuple[Operator, bool]:
    """The demo's on-call operator ``oncall``, who sees every monitor; created with
    ``password`` when missing (an existing one keeps its own).

    Returns:
        ``(operator, created)``.
    """
    existing = Operator.objects.filter(username=OPERATOR).first()
    if existing is not None:
        return existing, False
    return (
        operators.operator_create(username=OPERATOR, password=password, labels=[], all_labels=True),
        True,
    )


def operator_password_set(operator: Operator, *, password: str) -> Operator:
    """Give the demo operator a new password (its old one was lost with its file)."""
    return operators.operator_update(operator, password=password)


def new_password() -> str:
    """A random password for the demo operator (kept by the caller, 0600)."""
    return secrets.token_urlsafe(12)


def replay(feed: dict) -> Replayed:
    """Apply the feed's events in time order, judging the deadlines due between them,
    then those due by the feed's ``now``; mark the pages queued meanwhile sent. In one
    transaction. A feed whose monitors exist already is not replayed again.

    Args:
        feed: ``catalog.demo.feed.watchdog_feed_events``' document.

    Raises:
        ValueError: a feed of another format.
    """
    if feed.get("format") != FORMAT:
        raise ValueError(f"demo feed format {feed.get('format')!r}, expected {FORMAT}")
    events = feed["events"]
    ids = {e["monitor"]["external_id"] for e in events if "monitor" in e}
    if not ids or Monitor.objects.filter(external_id__in=ids).exists():
        return Replayed(0, 0, 0)
    now = datetime.fromisoformat(feed["now"])
    judged = sent = 0
    with transaction.atomic(using=db.alias()):
        for event in events:
            at = datetime.fromisoformat(event["at"])
            judged, sent = _judge_until(at, inclusive=False, counts=(judged, sent))
            if "monitor" in event:
                definition = event["monitor"]
                external_monitor_apply(
                    definition["external_id"],
                    {**definition["monitor"], "version": definition["version"]},
                    now=at,
                    by="tidemark",
                )
            else:
                _ping(event["ping"], now=at)
            sent += _pages_sent(at)
        judged, sent = _judge_until(now, inclusive=True, counts=(judged, sent))
    return Replayed(len(events), judged, sent)


def _pages_sent(at: datetime) -> int:
    """The pages queued by ``at`` went out at once, accepted by PagerDuty (the loop sends
    within its one-second cycle), so a resolve follows a sent trigger, as it did."""
    return Page.objects.filter(state=Page.State.PENDING, next_attempt_at__lte=at).update(
        state=Page.State.SENT,
        attempts=1,
        sent_at=F("next_attempt_at") + PAGE_SENT_AFTER,
        last_status=202,
    )


def _ping(ping: dict, *, now: datetime) -> None:
    key = (
        Monitor.objects.filter(external_id=ping["external_id"])
        .values_list("ping_key", flat=True)
        .first()
    )
    if key is None:
        return  # a ping to an unknown monitor: 404, nothing recorded
    pings.record(
        ping_key=key,
        ping=pings.PingInput(
            kind=ping["kind"],
            method=ping["method"],
            exit_status=ping["exit_status"],
            partition=ping["partition"],
            run_id=ping["run_id"],
            remote_addr=ping["remote_addr"],
            user_agent=ping["user_agent"],
        ),
        now=now,
    )


def _judge_until(until: datetime, *, inclusive: bool, counts: tuple[int, int]) -> tuple[int, int]:
    """Judge every deadline whose check time comes before ``until`` (or at it), each at
    its check time, as the loop's one-second cycles would have, sending what each
    judgement paged. Returns ``counts`` (judgements, pages) plus this call's."""
    judged, sent = counts
    while True:
        check = Monitor.objects.exclude(state=Monitor.State.PAUSED).aggregate(at=Min("check_at"))[
            "at"
        ]
        if check is None or check > until or (check == until and not inclusive):
            return judged, sent
        evaluation.evaluate_due(now=check)
        judged += 1
        sent += _pages_sent(check)
