"""The watchdog's pings on SQLite (the embedded default): without PostgreSQL's one-statement
path, the same answers come from a plain read and the general path."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connections
from django.test import Client

from watchdog import db, monitors, ping_keys
from watchdog.models import Monitor, Ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)


def test_pings_answer_as_on_postgresql(settings):
    assert connections[db.alias()].vendor == "sqlite"
    settings.WATCHDOG_PING_RATE_PER_MINUTE = 3
    client = Client()
    monitor = monitors.monitor_create(now=T0, name="backup", period_seconds=3600)
    url = f"/ping/{monitor.ping_key}"
    with time_machine.travel(T0, tick=False):
        assert client.get(url).content == b"OK"
        assert client.post(f"{url}/log", "note", content_type="text/plain").status_code == 200
        assert client.get(f"{url}/start?rid=nope").status_code == 400
        assert client.get(f"{url}/0").status_code == 200
    with time_machine.travel(T0 + timedelta(seconds=10), tick=False):
        refused = client.get(url)
    assert (refused.status_code, refused["Retry-After"]) == (429, "50")
    assert list(Ping.objects.order_by("id").values_list("kind", flat=True)) == [
        "success",
        "log",
        "success",
    ]
    assert client.get("/ping/6f9619ff-8b86-d011-b42d-00cf4fc964ff").status_code == 404


def test_a_slug_url_creates_its_monitor_on_sqlite():
    _, key = ping_keys.ping_key_create(owner="orders", now=T0)
    client = Client()
    created = client.get(f"/ping/{key}/nightly?create=1")
    assert (created.status_code, created.content) == (201, b"Created")
    assert client.get(f"/ping/{key}/nightly/fail").status_code == 200
    assert Monitor.objects.get(slug="nightly").state == Monitor.State.DOWN
