"""Hostile monitor names reach every kind of channel as that system's plain text, asserted
on what real receivers get: Slack and webhook receivers on loopback (pytest-httpserver),
a PagerDuty stand-in, and Django's mail outbox."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client
from standardwebhooks import Webhook
from werkzeug import Response

from outbound import pagerduty
from outbound.text import one_line
from tests.outbound.slack_reader import controls, read
from watchdog import loop, monitors, paging
from watchdog.models import Channel, Incident, Monitor, Page

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
# Mentions the channel, forges a link, and tries to add a mail header.
NAME = "<!channel> a & <https://x.example|click>\r\nBcc: victim@example.com"


def _cycle(at: datetime) -> None:
    with time_machine.travel(at, tick=False):
        loop.run_cycle(sender=paging.sender_from_settings(), now=at)


def _ping(monitor: Monitor, suffix: str, at: datetime) -> None:
    with time_machine.travel(at, tick=False):
        assert Client().post(f"/ping/{monitor.ping_key}{suffix}").status_code == 200


@pytest.fixture
def receivers(httpserver, pagerduty):
    """Slack and webhook receivers recording JSON bodies, and the PagerDuty stand-in."""
    seen: dict[str, list] = {"slack": [], "webhook": []}

    def recorder(kind):
        def handle(request):
            seen[kind].append(request)
            return Response("ok")

        return handle

    httpserver.expect_request("/slack").respond_with_handler(recorder("slack"))
    httpserver.expect_request("/hook").respond_with_handler(recorder("webhook"))
    seen["pagerduty"] = pagerduty
    return seen


@pytest.fixture
def hostile_monitor(httpserver, receivers, settings):
    settings.WATCHDOG_PUBLIC_URL = "https://watchdog.example"
    targets = {
        Channel.Kind.SLACK: httpserver.url_for("/slack"),
        Channel.Kind.WEBHOOK: httpserver.url_for("/hook"),
        Channel.Kind.PAGERDUTY: "R" * 32,
        Channel.Kind.EMAIL: "orders-oncall@example.com",
    }
    channels, secrets = [], {}
    for kind, target in targets.items():
        channel, secrets[kind] = monitors.channel_create(kind=kind, name=kind, target=target)
        channels.append(channel)
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=channels, now=T0, name=NAME, owner="orders", period_seconds=3600
        )
    _ping(monitor, "/fail", T0)
    _cycle(T0 + timedelta(seconds=1))
    _ping(monitor, "", T0 + timedelta(minutes=5))
    _cycle(T0 + timedelta(minutes=5, seconds=1))
    return monitor, secrets[Channel.Kind.WEBHOOK]


def test_slack_shows_the_name_as_text_and_links_only_to_the_on_call_page(
    hostile_monitor, receivers
):
    monitor, _ = hostile_monitor
    texts = [r.get_json()["text"] for r in receivers["slack"]]
    assert len(texts) == 2  # the trigger and its resolve
    on_call = f"https://watchdog.example/oncall/monitors/{monitor.pk}"
    for text in texts:
        assert "<!channel>" not in text and "<https://x.example|click>" not in text
        assert "&lt;!channel&gt; a &amp; &lt;https://x.example|click&gt;" in text
        # The one control sequence is Tidemark's own link, labelled with the escaped name.
        assert controls(text) == [("link", on_call, one_line(NAME, limit=200))]
        shown = "".join(token[1] for token in read(text) if token[0] == "text")
        assert "<!channel> a & <https://x.example|click>" in shown


def test_email_has_a_one_line_subject_and_a_plain_text_body(hostile_monitor, mailoutbox):
    trigger, resolve = mailoutbox
    for mail in (trigger, resolve):
        assert mail.to == ["orders-oncall@example.com"] and mail.bcc == []
        assert "\n" not in mail.subject and "\r" not in mail.subject
        message = mail.message()
        assert message["Bcc"] is None and message.get_content_type() == "text/plain"
        assert not getattr(mail, "alternatives", [])
    assert trigger.subject == (
        "[down] <!channel> a & <https://x.example|click> Bcc: victim@example.com reported failure"
    )
    assert NAME.replace("\r\n", "\n") in trigger.body  # the body keeps the name's lines
    assert set(Page.objects.filter(channel__kind="email").values_list("state", flat=True)) == {
        Page.State.SENT
    }
    assert resolve.subject.startswith("[resolved] <!channel>")


def test_pagerduty_gets_a_plain_one_line_summary_and_the_name_as_a_json_value(
    hostile_monitor, receivers
):
    monitor, _ = hostile_monitor
    trigger, resolve = receivers["pagerduty"]
    summary = trigger["payload"]["summary"]
    assert summary == one_line(f"{NAME} reported failure", limit=pagerduty.SUMMARY_MAX_CHARS)
    assert "\n" not in summary and len(summary) <= 1024
    assert trigger["payload"]["custom_details"]["monitor"] == NAME  # exactly, never interpreted
    assert "\n" not in trigger["payload"]["component"]
    incident = Incident.objects.get(monitor=monitor)
    assert trigger["dedup_key"] == resolve["dedup_key"] == incident.dedup_key
    assert (trigger["event_action"], resolve["event_action"]) == ("trigger", "resolve")


def test_a_grouped_page_summary_is_one_line_within_1024_characters(receivers, settings):
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "group_threshold": 3}
    channel, _ = monitors.channel_create(kind="pagerduty", name="pd", target="R" * 32)
    for index in range(4):  # more due triggers than the threshold: one grouped page
        with time_machine.travel(T0, tick=False):
            monitor = monitors.monitor_create(
                channels=[channel], now=T0, name=f"{index}\n{'y' * 190}", period_seconds=60
            )
        _ping(monitor, "/fail", T0)
    _cycle(T0 + timedelta(seconds=1))
    [group] = receivers["pagerduty"]
    summary = group["payload"]["summary"]
    assert summary.startswith("4 deadlines missed at once (4 monitors: 0 yyy")
    assert len(summary) <= 1024 and "\n" not in summary
    assert group["payload"]["custom_details"]["monitors"][0] == f"0\n{'y' * 190}"


def test_a_webhook_gets_the_name_verbatim_in_signed_json(hostile_monitor, receivers):
    _, secret = hostile_monitor
    trigger = receivers["webhook"][0]
    with time_machine.travel(T0 + timedelta(seconds=1), tick=False):  # when it was sent
        Webhook(secret).verify(trigger.get_data(), dict(trigger.headers))
    body = json.loads(trigger.get_data())
    assert body["data"]["monitor"] == NAME
    assert body["data"]["summary"] == f"{NAME} reported failure"
