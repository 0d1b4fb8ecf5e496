"""The embedded mode (SQLite + filesystem broker) publishes and writes the outbox."""

import pytest
from django.conf import settings
from django.db import connection

from catalog.models import Delivery, ReadinessEvent
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db


def test_embedded_settings_use_sqlite_and_filesystem_broker():
    assert connection.vendor == "sqlite"
    assert settings.CELERY_BROKER_URL.startswith("filesystem://")
    assert settings.DATABASES["default"]["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_publish_on_sqlite_writes_event_and_delivery(
    client_for, django_capture_on_commit_callbacks
):
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    SubscriptionFactory(dataset=dataset)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(
            "/api/v1/readiness",
            {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"},
            format="json",
        )
    assert response.status_code == 201, response.json()
    assert ReadinessEvent.objects.count() == 1
    assert Delivery.objects.filter(state="pending").count() == 1


def test_a_backfill_on_sqlite_is_flagged_and_kept_from_newest_only_subscriptions(client_for):
    """SQLite writes the outbox statement by statement: it judges a backfill as the
    one-statement publish on PostgreSQL does."""
    from catalog.models import Notification

    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    everything = SubscriptionFactory(dataset=dataset)
    newest = SubscriptionFactory(dataset=dataset, newest_only=True)
    client = client_for(owner)
    for partition in ("2026-11-28", "2026-11-26"):
        response = client.post(
            "/api/v1/readiness",
            {"namespace": "s3://lake", "name": "raw/orders", "partition": partition},
            format="json",
        )
        assert response.status_code == 201, response.json()

    backfill = {
        n.payload["data"]["partition"]: n.payload["data"]["backfill"]
        for n in Notification.objects.all()
    }
    assert backfill == {"2026-11-28": False, "2026-11-26": True}
    told = Delivery.objects.values_list("endpoint_id", "notification__payload__data__partition")
    assert sorted(told) == sorted(
        [
            (everything.endpoint_id, "2026-11-28"),
            (everything.endpoint_id, "2026-11-26"),
            (newest.endpoint_id, "2026-11-28"),
        ]
    )


def test_a_subscription_with_two_endpoints_gets_a_delivery_each_on_sqlite(client_for):
    """The subscribers' query (a UNION of first and other endpoints) runs on SQLite."""
    owner, consumer = TeamFactory(slug="orders"), TeamFactory(slug="analytics")
    DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    declared = client_for(consumer).post(
        "/api/v1/subscriptions",
        {"namespace": "s3://lake", "name": "raw/orders", "endpoint_url": "https://a.example/h"},
        format="json",
    )
    added = client_for(consumer).post(
        f"/api/v1/subscriptions/{declared.json()['id']}/endpoints",
        {"url": "https://b.example/h"},
        format="json",
    )
    assert added.status_code == 201, added.json()
    response = client_for(owner).post(
        "/api/v1/readiness",
        {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    urls = Delivery.objects.values_list("endpoint__url", flat=True)
    assert sorted(urls) == ["https://a.example/h", "https://b.example/h"]
    assert len(set(Delivery.objects.values_list("notification_id", flat=True))) == 1
