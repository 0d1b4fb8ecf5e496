"""Holds on SQLite (the embedded default): one late root, one page, with the same rules as
on PostgreSQL (a JSON list of upstreams, the held trigger left out of the claim)."""

from datetime import timedelta

import pytest
from django.db import connections

from tests.watchdog.conftest import pagerduty, pair  # noqa: F401 - the receiver, the monitors
from tests.watchdog.test_holds import (
    DOWNSTREAM_DEADLINE,
    GRACE,
    UPSTREAM_DEADLINE,
    cycle,
    pages,
    ping,
)
from watchdog import db
from watchdog.models import Incident, Page

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]


def test_a_held_page_waits_then_resolves_silently_as_on_postgresql(pagerduty, pair):  # noqa: F811
    assert connections[db.alias()].vendor == "sqlite"
    upstream, downstream = pair
    cycle(UPSTREAM_DEADLINE + GRACE)
    cycle(DOWNSTREAM_DEADLINE + GRACE)
    assert pages(pagerduty) == [("U", "trigger")]
    held = Incident.objects.get(monitor=downstream)
    assert held.held_under == Incident.objects.get(monitor=upstream)

    ping(downstream, DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=5))
    cycle(DOWNSTREAM_DEADLINE + GRACE + timedelta(minutes=6))
    assert pages(pagerduty) == [("U", "trigger")]
    assert list(Page.objects.filter(incident=held).values_list("state", flat=True)) == [
        Page.State.CANCELLED
    ]
