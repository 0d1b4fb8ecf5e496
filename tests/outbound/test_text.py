"""What user-supplied text becomes for each receiving system (pure): Slack markup, mail
headers and bodies, PagerDuty events, and the target rules applied at registration.

Bounded property tests; ``TIDEMARK_PROPERTY_EXAMPLES`` runs more examples.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from email import message_from_string, policy
from email.message import EmailMessage
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from outbound import AddressPolicy, Decision, classify, mail, pagerduty, slack, targets
from outbound.text import one_line
from tests.outbound.slack_reader import controls, read

EXAMPLES = int(os.environ.get("TIDEMARK_PROPERTY_EXAMPLES", "200"))
NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
HOSTILE = "<!channel> a & <https://x.example|click>"
# Every line break str.splitlines knows, and the ones mail and terminals know.
BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
text = st.lists(
    st.one_of(
        st.sampled_from([*"<>&|!@#*_~`:/ ?=%", *BREAKS, "&amp;", "&lt;", "\x00", "\u202e"]),
        st.characters(),  # any code point, lone surrogates included
    ),
    max_size=40,
).map("".join)
bounded = settings(max_examples=EXAMPLES, deadline=None)


# --- Slack -------------------------------------------------------------------------------


def test_slack_escapes_the_three_control_characters():
    assert slack.escape_text(HOSTILE) == "&lt;!channel&gt; a &amp; &lt;https://x.example|click&gt;"
    assert read(slack.escape_text(HOSTILE)) == [("text", HOSTILE)]
    assert controls(HOSTILE) == [("mention", "!channel"), ("link", "https://x.example", "click")]


@bounded
@given(text)
def test_escaped_text_reads_back_as_itself_and_nothing_else(value):
    assert read(slack.escape_text(value)) == ([("text", value)] if value else [])


def test_a_link_label_is_escaped_and_the_address_stays_one_link():
    made = slack.link("https://wd.example/oncall/monitors/7", HOSTILE)
    assert made == (
        "<https://wd.example/oncall/monitors/7|"
        "&lt;!channel&gt; a &amp; &lt;https://x.example|click&gt;>"
    )
    assert controls(made) == [("link", "https://wd.example/oncall/monitors/7", HOSTILE)]


def test_a_hostile_address_cannot_close_the_link_or_add_one():
    made = slack.link("https://docs.example/a?b=1&c=2|<!here> x")
    assert made == (
        "<https://docs.example/a?b=1&amp;c=2%7C%3C!here%3E%20x|"
        "https://docs.example/a?b=1&amp;c=2|&lt;!here&gt; x>"
    )
    [(kind, address, label)] = controls(made)
    assert (kind, unquote(address), label) == (
        "link",
        "https://docs.example/a?b=1&c=2|<!here> x",
        "https://docs.example/a?b=1&c=2|<!here> x",
    )


@bounded
@given(url=text, label=st.one_of(st.none(), text))
def test_a_link_is_one_link_to_its_address_showing_its_label(url, label):
    tokens = read(slack.link(url, label))
    assert len(tokens) == 1
    kind, address, shown = tokens[0]
    assert kind == "link"
    assert unquote(address) == unquote(url)
    assert shown == (one_line(url if label is None else label, limit=slack.LABEL_MAX_CHARS) or None)


@pytest.mark.parametrize("address", ["!channel", "@U123", "#C123", "!subteam^S1"])
def test_an_address_never_becomes_a_mention(address):
    # Found by the property below: link("!") was <!|!>, which Slack reads as a mention.
    made = slack.link(address, "x")
    assert controls(made) == [("link", "%" + f"{ord(address[0]):02X}" + address[1:], "x")]


def test_the_payload_is_json_with_the_markup_as_text():
    assert json.loads(slack.payload("a &amp; b")) == {"text": "a &amp; b"}


# --- mail ----------------------------------------------------------------------------------


@pytest.mark.parametrize("separator", [*BREAKS, "\r\n", "\n\n"])
def test_a_subject_is_one_line_whatever_breaks_it(separator):
    hostile = f"orders{separator}Bcc: victim@example.com"
    assert mail.subject(hostile) == "orders Bcc: victim@example.com"


def test_a_long_subject_is_cut_with_an_ellipsis():
    cut = mail.subject("x" * 500)
    assert len(cut) == mail.SUBJECT_MAX_CHARS and cut.endswith("\u2026")
    assert mail.subject("  a\t\tb  ") == "a b"


def test_controls_and_bidi_overrides_are_dropped_from_a_subject():
    assert mail.subject("pay\x00\x07ment \u202egnp.exe\u202c done") == "payment gnp.exe done"


@bounded
@given(text)
def test_every_subject_is_a_header_python_accepts_as_one_line(value):
    subject = mail.subject(value)
    assert len(subject) <= mail.SUBJECT_MAX_CHARS
    assert subject.splitlines() in ([subject], [])
    message = EmailMessage()
    message["Subject"] = subject  # raises on CR or LF
    message.set_content("body")
    parsed = message_from_string(message.as_string(), policy=policy.default)
    assert [k for k in parsed if not k.startswith(("Content-", "MIME-"))] == ["Subject"]


def test_a_body_keeps_its_lines_and_drops_controls():
    assert mail.body("one\r\ntwo\u2028three\x00\tfour") == "one\ntwo\nthree\tfour"


# --- PagerDuty -----------------------------------------------------------------------------


def test_a_trigger_summary_is_one_plain_line_of_at_most_1024_characters():
    name = "orders\nnightly <b>" + "x" * 2000
    event = pagerduty.trigger(
        routing_key="R" * 32,
        dedup_key="tidemark-watchdog-abc-1",
        summary=f"{name}: no ping by 06:30",
        source="tidemark-watchdog",
        timestamp=NOW,
        component=name,
        custom_details={"monitor": name},
    )
    payload = event["payload"]
    assert len(payload["summary"]) == 1024 and "\n" not in payload["summary"]
    assert payload["summary"].startswith("orders nightly <b>xxx")  # plain text, not HTML
    assert len(payload["component"]) <= pagerduty.FIELD_MAX_CHARS
    assert payload["custom_details"] == {"monitor": name}  # as given, a JSON value
    assert json.loads(pagerduty.body(event)) == event
    assert event["dedup_key"] == "tidemark-watchdog-abc-1"


def test_a_resolve_names_only_its_alert():
    assert pagerduty.resolve(routing_key="R", dedup_key="k") == {
        "routing_key": "R",
        "event_action": "resolve",
        "dedup_key": "k",
    }
    with pytest.raises(ValueError, match="dedup_key"):
        pagerduty.resolve(routing_key="R", dedup_key="k" * 256)


# --- targets and refusals ----------------------------------------------------------------

STRICT = AddressPolicy()


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("https://hooks.slack.com/services/T0/B0/x", None),
        ("https://hooks.example.com:8443/a?b=1", None),
        ("http://hooks.example.com/a", targets.HTTPS_URL),
        ("ftp://hooks.example.com/a", targets.HTTPS_URL),
        ("https:///no-host", targets.HTTPS_URL),
        ("hooks.example.com/a", targets.HTTPS_URL),
        ("https://[::1", targets.HTTPS_URL),
        ("https://user:pw@hooks.example.com/a", targets.NO_CREDENTIALS),
        ("https://169.254.169.254/latest/meta-data", targets.PUBLIC_ADDRESS),
        ("https://10.0.0.5/hook", targets.PUBLIC_ADDRESS),
        ("https://192.168.1.1/hook", targets.PUBLIC_ADDRESS),
        ("https://127.0.0.1/hook", targets.PUBLIC_ADDRESS),
        ("https://127.1/hook", targets.PUBLIC_ADDRESS),
        ("https://0x7f000001/hook", targets.PUBLIC_ADDRESS),
        ("https://[::1]/hook", targets.PUBLIC_ADDRESS),
        ("https://[fe80::1]/hook", targets.PUBLIC_ADDRESS),
        ("https://[::ffff:10.0.0.1]/hook", targets.PUBLIC_ADDRESS),
        ("https://localhost:8000/hook", targets.PUBLIC_ADDRESS),
        ("https://api.localhost/hook", targets.PUBLIC_ADDRESS),
    ],
)
def test_url_refusal_rules(url, rule):
    refusal = targets.url_refusal(url, policy=STRICT)
    assert (refusal.rule if refusal else None) == rule


def test_an_allow_listed_network_and_plain_http_are_accepted_when_configured():
    relay = AddressPolicy.from_strings(["10.0.0.0/8", "127.0.0.0/8"], allow_http=True)
    assert targets.url_refusal("http://10.1.2.3/hook", policy=relay) is None
    assert targets.url_refusal("http://localhost:8000/hook", policy=relay) is None
    assert targets.url_refusal("http://192.168.1.1/hook", policy=relay).rule == "public_address"


@pytest.mark.parametrize("kind", ["blocked", "invalid_url"])
def test_a_target_refused_by_policy_is_rejected_not_retried(kind):
    assert classify(None, error_kind=kind, now=NOW).decision == Decision.REJECTED
    assert classify(None, error_kind="connect", now=NOW).decision == Decision.RETRY
