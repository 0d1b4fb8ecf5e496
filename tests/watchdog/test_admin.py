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
}


def test_a_monitor_added_in_the_admin_is_checked_and_scheduled(admin_client):
    with time_machine.travel(T0, tick=False):
        bad = admin_client.post("/admin/watchdog/monitor/add/", {**FORM, "cron": "30 6 * *"})
        assert bad.status_code == 200  # the form again, with the error
        assert "not a valid cron expression" in bad.content.decode()
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
