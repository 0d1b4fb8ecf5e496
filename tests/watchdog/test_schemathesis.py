"""The watchdog's OpenAPI document against the watchdog's real web server deployed alone
(gunicorn, ``config.settings.watchdog``): schemathesis sends what the document describes,
and things it does not, to every operation, with a watchdog token, on a database holding
a monitor, a channel and an incident."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.catalog.stack_helpers import watchdog_environment
from tests.catalog.worker_helpers import free_port
from tests.schemathesis_helpers import run_schemathesis
from tests.watchdog.processes import WatchdogServer
from watchdog import monitors, tokens
from watchdog.models import Channel, Incident

pytestmark = [
    pytest.mark.django_db(transaction=True, databases="__all__"),
    pytest.mark.timeout(900),
]


def _seed() -> str:
    """A monitor with a channel and an open incident; returns a watchdog token."""
    channel = Channel.objects.create(name="on-call", kind=Channel.Kind.PAGERDUTY, target="R" * 32)
    monitor = monitors.monitor_create(
        now=timezone.now(), name="orders", period_seconds=3600, channels=[channel]
    )
    Incident.objects.create(
        monitor=monitor, deadline_at=timezone.now(), opened_at=timezone.now(), summary="late"
    )
    _, token = tokens.create("schemathesis")
    return token


def test_the_watchdog_api_does_what_its_openapi_document_says(tmp_path):
    token = _seed()
    env = watchdog_environment(TIDEMARK_VAR_DIR=str(tmp_path / "var"))
    server = WatchdogServer(
        name="watchdog-web", log_path=tmp_path / "web.log", env=env, port=free_port()
    ).start()
    try:
        server.wait_ready()
        run = run_schemathesis(
            schema_url=f"{server.url}/api/schema/?format=json",
            base_url=server.url,
            token=token,
            report_dir=tmp_path / "report",
        )
    finally:
        server.kill()
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-3000:]
