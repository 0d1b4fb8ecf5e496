"""The embedded demo's webhook receiver verifies every event type it is sent, not only
partition events (change notices carry no partition)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from catalog.actors import Actor
from catalog.services import subscriptions
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1/demo/hooks/analytics"


@pytest.fixture
def secret():
    analytics = TeamFactory(slug="analytics")
    dataset = DatasetFactory(owner=TeamFactory(slug="orders"))
    result = subscriptions.subscription_create(
        actor=Actor(team=analytics), dataset=dataset, endpoint_url=URL
    )
    return result.endpoint_secret


@pytest.mark.parametrize(
    "event",
    [
        {"type": "partition.ready", "data": {"dataset": {"name": "raw/orders"}, "partition": "x"}},
        {"type": "change_notice.announced", "data": {"dataset": {"name": "raw/orders"}}},
        {"type": "endpoint.disabled", "data": {"endpoint": {"id": 1}}},
    ],
)
def test_each_event_type_is_verified_and_answered_204(client, secret, event, caplog):
    body = json.dumps(event)
    at = datetime.now(UTC)  # verification refuses timestamps 5 minutes off
    signature = Webhook(secret).sign("msg_1", at, body)
    response = client.post(
        "/demo/hooks/analytics",
        body,
        content_type="application/json",
        HTTP_HOST="127.0.0.1",
        HTTP_WEBHOOK_ID="msg_1",
        HTTP_WEBHOOK_TIMESTAMP=str(int(at.timestamp())),
        HTTP_WEBHOOK_SIGNATURE=signature,
    )
    assert response.status_code == 204
    assert f"verified {event['type']}" in caplog.text
