"""Monitors edited in the admin follow the REST API's rules: checked fields, re-planned
deadlines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from watchdog.models import Monitor

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
FORM = {
    "name": "orders nightly",
    "kind": "deadline",
    "cron": "30 6 * * *",
    "timezone": "Europe/Berlin",
    "partition_timezone": "UTC",
    "grace_seconds": "600",
    "storage_marker": "_SUCCESS",
    "severity": "critical",
    "links": "[]",
    # The selects' preselected defaults, as a browser posts them.
    "calendar": "none",
    "non_business_day": "next_business_day",
}


def test_a_monitor_added_in_the_admin_is_checked_and_scheduled(admin_client):
    with time_machine.travel(T0, tick=False):
        bad = admin_client.post("/admin/watchdog/monitor/add/", {**FORM, "cron": "30 6 * *"})
        assert bad.status_code == 200  # the form again, with the error
        assert "expected 5 fields" in bad.content.decode()
        never = admin_client.post("/admin/watchdog/monitor/add/", {**FORM, "cron": "0 6 31 4 *"})
        assert never.status_code == 200
        assert "never fires: day-of-month &#x27;31&#x27; never falls in month April" in (
            never.content.decode()
        )
        assert not Monitor.objects.exists()

        added = admin_client.post("/admin/watchdog/monitor/add/", FORM)
    assert added.status_code == 302, added.content.decode()[:2000]
    monitor = Monitor.objects.get()
    assert monitor.deadline_at == datetime(2026, 11, 29, 5, 30, tzinfo=UTC)

    with time_machine.travel(T0, tick=False):
        changed = admin_client.post(
            f"/admin/watchdog/monitor/{monitor.pk}/change/", {**FORM, "cron": "0 9 * * *"}
        )
    assert changed.status_code == 302
    monitor.refresh_from_db()
    assert monitor.deadline_at == datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def test_operators_are_listed_relabelled_and_deactivated_in_the_admin(admin_client):
    from watchdog import operators
    from watchdog.models import Operator

    olga = operators.operator_create(username="olga", password="tide-watch-4417", labels=["orders"])
    key = operators.sign_in(
        username="olga", password="tide-watch-4417", remote_addr="10.0.0.1", now=T0
    ).key
    assert "olga" in admin_client.get("/admin/watchdog/operator/").content.decode()
    assert admin_client.get("/admin/watchdog/operator/add/").status_code == 403
    url = f"/admin/watchdog/operator/{olga.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert "pbkdf2" not in page and "md5$" not in page  # the hash is never shown

    bad = admin_client.post(url, {"is_active": "on", "labels": '["Not A Slug"]'})
    assert bad.status_code == 200 and "not owner labels" in bad.content.decode()
    changed = admin_client.post(url, {"labels": '["orders", "billing"]'})  # inactive
    assert changed.status_code == 302
    olga = Operator.objects.get(pk=olga.pk)
    assert olga.labels == ["orders", "billing"] and not olga.is_active
    assert operators.session_for(key, now=T0) is None


def test_incidents_and_pages_are_shown_but_never_changed_in_the_admin(admin_client):
    from watchdog.models import Channel, Incident, Page

    monitor = Monitor.objects.create(name="orders nightly")
    incident = Incident.objects.create(
        monitor=monitor, deadline_at=T0, summary="missed", opened_at=T0
    )
    channel = Channel.objects.create(name="orders on-call", kind="pagerduty", target="R" * 32)
    page = Page.objects.create(
        incident=incident, channel=channel, action="trigger", state="sent", next_attempt_at=T0
    )
    for path, row in (("incident", incident), ("page", page)):
        url = f"/admin/watchdog/{path}/{row.pk}/change/"
        assert admin_client.get(url).status_code == 200
        # A resolve written here would never reach PagerDuty.
        admin_client.post(url, {"resolved_at_0": "2026-11-29", "resolved_at_1": "06:00:00"})
        assert admin_client.get(f"/admin/watchdog/{path}/add/").status_code == 403
        assert (
            admin_client.post(
                f"/admin/watchdog/{path}/{row.pk}/delete/", {"post": "yes"}
            ).status_code
            == 403
        )
    incident.refresh_from_db()
    assert incident.resolved_at is None and Page.objects.filter(pk=page.pk).exists()
