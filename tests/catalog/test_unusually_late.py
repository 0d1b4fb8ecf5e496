"""Later than usual on real PostgreSQL: a dataset without an SLA whose partition is much
later than its arrival profile says is told once, to its owner and to the subscribers
that opted in, at the instant the rule gives, and never reaches the watchdog."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import notices, tasks, unusually_late
from catalog.actors import Actor
from catalog.models import Dataset, Delivery, Endpoint, LatePartition, Notification
from catalog.services.datasets import dataset_register, dataset_update
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

REGISTERED = datetime(2026, 9, 30, 12, tzinfo=UTC)
UNUSUAL = Notification.Type.DATASET_UNUSUALLY_LATE


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def owner():
    return TeamFactory(slug="orders", contact_email="orders-people@example.com")


def register(owner, **fields):
    with time_machine.travel(REGISTERED, tick=False):
        return dataset_register(
            actor=Actor(team=owner, username="t"),
            namespace="s3://lake",
            name="raw/orders",
            partitioning="daily",
            **fields,
        )


def publish(owner, key, at):
    result = readiness_publish(
        actor=Actor(team=owner), namespace="s3://lake", name="raw/orders", partition=key, now=at
    )
    assert result.status_code in (200, 201)


def history(owner, days, *, first="2026-10-01"):
    """``days`` daily partitions from ``first``, each ready at 05:00 after its period.

    Every group then has p50 = p90 = p99 = 5 h, so a partition is later than usual at
    05:30 (the minimum margin, 30 min)."""
    start = datetime.fromisoformat(first).replace(tzinfo=UTC)
    for n in range(days):
        day = start + timedelta(days=n)
        publish(owner, day.date().isoformat(), day + timedelta(days=1, hours=5))


def check(at):
    return unusually_late.check_batch(now=at)


def told():
    return list(Notification.objects.filter(type=UNUSUAL).order_by("created_at"))


def endpoints_told(notification):
    return set(
        Delivery.objects.filter(notification=notification).values_list("endpoint__url", flat=True)
    )


def test_registration_without_sla_asks_for_a_plan_and_with_sla_does_not(owner):
    dataset = register(owner)
    assert (dataset.next_unusual_check_at, dataset.unusual_check_key) == (REGISTERED, "")
    with_sla = dataset_register(
        actor=Actor(team=owner, username="t"),
        namespace="s3://lake",
        name="raw/with_sla",
        partitioning="daily",
        sla_cron="0 6 * * *",
    )
    assert with_sla.next_unusual_check_at is None


def test_told_once_at_the_instant_the_rule_gives(owner):
    dataset = register(owner)
    opted_in = SubscriptionFactory(
        dataset=dataset, event_types=["dataset.unusually_late"], endpoint__url="https://in/1"
    )
    SubscriptionFactory(dataset=dataset, event_types=[], endpoint__url="https://all/2")
    SubscriptionFactory(
        dataset=dataset,
        event_types=["dataset.late", "partition.ready"],
        endpoint__url="https://l/3",
    )
    history(owner, 21)  # 2026-10-01 .. 10-21, the last ready at 10-22 05:00
    # The first pass plans: 10-21 is in, so 10-22 is watched, later than usual at 10-23 05:30.
    assert check(utc(2026, 10, 22, 6)).checked == 1
    dataset.refresh_from_db()
    assert dataset.unusual_check_key == "2026-10-22"
    assert dataset.next_unusual_check_at == utc(2026, 10, 23, 5, 30)

    assert check(utc(2026, 10, 23, 5, 29, 59)).checked == 0
    assert told() == []
    result = check(utc(2026, 10, 23, 5, 30))
    assert [r.partition for r in result.told] == ["2026-10-22"]
    [notice] = told()
    data = notice.payload["data"]
    assert data["partition"] == "2026-10-22"
    assert data["expected_by"] == "2026-10-23T05:30:00Z"
    assert data["late_seconds"] == 0
    assert data["usual"] == {
        "group": "business_days",  # 3 Thursdays: too few for the weekday's own quantiles
        "periods": 15,
        "p50_seconds": 18000,
        "p90_seconds": 18000,
        "p99_seconds": 18000,
        "after_seconds": 19800,
    }
    assert data["profile_periods"] == 21
    # The owner's people and the opted-in subscriber; not the subscriptions that did not
    # list the type, even the one that asked for "every type".
    assert endpoints_told(notice) == {"mailto:orders-people@example.com", opted_in.endpoint.url}

    # Judged once: the next pass moves on to 10-23 and tells nothing more.
    dataset.refresh_from_db()
    assert (dataset.unusual_check_key, dataset.next_unusual_check_at) == (
        "2026-10-23",
        utc(2026, 10, 24, 5, 30),
    )
    assert check(utc(2026, 10, 23, 5, 31)).checked == 0
    # The partition lands late: nobody is told anything more.
    publish(owner, "2026-10-22", utc(2026, 10, 23, 7))
    publish(owner, "2026-10-23", utc(2026, 10, 24, 5))
    assert check(utc(2026, 10, 24, 5, 30)).told == []
    assert len(told()) == 1
    assert Notification.objects.filter(type=Notification.Type.DATASET_RECOVERED).count() == 0


def test_a_partition_ready_exactly_at_its_usual_limit_is_on_time(owner):
    register(owner)
    history(owner, 21)
    check(utc(2026, 10, 22, 6))
    publish(owner, "2026-10-22", utc(2026, 10, 23, 5, 30))
    assert check(utc(2026, 10, 23, 5, 30)).told == []
    assert told() == []


def test_a_dataset_with_an_sla_is_never_judged_against_its_usual_time(owner):
    dataset = register(owner, sla_cron="0 9 * * *")
    history(owner, 21)
    assert check(utc(2026, 10, 25)).checked == 0
    assert told() == []
    # Removing the SLA starts watching; setting one again stops it.
    with time_machine.travel(utc(2026, 10, 22, 6), tick=False):
        dataset_update(actor=Actor(team=owner, username="t"), dataset=dataset, sla_cron="")
    dataset.refresh_from_db()
    assert dataset.next_unusual_check_at == utc(2026, 10, 22, 6)
    check(utc(2026, 10, 22, 6))
    with time_machine.travel(utc(2026, 10, 22, 7), tick=False):
        dataset_update(actor=Actor(team=owner, username="t"), dataset=dataset, sla_cron="0 9 * * *")
    dataset.refresh_from_db()
    assert dataset.next_unusual_check_at is None
    assert check(utc(2026, 10, 25)).told == []


def test_below_the_minimum_history_nothing_is_told(owner, settings):
    settings.TIDEMARK_UNUSUALLY_LATE_MIN_PERIODS = 14
    dataset = register(owner)
    history(owner, 13)  # 10-01 .. 10-13
    check(utc(2026, 10, 14, 6))
    dataset.refresh_from_db()
    # Planned again when the current period ends, by when one more may have arrived.
    assert (dataset.unusual_check_key, dataset.next_unusual_check_at) == ("", utc(2026, 10, 15))
    assert check(utc(2026, 10, 15, 12)).told == []  # 10-14 never came: still 13 arrivals
    assert told() == []
    # The 14th arrival makes the history long enough.
    publish(owner, "2026-10-14", utc(2026, 10, 15, 13))
    check(utc(2026, 10, 16))
    dataset.refresh_from_db()
    # 10-15 is not yet past its usual time at midnight: it is the first one watched.
    # 10-14 came at 13:00, the latest of 14 arrivals: p99, so later than usual is 13:00.
    assert (dataset.unusual_check_key, dataset.next_unusual_check_at) == (
        "2026-10-15",
        utc(2026, 10, 16, 13),
    )


def test_nothing_reaches_the_watchdog(owner):
    dataset = register(owner, criticality="critical")
    history(owner, 21)
    before = Delivery.objects.filter(endpoint__kind=Endpoint.Kind.WATCHDOG).count()
    check(utc(2026, 10, 22, 6))
    assert [r.partition for r in check(utc(2026, 10, 23, 6)).told] == ["2026-10-22"]
    assert Delivery.objects.filter(endpoint__kind=Endpoint.Kind.WATCHDOG).count() == before
    assert not LatePartition.objects.filter(dataset=dataset).exists()
    [notice] = told()
    kinds = set(
        Delivery.objects.filter(notification=notice).values_list("endpoint__kind", flat=True)
    )
    assert kinds == {Endpoint.Kind.EMAIL}


def test_an_empty_filter_does_not_catch_up_on_it_and_a_listed_one_does(owner):
    dataset = register(owner)
    history(owner, 21)
    check(utc(2026, 10, 22, 6))
    check(utc(2026, 10, 23, 6))
    consumer = TeamFactory(slug="finance")
    with time_machine.travel(utc(2026, 10, 23, 7), tick=False):
        for url, types in (
            ("https://all.example.com/h", []),
            ("https://in.example.com/h", [UNUSUAL]),
        ):
            subscription_create(
                actor=Actor(team=consumer, username="c"),
                dataset=dataset,
                job_name=url.split("//")[1],
                job_namespace="finance",
                endpoint_url=url,
                event_types=types,
                since=utc(2026, 10, 23),
            )
    [notice] = told()
    assert endpoints_told(notice) == {
        "mailto:orders-people@example.com",
        "https://in.example.com/h",
    }


def test_the_pass_task_runs_single_flight_and_returns_what_it_told(owner):
    register(owner)
    history(owner, 21)
    with time_machine.travel(utc(2026, 10, 22, 6), tick=False):
        assert tasks.check_unusually_late() == 0
    with time_machine.travel(utc(2026, 10, 23, 6), tick=False):
        assert tasks.check_unusually_late() == 1
        assert tasks.check_unusually_late() == 0
    assert len(told()) == 1


def test_an_idle_pass_is_one_indexed_query(owner):
    register(owner)
    Dataset.objects.bulk_create(
        Dataset(
            namespace="s3://lake",
            name=f"raw/idle_{n}",
            owner=owner,
            badge_token=f"idle-{n}",
            next_unusual_check_at=utc(2026, 12, 1),
        )
        for n in range(500)
    )
    check(utc(2026, 10, 1))  # the registered one: planned later (no history)
    with CaptureQueriesContext(connection) as queries:
        assert check(utc(2026, 10, 1, 12)).checked == 0
    # One statement besides the batch's savepoint (the test's transaction wraps it).
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 1
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_dataset")
        cursor.execute("EXPLAIN " + statements[0])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "dataset_next_unusual_check" in plan, plan


def test_the_owner_notice_says_what_is_usual_and_that_nobody_was_paged(owner):
    register(owner)
    history(owner, 21)
    check(utc(2026, 10, 22, 6))
    check(utc(2026, 10, 23, 6))
    [notice] = told()
    subject, text = notices.render_text(notice.payload)
    assert subject == "Tidemark: s3://lake/raw/orders partition 2026-10-22 is later than usual"
    assert "not ready by 2026-10-23T05:30:00Z" in text
    assert "usually ready 5 h 00 min after its period ended" in text
    assert "nobody was paged" in text


def test_beat_runs_the_pass_every_minute_on_the_freshness_queue(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["check-unusually-late"]
    assert (entry["task"], entry["schedule"]) == (tasks.CHECK_UNUSUALLY_LATE, 60.0)
    assert settings.CELERY_TASK_ROUTES[tasks.CHECK_UNUSUALLY_LATE] == {"queue": "freshness"}


def test_a_stored_key_of_another_partitioning_is_planned_afresh(owner):
    dataset = register(owner)
    history(owner, 21)
    Dataset.objects.filter(pk=dataset.pk).update(
        unusual_check_key="2026-10-22T05", next_unusual_check_at=utc(2026, 10, 22, 6)
    )
    assert check(utc(2026, 10, 22, 6)).told == []
    dataset.refresh_from_db()
    assert (dataset.unusual_check_key, dataset.next_unusual_check_at) == (
        "2026-10-22",
        utc(2026, 10, 23, 5, 30),
    )
