"""An endpoint's health (GET /api/v1/endpoints, the team page) costs the same whatever its
throughput: successes come from its hourly counters (about 25 rows), the success rate
covers the same whole hours (from the start of the hour 24 hours ago), waiting
deliveries and dead letters are all counted, each from its own partial index."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog import selectors, success_counts
from catalog.models import Delivery, EndpointSuccessHour, Notification
from tests.catalog.factories import EndpointFactory, TeamFactory
from tests.web.helpers import dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook():
    return EndpointFactory(team=TeamFactory(slug="analytics"), url="https://hooks.example.com/a")


def month_of_successes(endpoint, count: int) -> None:
    """``count`` succeeded deliveries to ``endpoint``, finished over the last 30 days (the
    retention window of successes), oldest first, and counted per hour as the workers
    count them."""
    now = timezone.now()
    notifications = Notification.objects.bulk_create(
        Notification(type="partition.ready", dedup_key=f"ok-{n}", payload={}) for n in range(count)
    )
    deliveries = Delivery.objects.bulk_create(
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
    success_counts.successes_add(
        Counter((endpoint.pk, success_counts.hour_of(d.finished_at)) for d in deliveries)
    )


def ago(hours: float, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(hours=hours)


def test_successes_and_rate_cover_the_last_day_dead_letters_all_kept(hook):
    for n in range(3):
        dead_letter(hook, state="succeeded", n=n, finished_at=ago(1))
    for n in range(3, 8):
        dead_letter(hook, state="succeeded", n=n, finished_at=ago(30))  # a day before
    dead_letter(hook, n=0, finished_at=ago(2))
    dead_letter(hook, n=1, finished_at=ago(50))
    dead_letter(hook, state="pending", n=0)
    (endpoint,) = selectors.endpoint_list(team=hook.team)
    assert (endpoint.n_succeeded, endpoint.n_waiting) == (3, 1)
    assert (endpoint.n_dead_letters, endpoint.n_dead_recent) == (2, 1)


def test_api_reports_the_window(hook, client_for):
    for n in range(3):
        dead_letter(hook, state="succeeded", n=n, finished_at=ago(1))
    dead_letter(hook, state="succeeded", n=3, finished_at=ago(25))  # before its hour
    dead_letter(hook, n=0, finished_at=ago(3))
    dead_letter(hook, n=1, finished_at=ago(48))
    body = client_for(hook.team).get("/api/v1/endpoints").json()
    assert body["results"][0]["deliveries"] == {
        "succeeded": 3,
        "waiting": 0,
        "dead_letters": 2,
        "success_rate": 0.75,
    }


@pytest.mark.parametrize(
    ("now", "counted"),
    [
        # 24.5 h before 12:40 is 12:10 the day before: in the hour the window starts with.
        (datetime(2026, 11, 28, 12, 40, tzinfo=UTC), True),
        # 24.5 h before 12:20 is 11:50 the day before: the hour before the window.
        (datetime(2026, 11, 28, 12, 20, tzinfo=UTC), False),
    ],
)
def test_the_window_starts_on_the_hour_24_hours_before(hook, now, counted):
    """Whole hours, 24 to 25 of them: a success or a dead letter 24.5 hours old is in
    the window when it finished after the start of the hour 24 hours before now; both
    are judged alike, so the success rate compares the same hours."""
    assert success_counts.health_window_start(now) == datetime(2026, 11, 27, 12, tzinfo=UTC)
    dead_letter(hook, state="succeeded", finished_at=ago(24.5, now))
    dead_letter(hook, state="succeeded", n=1, finished_at=ago(0.1, now))
    dead_letter(hook, finished_at=ago(24.5, now))
    (endpoint,) = selectors.endpoint_list(team=hook.team, now=now)
    assert (endpoint.n_succeeded, endpoint.n_dead_recent) == (1 + counted, int(counted))


def test_successes_are_read_from_the_counters_not_the_deliveries(hook):
    """The counters are the health's successes: a succeeded delivery that no counter
    holds (written behind their back, as no write path does) is not counted."""
    dead_letter(hook, state="succeeded", finished_at=ago(1))
    month_of_successes(hook, 1)  # counted, a month ago
    Delivery.objects.filter(endpoint=hook, finished_at__lt=ago(24)).update(finished_at=ago(2))
    (endpoint,) = selectors.endpoint_list(team=hook.team)
    assert endpoint.n_succeeded == 1


def test_counts_read_index_ranges_never_the_deliveries_of_the_day(hook):
    """The plan of the list: successes are a range of the counters' unique index on
    (endpoint, hour); waiting deliveries and dead letters a range of their partial
    indexes; never a join of the endpoints to their deliveries, nor the day's successes.
    Sequential scans are off so that the plan shows which indexes the query can use at
    any table size (a test table is small)."""
    for n in range(20):
        dead_letter(hook, state="succeeded", n=n)
    month_of_successes(hook, 3000)  # what the retention window keeps, mostly before the day
    # The counters of everyone's endpoints share the table: the hours of the day are a
    # range of the hour index too, but one holding every endpoint's (the plan must not
    # read 25 rows per endpoint of the installation for each endpoint listed).
    hour = success_counts.hour_of(timezone.now())
    EndpointSuccessHour.objects.bulk_create(
        EndpointSuccessHour(endpoint=endpoint, hour=hour - timedelta(hours=h), succeeded=9)
        for endpoint in EndpointFactory.create_batch(30)
        for h in range(24 * 30)
    )
    queryset = selectors.endpoint_list(team=hook.team)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_delivery")
        cursor.execute("ANALYZE catalog_endpointsuccesshour")
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = queryset.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    # Waiting: either partial index of due deliveries (both hold only the backlog).
    for index in ("uniq_endpoint_success_hour", "delivery_due", "delivery_dead_letter"):
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
