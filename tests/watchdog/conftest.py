"""Fixtures shared by the watchdog's in-process tests."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from tests.watchdog import pagerduty_events
from tests.watchdog.hold_pair import orders_and_revenue
from watchdog import tokens
from watchdog.models import Channel


@pytest.fixture
def pagerduty(httpserver, settings):
    """A PagerDuty Events API v2 stand-in that records every event it accepts: one that
    breaks the Events API v2 rules (``pagerduty_events.errors``) is answered 400, as
    PagerDuty answers it, and not recorded."""
    events = []

    def handler(request):
        from werkzeug import Response

        event = json.loads(request.data)
        refused = pagerduty_events.errors(event)
        if refused:
            body = {"status": "invalid event", "message": "Event object is invalid"}
            return Response(json.dumps({**body, "errors": refused}), status=400)
        events.append(event)
        return Response(json.dumps({"status": "success"}), status=202)

    httpserver.expect_request("/v2/enqueue", method="POST").respond_with_handler(handler)
    settings.WATCHDOG_PAGING = {
        **settings.WATCHDOG_PAGING,
        "pagerduty_url": httpserver.url_for("/v2/enqueue"),
    }
    return events


@pytest.fixture
def api(db):
    """An API client holding a watchdog token (``Authorization: Bearer wd_...``)."""
    _, value = tokens.create("test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {value}")
    return client


@pytest.fixture
def channel(db):
    return Channel.objects.create(
        name="orders on-call", kind=Channel.Kind.PAGERDUTY, target="R" * 32
    )


# --- on-call pages ---------------------------------------------------------------------------

OPERATOR_PASSWORD = "tide-watch-4417"


@pytest.fixture
def make_operator(db):
    """``make_operator(username, labels=[...], all_labels=False) -> Operator``."""
    from watchdog import operators

    def make(username: str, labels=(), all_labels: bool = False):
        return operators.operator_create(
            username=username,
            password=OPERATOR_PASSWORD,
            labels=list(labels),
            all_labels=all_labels,
        )

    return make


@pytest.fixture
def oncall_world(db, channel):
    """Two teams' monitors: ``orders nightly`` (orders, down, one open incident with a sent
    trigger), ``orders hourly`` (orders, up) and ``billing export`` (billing, up)."""
    from datetime import timedelta

    from django.utils import timezone

    from schedules import deadlines
    from watchdog import incidents, monitors, schedule
    from watchdog.models import Monitor, Page

    now = timezone.now()
    channel.owner = "orders"
    channel.save()
    nightly = monitors.monitor_create(
        channels=[channel],
        now=now - timedelta(days=2),
        name="orders nightly",
        owner="orders",
        kind=Monitor.Kind.DEADLINE,
        cron="30 6 * * *",
        timezone="Europe/Berlin",
        partitioning="daily",
        partition_timezone="Europe/Berlin",
        grace_seconds=600,
    )
    # Its last deadline passed without the partition: down, paged, watching the next one.
    missed = deadlines.previous_deadline(nightly.cron, nightly.timezone, now)
    late = missed + timedelta(seconds=nightly.grace_seconds)
    incident = incidents.open_incident(
        nightly,
        reason="missed",
        deadline_at=missed,
        partition=schedule.expected_partitions(nightly, missed)[-1],
        summary="orders nightly missed its deadline",
        now=late,
    )
    Page.objects.filter(incident=incident).update(
        state=Page.State.SENT, attempts=1, sent_at=late, last_status=202
    )
    nightly.state = Monitor.State.DOWN
    monitors.reschedule(nightly, now=now)
    nightly.save()
    hourly = monitors.monitor_create(
        now=now, name="orders hourly", owner="orders", period_seconds=3600
    )
    Monitor.objects.filter(pk=hourly.pk).update(
        state=Monitor.State.UP,
        last_ping_at=now - timedelta(minutes=5),
        last_ping_kind="success",
        last_success_at=now - timedelta(minutes=5),
        deadline_at=now + timedelta(minutes=55),
        check_at=now + timedelta(minutes=55),
    )
    billing = monitors.monitor_create(
        now=now, name="billing export", owner="billing", period_seconds=600
    )
    Monitor.objects.filter(pk=billing.pk).update(state=Monitor.State.UP)
    for monitor in (nightly, hourly, billing):
        monitor.refresh_from_db()
    return {"nightly": nightly, "hourly": hourly, "billing": billing, "incident": incident}


@pytest.fixture
def pair(db):
    """Orders (upstream) and revenue (downstream, reading it): ``hold_pair``."""
    return orders_and_revenue()
