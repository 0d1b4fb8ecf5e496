"""The migration that gives each delivery attempt its endpoint
(``catalog/migrations/0031``): attempts written before it get their delivery's, so the
endpoint's delivery log shows them. Run for real against PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from tests.migration_states import apps_at

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("catalog", "0030_dataset_new_columns_db_defaults")]
AFTER = [("catalog", "0031_endpoint_lifecycle_and_attempt_endpoint")]
AT = datetime(2026, 11, 28, 6, tzinfo=UTC)


@pytest.fixture
def migrated_back():
    yield apps_at(BEFORE)
    call_command("migrate", verbosity=0)  # the rest of the suite runs at the head


def test_attempts_written_before_get_their_deliverys_endpoint(migrated_back):
    apps = migrated_back
    Team, Endpoint = apps.get_model("catalog", "Team"), apps.get_model("catalog", "Endpoint")
    Notification = apps.get_model("catalog", "Notification")
    Delivery, Attempt = (
        apps.get_model("catalog", "Delivery"),
        apps.get_model("catalog", "DeliveryAttempt"),
    )
    team = Team.objects.create(name="Analytics", slug="analytics")
    attempts = {}
    for n in range(2):
        endpoint = Endpoint.objects.create(team=team, url=f"https://hooks.example.com/{n}")
        notification = Notification.objects.create(
            type="partition.ready", dedup_key=f"n{n}", payload={}
        )
        delivery = Delivery.objects.create(
            notification=notification, endpoint=endpoint, next_attempt_at=AT
        )
        attempt = Attempt.objects.create(
            delivery=delivery, number=1, started_at=AT, duration_ms=5, decision="succeeded"
        )
        attempts[attempt.pk] = endpoint.pk

    apps = apps_at(AFTER)
    Attempt = apps.get_model("catalog", "DeliveryAttempt")
    assert dict(Attempt.objects.values_list("pk", "endpoint_id")) == attempts
