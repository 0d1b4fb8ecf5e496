"""A channel's target is checked when it is created, by the rules the catalog applies to
webhook endpoints (no loopback, link-local or private address unless allow-listed), and a
target the SSRF guard refuses at send time fails its page at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from problems import ValidationProblem
from watchdog import loop, monitors, paging
from watchdog.models import Channel, Page

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)


@pytest.fixture
def no_loopback(settings):
    """Production's policy: nothing allow-listed, https only."""
    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = []
    settings.TIDEMARK_OUTBOUND_ALLOW_HTTP = False


REFUSED = [
    ("slack", "https://169.254.169.254/latest/meta-data", "public_address"),
    ("slack", "https://127.0.0.1/hook", "public_address"),
    ("slack", "https://localhost:8443/hook", "public_address"),
    ("webhook", "https://10.0.0.5/hook", "public_address"),
    ("webhook", "https://192.168.1.20/hook", "public_address"),
    ("webhook", "https://[fe80::1]/hook", "public_address"),
    ("webhook", "https://0x7f000001/hook", "public_address"),
    ("webhook", "http://hooks.example.com/hook", "https_url"),
    ("slack", "file:///etc/passwd", "https_url"),
    ("webhook", "https://user:secret@hooks.example.com/hook", "no_credentials"),
    ("email", "ops@example.com\r\nBcc: victim@example.com", "email_address"),
    ("email", "ops@example.com, victim@example.com", "email_address"),
    ("pagerduty", "abc", "pagerduty_routing_key"),
    ("pagerduty", "R" * 31, "pagerduty_routing_key"),
    ("pagerduty", "R" * 33, "pagerduty_routing_key"),
    ("pagerduty", "R" * 31 + "-", "pagerduty_routing_key"),
    ("pagerduty", "https://events.pagerduty.com/v2/enqueue", "pagerduty_routing_key"),
]


@pytest.mark.parametrize(("kind", "target", "rule"), REFUSED)
def test_a_refused_target_is_a_problem_naming_field_value_and_rule(
    api, no_loopback, kind, target, rule
):
    response = api.post(
        "/api/v1/channels", {"name": "x", "kind": kind, "target": target}, format="json"
    )
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == ("target", rule)
    assert repr(target) in error["detail"]
    assert not Channel.objects.exists()


def test_a_managed_monitors_channels_are_checked_the_same_way(api, no_loopback):
    response = api.post(
        "/api/v1/monitors/external/tidemark:dataset:1:data",
        {
            "name": "orders data",
            "period_seconds": 3600,
            "channels": [
                {"kind": "pagerduty", "target": "R" * 32},
                {"kind": "slack", "target": "https://169.254.169.254/hook"},
            ],
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == ("channels.1.target", "public_address")
    assert "169.254.169.254" in error["detail"]
    assert not Channel.objects.exists()


def test_public_and_allow_listed_targets_are_accepted(api, no_loopback, settings):
    for kind, target in [
        ("slack", "https://hooks.slack.com/services/T0/B0/xyz"),
        ("webhook", "https://hooks.example.com/wd"),
        ("email", "orders-oncall@example.com"),
        ("pagerduty", "R" * 32),
        ("pagerduty", "r3FPuDv0a1b2c3d4yQYCc7trBkymIFcy"),
    ]:
        response = api.post(
            "/api/v1/channels", {"name": kind, "kind": kind, "target": target}, format="json"
        )
        assert response.status_code == 201, response.content
    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = ["10.0.0.0/8"]
    relay = {"name": "relay", "kind": "webhook", "target": "https://10.0.0.5/hook"}
    assert api.post("/api/v1/channels", relay, format="json").status_code == 201


def test_the_service_refuses_what_the_api_refuses(no_loopback):
    with pytest.raises(ValidationProblem) as refused:
        monitors.channel_create(kind="slack", name="x", target="https://10.0.0.5/hook")
    assert [(e.field, e.rule) for e in refused.value.errors] == [("target", "public_address")]
    with pytest.raises(ValidationProblem) as refused:
        monitors.channel_create(kind="pagerduty", name="x", target="abc")
    [error] = refused.value.errors
    assert (error.field, error.rule) == ("target", "pagerduty_routing_key")
    assert "'abc'" in error.detail and "32" in error.detail


@pytest.mark.urls("config.urls")  # the admin is the main deployment's
def test_the_admin_refuses_a_private_target(admin_client, no_loopback):
    response = admin_client.post(
        "/admin/watchdog/channel/add/",
        {"name": "x", "kind": "webhook", "target": "https://10.0.0.5/hook", "owner": ""},
    )
    assert response.status_code == 200  # the form again, with the error
    assert "not a public address" in response.content.decode()
    assert not Channel.objects.exists()


def test_operator_channels_and_the_pagerduty_url_are_checked_at_startup(settings, no_loopback):
    settings.WATCHDOG_OPERATORS_CHANNELS = [{"kind": "slack", "target": "https://10.0.0.5/x"}]
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "pagerduty_url": "https://[::1]/"}
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    assert "watchdog.E002" in str(failed.value) and "watchdog.E003" in str(failed.value)
    settings.WATCHDOG_OPERATORS_CHANNELS = [{"kind": "pagerduty", "target": "abc"}]
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "pagerduty_url": "https://pd.test/"}
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    assert "watchdog.E002" in str(failed.value) and "integration key" in str(failed.value)


def test_a_target_refused_at_send_time_fails_its_page_at_once(httpserver, settings):
    httpserver.expect_request("/slack").respond_with_data("ok")
    # Accepted at creation (loopback allow-listed, as in tests), then the policy changes:
    # a host name can resolve anywhere later, so the guard at connect time decides.
    channel, _ = monitors.channel_create(
        kind="slack", name="s", target=httpserver.url_for("/slack")
    )
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[channel], now=T0, name="orders", period_seconds=60
        )
        assert Client().post(f"/ping/{monitor.ping_key}/fail").status_code == 200
    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = []
    for at in (T0 + timedelta(seconds=1), T0 + timedelta(hours=1)):
        with time_machine.travel(at, tick=False):
            loop.run_cycle(sender=paging.sender_from_settings(), now=at)
    page = Page.objects.get()
    assert (page.state, page.attempts, page.last_status) == (Page.State.FAILED, 1, None)
    assert "may not reach" in page.last_error
    assert httpserver.log == []
