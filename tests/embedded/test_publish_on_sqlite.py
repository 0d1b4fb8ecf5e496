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
