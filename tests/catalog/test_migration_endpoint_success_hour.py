"""The migration that brings each endpoint's hourly success counters
(``catalog/migrations/0044``): the hours the health window can still read are counted
from the succeeded deliveries kept, so the health shows the same numbers across the
upgrade. Run for real against PostgreSQL (the embedded suite runs the backfill on
SQLite)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command

from catalog import selectors
from tests.migration_states import apps_at

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("catalog", "0043_notification_created")]
AFTER = [("catalog", "0044_endpoint_success_hour")]
NOW = datetime(2026, 11, 28, 12, 40, tzinfo=UTC)


@pytest.fixture
def migrated_back():
    yield apps_at(BEFORE)
    call_command("migrate", verbosity=0)  # the rest of the suite runs at the head


def deliveries_before(apps) -> dict[int, int]:
    """Two endpoints' deliveries, written before the migration: successes over two days
    (some outside what the backfill reads), a dead letter, a pending one. Returns the
    endpoints' ids, by name."""
    Team, Endpoint = apps.get_model("catalog", "Team"), apps.get_model("catalog", "Endpoint")
    Notification, Delivery = (
        apps.get_model("catalog", "Notification"),
        apps.get_model("catalog", "Delivery"),
    )
    team = Team.objects.create(name="Analytics", slug="analytics")
    ids = {}
    finished = {
        "a": [0.1, 0.2, 3, 24.5, 25.5, 25.9, 40],  # hours before NOW
        "b": [1],
    }
    n = 0
    for name, ages in finished.items():
        endpoint = Endpoint.objects.create(team=team, url=f"https://hooks.example.com/{name}")
        ids[name] = endpoint.pk
        for state, age in [("succeeded", a) for a in ages] + [("dead", 2), ("pending", None)]:
            n += 1
            notification = Notification.objects.create(
                type="partition.ready", dedup_key=f"n{n}", payload={}
            )
            Delivery.objects.create(
                notification=notification,
                endpoint=endpoint,
                state=state,
                next_attempt_at=NOW,
                finished_at=None if age is None else NOW - timedelta(hours=age),
            )
    return ids


def test_the_last_25_hours_of_successes_are_counted_per_endpoint_and_hour(migrated_back):
    ids = deliveries_before(migrated_back)

    with time_machine.travel(NOW, tick=False):
        apps = apps_at(AFTER)
    Hour = apps.get_model("catalog", "EndpointSuccessHour")
    counted = {(r.endpoint_id, r.hour): r.succeeded for r in Hour.objects.all()}
    at = datetime(2026, 11, 28, tzinfo=UTC)
    assert counted == {
        (ids["a"], at.replace(hour=12)): 2,  # 12:34 and 12:28
        (ids["a"], at.replace(hour=9)): 1,  # 09:40
        (ids["a"], at.replace(day=27, hour=12)): 1,  # 12:10 the day before
        (ids["a"], at.replace(day=27, hour=11)): 1,  # 11:10: 25 hours before 12:00
        (ids["b"], at.replace(hour=11)): 1,  # 11:40
        # Not 10:46 the day before (before those 25 hours), nor 20:40 two days before.
    }


def test_after_the_migration_the_health_reads_what_it_counted_before(migrated_back):
    ids = deliveries_before(migrated_back)
    with time_machine.travel(NOW, tick=False):
        apps_at(AFTER)
    call_command("migrate", verbosity=0)
    from catalog.models import Team

    endpoints = {
        e.pk: e for e in selectors.endpoint_list(team=Team.objects.get(slug="analytics"), now=NOW)
    }
    # The window at 12:40 starts at 12:00 the day before: 12:34, 12:28, 09:40, 12:10
    # (not 11:10, in the hour of margin the backfill counts).
    assert (endpoints[ids["a"]].n_succeeded, endpoints[ids["a"]].n_dead_recent) == (4, 1)
    assert (endpoints[ids["b"]].n_succeeded, endpoints[ids["b"]].n_dead_recent) == (1, 1)
