"""The embedded demo's watchdog: its on-call operator, the month the catalog's demo
history shows from the watchdog's side, and two monitors the teams made themselves, all
replayed through the watchdog's own services.

The catalog writes what the watchdog saw as a JSON feed (``catalog.demo.feed``; the
watchdog imports no catalog module): its monitor definitions and partition pings as the
catalog's workers delivered them, and the critical dataset's pipeline pings. Each event
is applied at its instant as the API applies it (``api.external_monitor_apply``,
``pings.record``), and every deadline due in between is judged at its check time
(``evaluation.evaluate_due``), so incidents open and resolve as the loop would have
opened and resolved them. The pages they queued count as sent by PagerDuty then.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from django.db import transaction
from django.db.models import F, Min, Q

from schedules import next_deadline

from . import db, evaluation, monitors, operators, pings
from .api.external import external_monitor_apply
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


@dataclass(frozen=True)
class OwnMonitor:
    """A monitor a team made in the watchdog itself (not fed by the catalog): its
    definition, and when its job pinged it over the last ``OWN_HISTORY``, at each firing
    of ``finishes`` (in ``timezone``) give or take ``jitter_seconds``; ``late`` runs
    (counted back from the newest) pinged that much later."""

    definition: dict
    finishes: str
    timezone: str = "UTC"
    jitter_seconds: int = 120
    late: dict[int, timedelta] = field(default_factory=dict)


OWN_HISTORY = timedelta(days=3)
OWN_MONITORS = [
    OwnMonitor(
        dict(
            name="orders nightly export",
            owner="orders",
            kind=Monitor.Kind.DEADLINE,
            cron="30 2 * * *",
            timezone="Europe/Berlin",
            grace_seconds=900,
        ),
        finishes="5 2 * * *",
        timezone="Europe/Berlin",
        jitter_seconds=600,
        late={1: timedelta(minutes=70)},  # last night but one: paged, then resolved
    ),
    OwnMonitor(
        dict(
            name="analytics hourly sync",
            owner="analytics",
            kind=Monitor.Kind.PERIOD,
            period_seconds=3600,
            grace_seconds=600,
        ),
        finishes="4 * * * *",
        jitter_seconds=90,
    ),
]


def replay(feed: dict) -> Replayed:
    """Apply the feed's events, and the teams' own monitors' pings (``OWN_MONITORS``), in
    time order, judging the deadlines due between them, then those due by the feed's
    ``now``; the pages queued meanwhile count as sent. In one transaction. Once the demo's
    monitors exist, nothing is replayed again.

    Args:
        feed: ``catalog.demo.feed.watchdog_feed_events``' document (its ``seed`` also
            draws the own monitors' ping times).

    Raises:
        ValueError: a feed of another format.
    """
    if feed.get("format") != FORMAT:
        raise ValueError(f"demo feed format {feed.get('format')!r}, expected {FORMAT}")
    now = datetime.fromisoformat(feed["now"])
    ids = {e["monitor"]["external_id"] for e in feed["events"] if "monitor" in e}
    names = [own.definition["name"] for own in OWN_MONITORS]
    if Monitor.objects.filter(Q(external_id__in=ids) | Q(name__in=names)).exists():
        return Replayed(0, 0, 0)
    actions = [(datetime.fromisoformat(e["at"]), partial(_apply, e)) for e in feed["events"]]
    actions += _own_actions(now=now, rng=random.Random(f"{feed.get('seed', 0)}:watchdog"))
    actions.sort(key=lambda action: action[0])
    judged = sent = 0
    with transaction.atomic(using=db.alias()):
        for at, action in actions:
            judged, sent = _judge_until(at, inclusive=False, counts=(judged, sent))
            action(at)
            sent += _pages_sent(at)
        judged, sent = _judge_until(now, inclusive=True, counts=(judged, sent))
    return Replayed(len(actions), judged, sent)


def _apply(event: dict, at: datetime) -> None:
    """One feed event, as the watchdog's API applies it."""
    if "monitor" in event:
        definition = event["monitor"]
        external_monitor_apply(
            definition["external_id"],
            {**definition["monitor"], "version": definition["version"]},
            now=at,
            by="tidemark",
        )
        return
    ping = event["ping"]
    key = (
        Monitor.objects.filter(external_id=ping["external_id"])
        .values_list("ping_key", flat=True)
        .first()
    )
    if key is not None:  # a ping to an unknown monitor is a 404: nothing recorded
        _record(key, ping, at)


def _own_actions(*, now: datetime, rng: random.Random) -> list:
    """The own monitors' creation (``OWN_HISTORY`` ago) and their jobs' pings."""
    actions = []
    since = now - OWN_HISTORY
    for own in OWN_MONITORS:
        made = {}

        def create(at, own=own, made=made):
            made["monitor"] = monitors.monitor_create(now=at, **own.definition)

        actions.append((since, create))
        firings, at = [], next_deadline(own.finishes, own.timezone, since)
        while at <= now:
            firings.append(at)
            at = next_deadline(own.finishes, own.timezone, at)
        for age, firing in enumerate(reversed(firings)):
            at = firing + timedelta(seconds=rng.uniform(0, own.jitter_seconds))
            at += own.late.get(age, timedelta(0))
            if since < at <= now:
                ping = {"kind": "success", "method": "GET", "remote_addr": "10.30.0.17"}
                actions.append(
                    (
                        at,
                        lambda at, made=made, ping=ping: _record(
                            made["monitor"].ping_key, ping, at
                        ),
                    )
                )
    return actions


def _pages_sent(at: datetime) -> int:
    """The pages queued by ``at`` went out at once, accepted by PagerDuty (the loop sends
    within its one-second cycle), so a resolve follows a sent trigger, as it did."""
    return Page.objects.filter(state=Page.State.PENDING, next_attempt_at__lte=at).update(
        state=Page.State.SENT,
        attempts=1,
        sent_at=F("next_attempt_at") + PAGE_SENT_AFTER,
        last_status=202,
    )


def _record(key, ping: dict, at: datetime) -> None:
    pings.record(
        ping_key=key,
        ping=pings.PingInput(
            kind=ping["kind"],
            method=ping["method"],
            exit_status=ping.get("exit_status"),
            partition=ping.get("partition", ""),
            run_id=ping.get("run_id", ""),
            remote_addr=ping["remote_addr"],
            user_agent=ping.get("user_agent", "curl/8.5.0"),
        ),
        now=at,
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
