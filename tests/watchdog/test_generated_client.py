"""A typed client generated from the committed docs/openapi-watchdog.yaml
(openapi-python-client) against the watchdog's real web server deployed alone: every
operation of the document is called through its generated function, and each answer must
parse into the documented model, with the values served. A new operation fails the test
until it is called here."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.catalog.stack_helpers import watchdog_environment
from tests.catalog.worker_helpers import free_port
from tests.generated_client import REPOSITORY, GeneratedClient, generate
from tests.watchdog.processes import WatchdogServer
from watchdog import tokens
from watchdog.models import Incident, Monitor

pytestmark = [
    pytest.mark.django_db(transaction=True, databases="__all__"),
    pytest.mark.timeout(300),
]

DOCUMENT = REPOSITORY / "docs" / "openapi-watchdog.yaml"


@pytest.fixture
def generated(tmp_path) -> GeneratedClient:
    return generate(DOCUMENT, tmp_path / "generated", "tidemark_watchdog_client")


@pytest.fixture
def server(tmp_path):
    env = watchdog_environment(TIDEMARK_VAR_DIR=str(tmp_path / "var"))
    server = WatchdogServer(
        name="watchdog-web", log_path=tmp_path / "web.log", env=env, port=free_port()
    ).start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def test_every_operation_of_the_document_parses_into_its_documented_model(generated, server):
    _, token = tokens.create("generated client")
    client = generated.client(server.url, token)
    m = generated.model

    def call(operation_id: str, *args, status: int, **kwargs):
        [operation] = [o for o in generated.operations if o.operation_id == operation_id]
        response = generated.call(operation, client, *args, **kwargs)
        assert response.status_code == status, (operation_id, response.content[:2000])
        return response.parsed

    channel = call(
        "v1_channels_create",
        body=m("ChannelRequest")(
            name="on-call", kind=m("ChannelKindEnum")("pagerduty"), target="R" * 32
        ),
        status=201,
    )
    [listed] = call("v1_channels_list", status=200)
    assert (listed.id, listed.name, listed.kind.value) == (channel.id, "on-call", "pagerduty")

    monitor = call(
        "v1_monitors_create",
        body=m("MonitorInputRequest")(
            name="nightly", period_seconds=3600, channel_ids=[channel.id]
        ),
        status=201,
    )
    assert (monitor.name, monitor.period_seconds, monitor.external_id) == ("nightly", 3600, "")
    assert monitor.max_runtime_seconds is None  # null when not set
    Incident.objects.create(
        monitor=Monitor.objects.get(pk=monitor.id),
        deadline_at=timezone.now(),
        opened_at=timezone.now(),
        summary="late",
    )
    [incident] = call("v1_incidents_list", status=200)
    assert (incident.monitor_id, incident.summary) == (monitor.id, "late")
    assert incident.resolved_at is None  # null while open
    assert [x.id for x in call("v1_monitors_list", status=200)] == [monitor.id]
    assert call("v1_monitors_retrieve", monitor.id, status=200).name == "nightly"
    changed = call(
        "v1_monitors_partial_update",
        monitor.id,
        body=m("PatchedMonitorInputRequest")(grace_seconds=600),
        status=200,
    )
    assert changed.grace_seconds == 600
    assert call("v1_monitors_pause_create", monitor.id, status=200).paused_at is not None
    assert call("v1_monitors_resume_create", monitor.id, status=200).paused_at is None

    managed = call(
        "v1_monitors_external_create",
        "dataset:7",
        body=m("ExternalMonitorInputRequest")(name="orders/daily", period_seconds=86400),
        status=200,
    )
    assert managed.external_id == "dataset:7"
    pinged = call("v1_monitors_external_ping_create", "dataset:7", status=200)
    assert isinstance(pinged, m("PingResult"))

    ping_key = call(
        "v1_ping_keys_create", body=m("PingKeyInputRequest")(owner="orders"), status=201
    )
    assert ping_key.owner == "orders" and ping_key.key
    [listed_key] = call("v1_ping_keys_list", status=200)
    assert (listed_key.id, listed_key.revoked_at) == (ping_key.id, None)
    assert call("v1_ping_keys_destroy", ping_key.id, status=204) is None

    refused = call(
        "v1_monitors_create",
        body=m("MonitorInputRequest")(
            name="bad", kind=m("MonitorKindEnum")("deadline"), cron="not a cron"
        ),
        status=400,
    )
    assert refused.status == 400 and "cron" in [e.field for e in refused.errors], refused
    assert call("v1_monitors_retrieve", 999999, status=404).status == 404
    assert call("v1_monitors_destroy", monitor.id, status=204) is None

    every = {o.operation_id for o in generated.operations}
    assert generated.called == every, f"not called: {sorted(every - generated.called)}"
    print(f"\n{len(generated.called)} of {len(every)} operations called")
