"""A page still being sent when its lease runs out: the incident resolving meanwhile must
not cancel it as if it had never gone out, or on-call is woken by a trigger whose resolve
is never sent.

A loop claims a whole batch with one lease (``WATCHDOG_PAGE_LEASE``, 60 s by default) and
sends it page after page, each within ``WATCHDOG_PAGE_DEADLINE`` (10 s): the fiftieth page
of a batch goes out long after its lease ended. The recovery ping lands, on its own
connection, while the sender is on that page.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.concurrency import elsewhere
from watchdog import evaluation, monitors, paging
from watchdog.models import Incident, Monitor, Page, PageGroup
from watchdog.pings import recording
from watchdog.pings.inputs import PingInput

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])

DEADLINE = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)


def landing_while_sending(monkeypatch, monitor, *, action_kind):
    """Make the sender's first send of a trigger wait, past its lease, for the monitor's
    recovery ping to commit; returns when the ping landed."""
    lease = paging._config("lease_seconds")
    send = paging._send
    landed: list[datetime] = []

    def slowly(page, *, sender, now):
        if page.action == Page.Action.TRIGGER and action_kind(page) and not landed:
            at = now + timedelta(seconds=lease + 1)
            landed.append(at)
            elsewhere(
                lambda: recording.record(
                    ping_key=monitor.ping_key,
                    ping=PingInput(kind="success", method="POST"),
                    now=at,
                ),
                what="the ping",
            )
        return send(page, sender=sender, now=now)

    monkeypatch.setattr(paging, "_send", slowly)
    return landed


def test_a_trigger_sent_after_its_lease_ran_out_is_resolved(pagerduty, channel, monkeypatch):
    monitor = monitors.monitor_create(
        channels=[channel],
        now=DEADLINE - timedelta(hours=12),
        name="orders daily",
        kind=Monitor.Kind.DEADLINE,
        cron="30 6 * * *",
        timezone="Europe/Berlin",
    )
    evaluation.evaluate_due(now=DEADLINE, limit=10)
    incident = Incident.objects.get()
    landed = landing_while_sending(
        monkeypatch, monitor, action_kind=lambda page: page.incident_id is not None
    )

    paging.send_due(sender=paging.sender_from_settings(), now=DEADLINE)
    assert landed, "the ping never landed mid-send"
    assert Incident.objects.get().resolved_at == landed[0]
    # The trigger went out: whatever the next cycles do, its resolve follows it.
    for minutes in (2, 3):
        paging.send_due(
            sender=paging.sender_from_settings(), now=DEADLINE + timedelta(minutes=minutes)
        )

    assert [(e["event_action"], e["dedup_key"]) for e in pagerduty] == [
        ("trigger", incident.dedup_key),
        ("resolve", incident.dedup_key),
    ]


def test_a_group_trigger_sent_after_its_lease_ran_out_is_resolved(
    pagerduty, channel, monkeypatch, settings
):
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "group_threshold": 1}
    made = [
        monitors.monitor_create(
            channels=[channel],
            now=DEADLINE - timedelta(hours=12),
            name=f"orders {n}",
            kind=Monitor.Kind.DEADLINE,
            cron="30 6 * * *",
            timezone="Europe/Berlin",
        )
        for n in range(2)
    ]
    evaluation.evaluate_due(now=DEADLINE, limit=10)
    assert Incident.objects.count() == 2
    # The first monitor recovers before the group page goes out; the second while it is
    # being sent, past its lease: the group's last incident resolves then.
    paging.group_floods(now=DEADLINE)
    [group] = PageGroup.objects.all()
    recording.record(
        ping_key=made[0].ping_key, ping=PingInput(kind="success", method="POST"), now=DEADLINE
    )
    landed = landing_while_sending(
        monkeypatch, made[1], action_kind=lambda page: page.group_id is not None
    )

    paging.send_due(sender=paging.sender_from_settings(), now=DEADLINE)
    assert landed, "the ping never landed mid-send"
    assert Incident.objects.filter(resolved_at__isnull=True).count() == 0
    for minutes in (2, 3):
        paging.send_due(
            sender=paging.sender_from_settings(), now=DEADLINE + timedelta(minutes=minutes)
        )

    assert [(e["event_action"], e["dedup_key"]) for e in pagerduty] == [
        ("trigger", group.dedup_key),
        ("resolve", group.dedup_key),
    ]


def test_a_trigger_another_loop_took_over_is_not_sent_again_after_its_resolve(
    pagerduty, channel, monkeypatch
):
    """One loop claims the trigger, then is held up (sending the pages before it in its
    batch) past the lease: a second loop takes the trigger over and sends it, the data
    lands, and the second loop sends the resolve. The first loop, on reaching the
    trigger, must not send it again: a trigger after its resolve opens the alert for
    good."""
    monitor = monitors.monitor_create(
        channels=[channel],
        now=DEADLINE - timedelta(hours=12),
        name="orders daily",
        kind=Monitor.Kind.DEADLINE,
        cron="30 6 * * *",
        timezone="Europe/Berlin",
    )
    evaluation.evaluate_due(now=DEADLINE, limit=10)
    incident = Incident.objects.get()
    lease = paging._config("lease_seconds")
    claim = paging._claim
    meanwhile = []

    def held_up(**kwargs):
        claimed = claim(**kwargs)
        if not meanwhile:
            meanwhile.append(True)
            later = DEADLINE + timedelta(seconds=lease + 1)

            def other_loop():
                paging.send_due(sender=paging.sender_from_settings(), now=later)
                recording.record(
                    ping_key=monitor.ping_key,
                    ping=PingInput(kind="success", method="POST"),
                    now=later + timedelta(seconds=1),
                )
                paging.send_due(
                    sender=paging.sender_from_settings(), now=later + timedelta(seconds=2)
                )

            elsewhere(other_loop)
        return claimed

    monkeypatch.setattr(paging, "_claim", held_up)

    paging.send_due(sender=paging.sender_from_settings(), now=DEADLINE)

    assert [(e["event_action"], e["dedup_key"]) for e in pagerduty] == [
        ("trigger", incident.dedup_key),
        ("resolve", incident.dedup_key),
    ]
    assert list(Page.objects.order_by("pk").values_list("action", "state")) == [
        ("trigger", "sent"),
        ("resolve", "sent"),
    ]
