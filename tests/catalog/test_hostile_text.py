"""User-supplied words in owner notices reach people as plain text, asserted on what real
receivers get: a team's Slack incoming webhook on loopback (pytest-httpserver) and
Django's mail outbox, through the delivery engine."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog import delivery, notices
from catalog.actors import Actor
from catalog.change_notices import change_notice_announce
from catalog.models import ChangeNotice, Delivery, Notification
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.outbound.slack_reader import controls, read

pytestmark = pytest.mark.django_db

HOSTILE = "<!channel> a & <https://x.example|click>"
LINK = "https://docs.example/orders?v=2&lang=en|<!here>"


@pytest.fixture
def slack(httpserver):
    """The consumer team's Slack webhook: the JSON bodies it received."""
    httpserver.expect_request("/slack", method="POST").respond_with_data("ok")
    return lambda: [r.get_json() for r, _ in httpserver.log if r.path == "/slack"]


@pytest.fixture
def consumer(httpserver):
    return TeamFactory(
        slug="analytics",
        contact_email="analytics-oncall@example.com",
        contact_slack_webhook=httpserver.url_for("/slack"),
    )


def _deliver() -> None:
    sender = delivery.sender_from_settings()
    try:
        delivery.deliver_due(sender=sender)
    finally:
        sender.close()


def test_a_change_notice_reaches_slack_escaped_with_its_link_a_real_link(
    consumer, slack, mailoutbox
):
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    SubscriptionFactory(dataset=dataset, team=consumer, endpoint=None)
    now = timezone.now()
    change_notice_announce(
        actor=Actor(team=owner, username="ana"),
        dataset=dataset,
        kind=ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE,
        description=f"{HOSTILE}\nsecond line",
        link=LINK,
        effective_at=now + timedelta(days=2),
        emergency=True,
        override_reason=f"<@U024BE7LH> <!here> {HOSTILE}",
        now=now,
    )
    _deliver()

    [message] = slack()
    text = message["text"]
    assert "<!channel>" not in text and "<!here>" not in text and "<@U024BE7LH>" not in text
    assert "&lt;!channel&gt; a &amp; &lt;https://x.example|click&gt;" in text
    # Slack finds one control sequence: the notice's own link, showing its own address.
    assert controls(text) == [
        ("link", "https://docs.example/orders?v=2&lang=en%7C%3C!here%3E", LINK)
    ]
    shown = "".join(token[1] for token in read(text) if token[0] == "text")
    assert f"{HOSTILE}\nsecond line" in shown and f"<@U024BE7LH> <!here> {HOSTILE}" in shown

    [mail] = mailoutbox
    assert mail.to == ["analytics-oncall@example.com"]
    assert mail.message().get_content_type() == "text/plain"
    assert f"{HOSTILE}\nsecond line" in mail.body and f"Details: {LINK}" in mail.body
    assert set(Delivery.objects.values_list("state", flat=True)) == {"succeeded"}


def test_an_owner_notice_subject_never_carries_a_line_break_and_is_cut(consumer, mailoutbox):
    """Whatever a notice's data holds, its email goes out with a one-line subject (Django
    refuses CR or LF in a header with BadHeaderError: the notice would never be sent)."""
    notices.notify_owner(
        team=consumer,
        type=Notification.Type.SCHEMA_UNANNOUNCED_CHANGE,
        data={
            "dataset": {"id": 1, "namespace": "s3://lake", "name": "raw\r\nBcc: v@example.com"},
            "removed": ["order_total"],
            "report_path": "/governance",
        },
        dedup_key="hostile-subject",
        now=timezone.now(),
    )
    notices.notify_owner(
        team=consumer,
        type=Notification.Type.SCHEMA_UNANNOUNCED_CHANGE,
        data={"dataset": {"id": 1, "namespace": "s3://lake", "name": "x" * 1000}},
        dedup_key="long-subject",
        now=timezone.now(),
    )
    _deliver()

    hostile, long = sorted(mailoutbox, key=lambda m: len(m.subject))
    assert hostile.subject == (
        "Tidemark: unannounced breaking schema change of s3://lake/raw Bcc: v@example.com"
    )
    assert hostile.bcc == [] and hostile.message()["Bcc"] is None
    assert len(long.subject) == 200 and long.subject.endswith("\u2026")
    emails = Delivery.objects.filter(endpoint__kind="email")
    assert list(emails.values_list("state", flat=True)) == ["succeeded"] * 2
