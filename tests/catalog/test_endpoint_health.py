"""An endpoint's health (GET /api/v1/endpoints, the team page) costs a day of its
deliveries, not its history: successes and the success rate cover the last 24 hours,
waiting deliveries and dead letters are all counted, each from its own partial index."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog import selectors
from catalog.models import Delivery, Notification
from tests.catalog.factories import EndpointFactory, TeamFactory
from tests.web.helpers import dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook():
    return EndpointFactory(team=TeamFactory(slug="analytics"), url="https://hooks.example.com/a")


def month_of_successes(endpoint, count: int) -> None:
    """``count`` succeeded deliveries to ``endpoint``, finished over the last 30 days (the
    retention window of successes), oldest first."""
    now = timezone.now()
    notifications = Notification.objects.bulk_create(
        Notification(type="partition.ready", dedup_key=f"ok-{n}", payload={}) for n in range(count)
    )
    Delivery.objects.bulk_create(
        Delivery(
            notification=notification,
            endpoint=endpoint,
            state="succeeded",
            attempts=1,
            next_attempt_at=now,
            finished_at=now - timedelta(days=30) * (count - n) / count,
        )
        for n, notification in enumerate(notifications)
    )


def finished(delivery: Delivery, hours_ago: float) -> None:
    at = timezone.now() - timedelta(hours=hours_ago)
    Delivery.objects.filter(pk=delivery.pk).update(finished_at=at, created_at=at)


def test_successes_and_rate_cover_the_last_day_dead_letters_all_kept(hook):
    for n in range(3):
        finished(dead_letter(hook, state="succeeded", n=n), hours_ago=1)
    for n in range(3, 8):
        finished(dead_letter(hook, state="succeeded", n=n), hours_ago=30)  # a day before
    finished(dead_letter(hook, n=0), hours_ago=2)
    finished(dead_letter(hook, n=1), hours_ago=50)
    dead_letter(hook, state="pending", n=0)
    (endpoint,) = selectors.endpoint_list(team=hook.team)
    assert (endpoint.n_succeeded, endpoint.n_waiting) == (3, 1)
    assert (endpoint.n_dead_letters, endpoint.n_dead_recent) == (2, 1)


def test_api_reports_the_window(hook, client_for):
    for n in range(3):
        finished(dead_letter(hook, state="succeeded", n=n), hours_ago=1)
    finished(dead_letter(hook, state="succeeded", n=3), hours_ago=25)
    finished(dead_letter(hook, n=0), hours_ago=3)
    finished(dead_letter(hook, n=1), hours_ago=48)
    body = client_for(hook.team).get("/api/v1/endpoints").json()
    assert body["results"][0]["deliveries"] == {
        "succeeded": 3,
        "waiting": 0,
        "dead_letters": 2,
        "success_rate": 0.75,
    }


def test_counts_read_partial_index_ranges_never_every_delivery(hook):
    """The plan of the list: each count is a range of a partial index on the endpoint
    (a day of successes, the waiting ones, the dead letters), not a join of every
    delivery the endpoint ever had. Sequential scans are off so that the plan shows
    which indexes the query can use at any table size (a test table is small)."""
    for n in range(20):
        dead_letter(hook, state="succeeded", n=n)
    month_of_successes(hook, 3000)  # what the retention window keeps, mostly before the day
    queryset = selectors.endpoint_list(team=hook.team)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_delivery")
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = queryset.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    # Waiting: either partial index of due deliveries (both hold only the backlog).
    for index in ("delivery_succeeded_by_endpoint", "delivery_due", "delivery_dead_letter"):
        # An index scan reads "using <index>", a bitmap index scan "Scan on <index>".
        assert f"using {index}" in plan or f"Index Scan on {index}" in plan, plan
    assert "Join" not in plan, plan  # no join of the endpoints to their deliveries


def test_newest_dead_letters_of_the_team(hook, django_assert_num_queries):
    other = EndpointFactory(team=hook.team, url="https://hooks.example.com/b")
    elsewhere = EndpointFactory(team=TeamFactory(slug="orders"), url="https://h.example.com/o")
    made = [dead_letter(hook if n % 2 else other, n=n) for n in range(12)]
    dead_letter(elsewhere, n=99)
    dead_letter(hook, state="succeeded", n=99)
    with django_assert_num_queries(2):  # the ids (a range per endpoint), the rows picked
        newest = selectors.dead_letter_newest(team=hook.team, limit=5)
        assert [d.notification.type for d in newest] == ["partition.ready"] * 5
    assert [d.pk for d in newest] == [d.pk for d in reversed(made)][:5]


def test_newest_dead_letters_read_a_range_of_the_index_per_endpoint(hook):
    """Each endpoint's newest ids come from a backward range of
    ``delivery_dead_letter_by_id`` under a LIMIT: never every dead letter the retention
    window keeps joined to its notification, nor a walk back through every delivery. What
    is sorted is at most ``limit`` ids per endpoint."""
    for n in range(30):
        dead_letter(hook, n=n)
    month_of_successes(hook, 3000)  # after them, as the retention window keeps
    with CaptureQueriesContext(connection) as queries:
        selectors.dead_letter_newest(team=hook.team, limit=5)
    ranges = [q["sql"] for q in queries if "ORDER BY" in q["sql"] and "LIMIT 5" in q["sql"]]
    assert len(ranges) == 1, [q["sql"] for q in queries]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_delivery")
        cursor.execute("EXPLAIN " + ranges[0])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Backward using delivery_dead_letter_by_id" in plan, plan
    assert "Seq Scan on catalog_delivery" not in plan, plan
    # The only sort is of the ranges' ids, above the per-endpoint LIMIT.
    assert plan.index("Sort") < plan.index("Nested Loop") < plan.rindex("Limit"), plan
