"""Consumer need-by times judged in the freshness pass, on real PostgreSQL with the clock
moved by time-machine: a subscription is told ``dataset.late`` at its own need-by, alone,
once per partition, never twice when the SLA later finds the same partition late, and
nobody is paged or told before the producer's SLA."""

from datetime import UTC, datetime

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import freshness, need_by_judging, tasks
from catalog.actors import Actor
from catalog.models import Dataset, Delivery, LatePartition, Notification, Subscription
from catalog.services.datasets import dataset_register
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import TeamFactory

pytestmark = pytest.mark.django_db


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def owner():
    return TeamFactory(slug="orders", contact_email="orders-oncall@example.com")


@pytest.fixture
def dataset(owner):
    # Daily partitions promised by 09:00 UTC the next day, late after 30 minutes' grace.
    with time_machine.travel(utc(2026, 11, 28, 12), tick=False):
        return dataset_register(
            actor=Actor(team=owner, username="t"),
            namespace="s3://lake",
            name="raw/orders",
            sla_cron="0 9 * * *",
            sla_grace_seconds=1800,
        )


def subscribe(dataset, slug, need_by_cron="", **more):
    team = TeamFactory(slug=slug)
    return subscription_create(
        actor=Actor(team=team),
        dataset=dataset,
        endpoint_url=f"https://hooks.example.com/{slug}",
        need_by_cron=need_by_cron,
        now=utc(2026, 11, 28, 12),
        **more,
    ).subscription


def run_pass(at):
    """The freshness pass as beat runs it, with the clock at ``at``."""
    with time_machine.travel(at, tick=False):
        return tasks.evaluate_freshness()


def publish(owner, partition, at):
    readiness_publish(
        actor=Actor(team=owner),
        namespace="s3://lake",
        name="raw/orders",
        partition=partition,
        now=at,
    )


def told(type, partition):
    """``{endpoint url: [judged_at, ...]}`` of the ``type`` notices about ``partition``."""
    found: dict[str, list] = {}
    for delivery in Delivery.objects.filter(
        notification__type=type, notification__payload__data__partition=partition
    ).select_related("endpoint", "notification"):
        found.setdefault(delivery.endpoint.url, []).append(
            delivery.notification.payload["data"].get("judged_at")
        )
    return found


EARLY = "https://hooks.example.com/early"
PLAIN = "https://hooks.example.com/plain"
LATER = "https://hooks.example.com/later"
OWNER = "mailto:orders-oncall@example.com"


def test_a_consumer_is_told_late_at_its_need_by_alone_and_once(owner, dataset):
    early = subscribe(dataset, "early", "0 6 * * *")
    subscribe(dataset, "plain")
    subscribe(dataset, "later", "0 10 * * *")

    assert run_pass(utc(2026, 11, 29, 5, 59)) == 0
    assert run_pass(utc(2026, 11, 29, 6, 0, 30)) == 1
    assert told("dataset.late", "2026-11-28") == {EARLY: ["need_by"]}
    notice = Notification.objects.get(type="dataset.late")
    data = notice.payload["data"]
    assert (data["deadline_at"], data["late_at"]) == (
        "2026-11-29T06:00:00Z",
        "2026-11-29T06:00:00Z",
    )
    assert (data["late_seconds"], data["subscription_id"]) == (30, early.pk)
    assert not LatePartition.objects.exists()  # the producer's SLA has not passed
    assert run_pass(utc(2026, 11, 29, 6, 1)) == 0  # once per (subscription, partition)
    Subscription.objects.filter(pk=early.pk).update(need_by_next_at=utc(2026, 11, 29, 6))
    assert run_pass(utc(2026, 11, 29, 6, 2)) == 0  # judged again (a crash): told once

    # The SLA passes: everyone else and the owner are told, the early consumer not again.
    assert run_pass(utc(2026, 11, 29, 9, 30, 5)) == 1
    assert told("dataset.late", "2026-11-28") == {
        EARLY: ["need_by"],
        PLAIN: ["sla"],
        LATER: ["sla"],
        OWNER: ["sla"],
    }
    # The later consumer's need-by finds the SLA's incident: nothing more.
    assert run_pass(utc(2026, 11, 29, 10, 0, 5)) == 0
    assert Notification.objects.filter(type="dataset.late").count() == 2

    publish(owner, "2026-11-28", utc(2026, 11, 29, 10, 30))
    assert set(told("dataset.recovered", "2026-11-28")) == {EARLY, PLAIN, LATER, OWNER}


def test_a_partition_landing_between_need_by_and_sla_pages_and_tells_nobody_else(owner, dataset):
    subscribe(dataset, "early", "0 6 * * *")
    subscribe(dataset, "plain")
    assert run_pass(utc(2026, 11, 29, 6, 0, 5)) == 1
    publish(owner, "2026-11-28", utc(2026, 11, 29, 7))
    assert run_pass(utc(2026, 11, 29, 9, 31)) == 0
    assert told("dataset.late", "2026-11-28") == {EARLY: ["need_by"]}
    assert not LatePartition.objects.exists()
    # The rules as they were: every subscriber learns the arrival from partition.ready.
    assert set(told("partition.ready", "2026-11-28")) == {EARLY, PLAIN}
    assert not Notification.objects.filter(type__startswith="watchdog.").exists()


def test_a_need_by_after_the_sla_adds_nothing(owner, dataset):
    subscribe(dataset, "later", "0 10 * * *")
    assert run_pass(utc(2026, 11, 29, 9, 31)) == 1  # the SLA's
    assert run_pass(utc(2026, 11, 29, 10, 1)) == 0
    assert told("dataset.late", "2026-11-28") == {LATER: ["sla"], OWNER: ["sla"]}


def test_a_need_by_judges_every_period_since_its_previous_firing(owner, dataset):
    # A weekday need-by: Monday's covers Friday's, Saturday's and Sunday's partitions. The
    # dataset has no SLA here: a need-by is judged without one.
    Dataset.objects.filter(pk=dataset.pk).update(
        sla_cron="", next_deadline_at=None, next_check_at=None
    )
    dataset.refresh_from_db()
    with time_machine.travel(utc(2026, 12, 4, 12), tick=False):
        subscription = subscribe(dataset, "weekdays", "0 7 * * MON-FRI")
    Subscription.objects.filter(pk=subscription.pk).update(need_by_next_at=utc(2026, 12, 7, 7))
    for day in (4, 5):
        publish(owner, f"2026-12-0{day}", utc(2026, 12, 6, 1))
    assert run_pass(utc(2026, 12, 7, 7, 0, 5)) == 1
    assert set(told("dataset.late", "2026-12-06")) == {"https://hooks.example.com/weekdays"}
    assert Notification.objects.filter(type="dataset.late").count() == 1


def test_filters_that_refuse_dataset_late_tell_nothing_and_move_on(owner, dataset):
    refusing = subscribe(dataset, "ready-only", "0 6 * * *", event_types=["partition.ready"])
    elsewhere = subscribe(dataset, "december", "0 6 * * *", partition_pattern="2026-12-*")
    assert run_pass(utc(2026, 11, 29, 6, 1)) == 0
    assert not Notification.objects.filter(type="dataset.late").exists()
    for subscription in (refusing, elsewhere):
        subscription.refresh_from_db()
        assert subscription.need_by_next_at == utc(2026, 11, 30, 6)


def test_judging_continues_in_bounded_batches_while_work_remains(owner, dataset):
    subscriptions = [subscribe(dataset, f"team-{n}", "0 6 * * *") for n in range(7)]
    summary = freshness.evaluate_pass(clock=lambda: utc(2026, 11, 29, 6, 1), limit=3)
    assert summary.handled == 7
    assert Notification.objects.filter(type="dataset.late").count() == 7
    assert not Subscription.objects.filter(
        pk__in=[s.pk for s in subscriptions], need_by_next_at__lte=utc(2026, 11, 29, 6, 1)
    ).exists()


def test_a_new_subscriber_catching_up_is_not_given_another_teams_need_by_lateness(owner, dataset):
    subscribe(dataset, "early", "0 6 * * *")
    run_pass(utc(2026, 11, 29, 6, 1))
    team = TeamFactory(slug="newcomer")
    subscription_create(
        actor=Actor(team=team),
        dataset=dataset,
        endpoint_url="https://hooks.example.com/newcomer",
        since=utc(2026, 11, 29),
        now=utc(2026, 11, 29, 7),
    )
    assert told("dataset.late", "2026-11-28") == {EARLY: ["need_by"]}


def test_told_endpoints_names_only_need_by_notices(owner, dataset):
    subscribe(dataset, "early", "0 6 * * *")
    run_pass(utc(2026, 11, 29, 6, 1))
    early_endpoint = Subscription.objects.get(team__slug="early").endpoint_id
    asked = {(dataset.pk, "2026-11-28"), (dataset.pk, "2026-11-27")}
    assert need_by_judging.told_endpoints(asked) == {(dataset.pk, "2026-11-28"): {early_endpoint}}
    assert need_by_judging.told_endpoints(set()) == {}


@pytest.mark.parametrize("count", [3, 30])
def test_the_sla_asks_who_was_told_at_a_need_by_once_per_batch(owner, count):
    """Skipping the endpoints told at a need-by costs one query per batch of the SLA
    evaluation, however many datasets are late at a shared deadline."""
    actor = Actor(team=owner, username="t")
    with time_machine.travel(utc(2026, 11, 28, 12), tick=False):
        for n in range(count):
            dataset_register(
                actor=actor, namespace="s3://lake", name=f"raw/t{n:03}", sla_cron="0 9 * * *"
            )
    with CaptureQueriesContext(connection) as queries:
        reports = freshness.evaluate_due(now=utc(2026, 11, 29, 9, 1))
    asked = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and "judged_at" in q["sql"]]
    assert len(asked) == 1, asked
    assert len(reports) == count


def test_who_was_told_reads_late_notices_alone(owner, dataset):
    """The batch's question reads the datasets' late notices through their partial index,
    not every notification they had (90 days of partition.ready are kept). Sequential
    scans are off so that the plan shows what the query can use at any table size."""
    subscribe(dataset, "early", "0 6 * * *")
    run_pass(utc(2026, 11, 29, 6, 1))
    Notification.objects.bulk_create(
        Notification(
            type=Notification.Type.PARTITION_READY,
            dataset=dataset,
            dedup_key=f"history-{n}",
            payload={"type": "partition.ready", "data": {"partition": f"h{n}"}},
        )
        for n in range(2000)
    )
    asked = {(dataset.pk, "2026-11-28")}
    with CaptureQueriesContext(connection) as queries:
        need_by_judging.told_endpoints(asked)
    (sql,) = [q["sql"] for q in queries]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_notification")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "notification_late_by_dataset" in plan, plan
