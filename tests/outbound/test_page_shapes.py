"""The shapes pages take in each receiving system: PagerDuty's links and client (only
http(s) addresses), Slack's blocks (escaped, preformatted tails that cannot close early)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from outbound import pagerduty, slack
from tests.outbound.slack_reader import controls, read

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://catalog.example/datasets/7/", True),
        ("http://127.0.0.1:8000/datasets/7/", True),
        ("javascript:alert(1)", False),
        ("data:text/html,hi", False),
        ("https://", False),
        ("https://a.example/x y", False),
        ("https://a.example/\nx", False),
        ("ftp://a.example/x", False),
        ("https://a.example/" + "x" * pagerduty.URL_MAX_CHARS, False),
        ("", False),
    ],
)
def test_web_address_takes_only_http_urls_with_a_host(url, ok):
    assert pagerduty.web_address(url) is ok


def _trigger(**extra):
    return pagerduty.trigger(
        routing_key="R" * 32,
        dedup_key="k",
        summary="s",
        source="tidemark-watchdog",
        timestamp=T0,
        **extra,
    )


def test_a_trigger_sends_only_web_links_with_one_line_text():
    event = _trigger(
        links=[
            ("javascript:alert(1)", "click"),
            ("https://catalog.example/d/1", "Dataset\r\norders"),
            ("https://watchdog.example/oncall/", ""),
        ]
        + [(f"https://x.example/{i}", "x") for i in range(20)],
        client="Tidemark\nwatchdog",
        client_url="https://watchdog.example/oncall/",
    )
    assert event["links"][:2] == [
        {"href": "https://catalog.example/d/1", "text": "Dataset orders"},
        {"href": "https://watchdog.example/oncall/", "text": "https://watchdog.example/oncall/"},
    ]
    assert len(event["links"]) == pagerduty.LINKS_MAX
    assert (event["client"], event["client_url"]) == (
        "Tidemark watchdog",
        "https://watchdog.example/oncall/",
    )


def test_a_trigger_leaves_out_a_client_without_a_web_address_and_empty_links():
    event = _trigger(client="Tidemark watchdog", client_url="javascript:x", links=[])
    assert not {"client", "client_url", "links"} & set(event)
    with pytest.raises(ValueError, match="severity"):
        _trigger(severity="high")


def test_a_code_block_shows_text_literally_and_cannot_close_early():
    markup = slack.code_block("<!here> & ``` <https://evil.example|x>\x07\r\nnext")
    assert markup.startswith("```") and markup.endswith("```") and markup.count("```") == 2
    assert controls(markup) == []
    shown = "".join(token[1] for token in read(markup))
    assert shown == "```<!here> & `\u200b`\u200b` <https://evil.example|x>\nnext```"


def test_blocks_are_cut_to_slacks_limits_at_a_line_end():
    section = slack.section("a" * 10 + "\n" + "b" * slack.BLOCK_TEXT_MAX_CHARS)
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": "a" * 10}}
    context = slack.context([slack.link("https://x.example", str(i)) for i in range(12)])
    assert len(context["elements"]) == slack.CONTEXT_ELEMENTS_MAX
    assert context["elements"][0] == {"type": "mrkdwn", "text": "<https://x.example|0>"}


def test_a_payload_keeps_text_as_the_fallback_and_adds_blocks_only_when_given():
    assert slack.payload("hi") == b'{"text": "hi"}'
    assert b'"blocks": [{"type": "section"' in slack.payload("hi", [slack.section("hi")])
