"""Pages carry context: PagerDuty trigger events with links to the monitor's own pages (a
dataset's page) and the on-call page, ``client``/``client_url``, the monitor's severity
and the tail of the failing ping's body, checked by a PagerDuty stand-in that applies the
Events API v2 rules; Slack messages as blocks whose every text is escaped and whose only
links are Tidemark's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client
from werkzeug import Response

from outbound import slack
from tests.outbound.slack_reader import controls, read
from tests.watchdog import pagerduty_events
from watchdog import loop, monitors, page_words, paging
from watchdog.models import Channel, Monitor, Page

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
HOSTILE = "<!channel> a & <https://x.example|click> ```"
DATASET_URL = "https://catalog.example/datasets/7/"
# A failing job's output: more than the tail sent, ending with the error (and hostile text).
BODY = "starting\n" + "x" * 3000 + f"\nTraceback: KeyError {HOSTILE}\n\x1b[31mexit 3\x1b[0m"


def _cycle(at: datetime) -> None:
    with time_machine.travel(at, tick=False):
        loop.run_cycle(sender=paging.sender_from_settings(), now=at)


def _ping(monitor: Monitor, suffix: str, at: datetime, body: str = "") -> None:
    with time_machine.travel(at, tick=False):
        response = Client().post(
            f"/ping/{monitor.ping_key}{suffix}", data=body, content_type="text/plain"
        )
        assert response.status_code == 200


@pytest.fixture
def slack_messages(httpserver):
    seen: list[dict] = []

    def handle(request):
        seen.append(request.get_json())
        return Response("ok")

    httpserver.expect_request("/slack").respond_with_handler(handle)
    return seen


@pytest.fixture
def failed_monitor(httpserver, pagerduty, slack_messages, settings):
    """A monitor with a dataset link and severity ``warning`` whose job reported failure
    with a long, hostile output, then recovered: a trigger and a resolve to each channel."""
    settings.WATCHDOG_PUBLIC_URL = "https://watchdog.example"
    pd, _ = monitors.channel_create(kind=Channel.Kind.PAGERDUTY, name="pd", target="R" * 32)
    chat, _ = monitors.channel_create(
        kind=Channel.Kind.SLACK, name="chat", target=httpserver.url_for("/slack")
    )
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[pd, chat],
            now=T0,
            name=f"orders {HOSTILE}",
            owner="orders",
            period_seconds=3600,
            severity=Monitor.Severity.WARNING,
            links=[{"href": DATASET_URL, "text": f"Dataset {HOSTILE}"}],
        )
    _ping(monitor, "/3", T0, BODY)
    _cycle(T0 + timedelta(seconds=1))
    _ping(monitor, "", T0 + timedelta(minutes=5))
    _cycle(T0 + timedelta(minutes=5, seconds=1))
    return monitor


def test_a_pagerduty_trigger_carries_links_client_severity_and_the_body_tail(
    failed_monitor, pagerduty
):
    trigger, resolve = pagerduty  # the stand-in accepted both: valid Events API v2 events
    assert pagerduty_events.errors(trigger) == pagerduty_events.errors(resolve) == []
    on_call = f"https://watchdog.example/oncall/monitors/{failed_monitor.pk}"
    assert trigger["links"] == [
        {"href": DATASET_URL, "text": f"Dataset {HOSTILE}"},  # a JSON value, never markup
        {"href": on_call, "text": "On-call page"},
    ]
    assert (trigger["client"], trigger["client_url"]) == ("Tidemark watchdog", on_call)
    assert trigger["payload"]["severity"] == "warning"
    failing = trigger["payload"]["custom_details"]["failing_ping"]
    expected_tail = BODY[-page_words.BODY_TAIL_CHARS :].replace("\x1b", "")
    assert failing["body_tail"] == expected_tail
    assert failing["body_tail"].endswith(f"KeyError {HOSTILE}\n[31mexit 3[0m")
    assert failing["exit_status"] == 3
    assert failing["received_at"] == T0.isoformat()
    assert set(resolve) == {"routing_key", "event_action", "dedup_key"}


def test_the_stand_in_refuses_what_pagerduty_refuses(failed_monitor, pagerduty):
    trigger, _ = pagerduty
    broken = {
        **trigger,
        "payload": {**trigger["payload"], "severity": "high", "summary": "s" * 1025},
        "links": [{"text": "no address"}],
    }
    assert len(pagerduty_events.errors(broken)) == 3
    assert pagerduty_events.errors({**trigger, "payload": None}) != []


def test_a_deadline_missed_after_a_success_carries_no_failing_ping(pagerduty, settings):
    channel, _ = monitors.channel_create(kind=Channel.Kind.PAGERDUTY, name="pd", target="R" * 32)
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[channel], now=T0, name="nightly", period_seconds=60
        )
    _ping(monitor, "/fail", T0, "old failure")
    _ping(monitor, "", T0 + timedelta(seconds=5))
    _cycle(T0 + timedelta(minutes=3))  # a period passed without a ping: missed
    [trigger] = pagerduty
    assert trigger["payload"]["severity"] == "critical"  # the default
    assert "failing_ping" not in trigger["payload"]["custom_details"]
    assert [link["text"] for link in trigger["links"]] == ["On-call page"]


def _texts(block: dict) -> list[str]:
    """Every text field of a Block Kit block."""
    if block["type"] == "section":
        return [block["text"]["text"]]
    return [element["text"] for element in block["elements"]]


def test_slack_blocks_escape_every_text_and_link_only_to_tidemark_pages(
    failed_monitor, slack_messages
):
    trigger, resolve = slack_messages
    on_call = f"https://watchdog.example/oncall/monitors/{failed_monitor.pk}"
    header, tail, links = trigger["blocks"]
    assert [b["type"] for b in trigger["blocks"]] == ["section", "section", "context"]
    assert [b["type"] for b in resolve["blocks"]] == ["section", "context"]
    assert trigger["text"].startswith(":rotating_light:")  # the fallback is kept
    for message in (trigger, resolve):
        for block in message["blocks"]:
            for text in _texts(block):
                assert "<!channel>" not in text and "<https://x.example|click>" not in text
                assert all(kind == "link" for kind, *_ in controls(text))
                assert {c[1] for c in controls(text)} <= {DATASET_URL, on_call}
                assert len(text) <= slack.BLOCK_TEXT_MAX_CHARS
    # The header shows the name literally; the tail is one preformatted block.
    shown = "".join(t[1] for t in read(header["text"]["text"]) if t[0] == "text")
    assert f"orders {HOSTILE}" in shown
    tail_text = tail["text"]["text"]
    assert tail_text.count("```") == 2 and tail_text.endswith("```")
    assert "exit status 3" in tail_text
    body_shown = "".join(t[1] for t in read(tail_text) if t[0] == "text")
    assert "KeyError <!channel> a & <https://x.example|click> `\u200b`\u200b`" in body_shown
    assert controls(links["elements"][0]["text"]) == [("link", DATASET_URL, f"Dataset {HOSTILE}")]
    assert controls(links["elements"][1]["text"]) == [("link", on_call, "On-call page")]


def test_a_link_address_cannot_smuggle_a_mention_or_a_second_link(
    httpserver, slack_messages, settings
):
    settings.WATCHDOG_PUBLIC_URL = "https://watchdog.example"
    chat, _ = monitors.channel_create(
        kind=Channel.Kind.SLACK, name="chat", target=httpserver.url_for("/slack")
    )
    forged = "https://catalog.example/a|<!here>><https://evil.example|ok"
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[chat],
            now=T0,
            name="orders",
            period_seconds=60,
            links=[{"href": forged, "text": "dataset"}],
        )
    _ping(monitor, "/fail", T0)
    _cycle(T0 + timedelta(seconds=1))
    [message] = slack_messages
    [dataset_link, _] = message["blocks"][-1]["elements"]
    [(kind, address, label)] = controls(dataset_link["text"])
    assert (kind, label) == ("link", "dataset")
    assert address == "https://catalog.example/a%7C%3C!here%3E%3E%3Chttps://evil.example%7Cok"


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"severity": "high"}, "severity", "invalid_choice"),
        ({"links": [{"href": "javascript:alert(1)"}]}, "links.0.href", "http_url"),
        (
            {"links": [{"href": "https://ok.example", "text": "t" * 201}]},
            "links.0.text",
            "max_length",
        ),
        ({"links": [{"href": f"https://x.example/{i}"} for i in range(6)]}, "links", "max_length"),
    ],
)
def test_the_api_refuses_a_severity_or_link_pagerduty_could_not_take(api, body, field, rule):
    response = api.post(
        "/api/v1/monitors", {"name": "m", "period_seconds": 60, **body}, format="json"
    )
    assert response.status_code == 400, response.content
    assert [(e["field"], e["rule"]) for e in response.json()["errors"]] == [(field, rule)]


def test_the_api_sets_severity_and_links_on_any_monitor(api):
    created = api.post(
        "/api/v1/monitors",
        {
            "name": "m",
            "period_seconds": 60,
            "severity": "info",
            "links": [{"href": "https://runbook.example/m", "text": "Runbook"}],
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["severity"] == "info"
    assert created.json()["links"] == [{"href": "https://runbook.example/m", "text": "Runbook"}]
    changed = api.patch(
        f"/api/v1/monitors/{created.json()['id']}", {"severity": "error"}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["severity"] == "error"
    assert Monitor.objects.get().severity == "error"
    assert Page.objects.count() == 0
