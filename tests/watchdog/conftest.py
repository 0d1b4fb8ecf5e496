"""Fixtures shared by the watchdog's in-process tests."""

from __future__ import annotations

import json

import pytest

from watchdog.models import Channel


@pytest.fixture
def pagerduty(httpserver, settings):
    """A PagerDuty Events API v2 stand-in that records every event."""
    events = []

    def handler(request):
        from werkzeug import Response

        events.append(json.loads(request.data))
        return Response(json.dumps({"status": "success"}), status=202)

    httpserver.expect_request("/v2/enqueue", method="POST").respond_with_handler(handler)
    settings.WATCHDOG_PAGING = {
        **settings.WATCHDOG_PAGING,
        "pagerduty_url": httpserver.url_for("/v2/enqueue"),
    }
    return events


@pytest.fixture
def channel(db):
    return Channel.objects.create(
        name="orders on-call", kind=Channel.Kind.PAGERDUTY, target="R" * 32
    )
