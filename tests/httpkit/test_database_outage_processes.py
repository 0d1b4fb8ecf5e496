"""The watchdog deployed alone, as the Procfile runs it (gunicorn, ``config.wsgi_watchdog``,
its own settings), through an outage of its database: pings and its API answer 503 with
``Retry-After`` while the database is away, the server's log has one line for the outage
and no traceback, and the first ping after the database is back is recorded, without a
restart. The database goes through a relay the test cuts (``tests.db_relay``)."""

from __future__ import annotations

import httpx
import pytest
from django.db import connections
from django.utils import timezone

from httpkit import outage
from tests.catalog.worker_helpers import free_port
from tests.db_relay import DatabaseRelay
from tests.watchdog.processes import (
    WatchdogServer,
    standalone_environment,
    watchdog_database_url,
)
from watchdog import monitors, tokens
from watchdog.models import Ping

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.timeout(120),
]


def test_the_watchdog_alone_answers_503_through_an_outage_and_recovers_without_restart(
    tmp_path,
):
    config = connections["watchdog"].settings_dict
    relay = DatabaseRelay((config["HOST"] or "127.0.0.1", int(config["PORT"] or 5432)))
    relay.restore()
    monitor = monitors.monitor_create(now=timezone.now(), name="nightly", period_seconds=3600)
    _, token = tokens.create("outage test")
    env = standalone_environment(
        tmp_path, WATCHDOG_DATABASE_URL=watchdog_database_url(port=relay.port)
    )
    server = WatchdogServer(name="watchdog-web", log_path=tmp_path / "web.log", env=env)
    server.port = free_port()
    try:
        server.start().wait_ready()
        ping = f"{server.url}/ping/{monitor.ping_key}"
        api = {"Authorization": f"Bearer {token}"}
        assert httpx.post(ping, content=b"one").status_code == 200

        relay.cut()
        answers = [httpx.post(ping, content=b"lost") for _ in range(3)]
        answers.append(httpx.get(f"{server.url}/api/v1/monitors", headers=api))
        for response in answers:
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"] == str(outage.RETRY_AFTER_SECONDS)
            assert response.headers["Content-Type"] == "application/problem+json"
            assert response.json()["code"] == "database_unavailable"

        relay.restore()
        assert httpx.post(ping, content=b"two").status_code == 200
        assert httpx.get(f"{server.url}/api/v1/monitors", headers=api).status_code == 200
    finally:
        server.kill()
        relay.cut()
    log = server.log()
    assert log.count("database unavailable, answering 503") == 1, log
    assert "Traceback" not in log, log
    assert "Service Unavailable" not in log, log
    assert list(Ping.objects.order_by("id").values_list("body", flat=True)) == ["one", "two"]
