"""SLA deadlines judged on real PostgreSQL, with the evaluation's clock passed in and the
request clock moved by time-machine."""

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from catalog import freshness, freshness_state, restatements, tasks
from catalog.actors import Actor
from catalog.models import (
    Dataset,
    Delivery,
    LatePartition,
    Notification,
    Partition,
    PartitionRevision,
)
from catalog.services.datasets import dataset_register, dataset_update
from catalog.services.publishing import readiness_publish
from tests.catalog.factories import EndpointFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

THREAD_TIMEOUT = 60  # seconds a thread may take before the test calls it a hang


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def owner():
    return TeamFactory(slug="orders", contact_email="orders-oncall@example.com")


def register(owner, at, **sla):
    with time_machine.travel(at, tick=False):
        return dataset_register(
            actor=Actor(team=owner, username="t"), namespace="s3://lake", name="raw/orders", **sla
        )


def publish(owner, partition, at, **kwargs):
    return readiness_publish(
        actor=Actor(team=owner),
        namespace="s3://lake",
        name="raw/orders",
        partition=partition,
        now=at,
        **kwargs,
    )


def open_incident(dataset, key, late_at):
    """A late incident opened as a lost race leaves it: after its partition arrived."""
    return LatePartition.objects.create(
        dataset=dataset, partition_key=key, deadline_at=late_at, late_at=late_at
    )


def open_keys():
    return set(
        LatePartition.objects.filter(recovered_at__isnull=True).values_list(
            "partition_key", flat=True
        )
    )


def recovered_keys():
    return sorted(
        n.payload["data"]["partition"]
        for n in Notification.objects.filter(type=Notification.Type.DATASET_RECOVERED)
    )


def test_registration_schedules_the_first_deadline(owner):
    dataset = register(
        owner,
        utc(2026, 11, 28, 12),
        sla_cron="30 6 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=1800,
    )
    assert dataset.next_deadline_at == utc(2026, 11, 29, 5, 30)
    assert dataset.next_check_at == utc(2026, 11, 29, 6, 0)


def test_missing_partition_is_late_once_then_recovered_once(owner):
    dataset = register(
        owner,
        utc(2026, 11, 28, 12),
        sla_cron="30 6 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=1800,
    )
    subscriber = SubscriptionFactory(dataset=dataset)
    assert freshness.evaluate_due(now=utc(2026, 11, 29, 5, 45)) == []  # inside grace
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 5, 45)).state == "due"

    [late] = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 1))
    assert (late.partition, late.deadline_at) == ("2026-11-28", utc(2026, 11, 29, 5, 30))
    assert freshness.evaluate_due(now=utc(2026, 11, 29, 6, 2)) == []  # told once
    state = freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 7, 0))
    assert (state.state, state.partition_due, state.late_seconds) == ("late", "2026-11-28", 3600)

    notice = Notification.objects.get(type="dataset.late")
    assert notice.payload["data"]["partition"] == "2026-11-28"
    targets = set(
        Delivery.objects.filter(notification=notice).values_list("endpoint__url", flat=True)
    )
    assert targets == {subscriber.endpoint.url, "mailto:orders-oncall@example.com"}

    publish(owner, "2026-11-28", utc(2026, 11, 29, 7, 0))
    publish(owner, "2026-11-28", utc(2026, 11, 29, 7, 5))  # a repeat recovers nothing twice
    recovered = Notification.objects.get(type="dataset.recovered")
    assert recovered.payload["data"]["late_by_seconds"] == 3600
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 8)).state == "fresh"


def test_partition_arriving_in_grace_is_never_late(owner):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *", sla_grace_seconds=3600)
    publish(owner, "2026-11-28", utc(2026, 11, 29, 6, 30))
    assert freshness.evaluate_due(now=utc(2026, 11, 29, 7, 1)) == []
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 7, 1)).state == "fresh"
    assert not Notification.objects.filter(type="dataset.late").exists()


def test_backfilling_an_old_partition_does_not_make_a_late_one_fresh(owner):
    dataset = register(owner, utc(2026, 11, 27, 12), sla_cron="0 6 * * *")
    freshness.evaluate_due(now=utc(2026, 11, 29, 6, 1))  # 2026-11-27 and 2026-11-28 both late
    assert set(LatePartition.objects.values_list("partition_key", flat=True)) == {
        "2026-11-27",
        "2026-11-28",
    }
    publish(owner, "2026-11-27", utc(2026, 11, 29, 6, 30))
    state = freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 7))
    assert (state.state, state.partition_due) == ("late", "2026-11-28")


def test_late_across_spring_forward_in_berlin(owner):
    """02:30 does not exist on 2026-03-29 in Berlin: that day's deadline is 03:00 CEST."""
    register(owner, utc(2026, 3, 28, 12), sla_cron="30 2 * * *", sla_timezone="Europe/Berlin")
    assert freshness.evaluate_due(now=utc(2026, 3, 29, 0, 59)) == []
    [late] = freshness.evaluate_due(now=utc(2026, 3, 29, 1, 0))
    assert (late.partition, late.deadline_at) == ("2026-03-28", utc(2026, 3, 29, 1, 0))
    assert Dataset.objects.get().next_deadline_at == utc(2026, 3, 30, 0, 30)


def test_late_across_fall_back_is_judged_once(owner):
    """01:30 happens twice in New York on 2026-11-01; the deadline is the first."""
    register(owner, utc(2026, 10, 31, 12), sla_cron="30 1 * * *", sla_timezone="America/New_York")
    reports = freshness.evaluate_due(now=utc(2026, 11, 1, 7))  # after both 01:30s
    assert [(r.partition, r.deadline_at) for r in reports] == [
        ("2026-10-31", utc(2026, 11, 1, 5, 30))
    ]
    assert Dataset.objects.get().next_deadline_at == utc(2026, 11, 2, 6, 30)


def test_late_in_a_zone_east_of_utc_with_local_partitions(owner):
    register(
        owner,
        utc(2026, 11, 28, 0),
        sla_cron="0 7 * * *",
        sla_timezone="Asia/Tokyo",
        partition_timezone="Asia/Tokyo",
    )
    [late] = freshness.evaluate_due(now=utc(2026, 11, 28, 22, 0, 1))  # 07:00 JST on the 29th
    assert (late.partition, late.deadline_at) == ("2026-11-28", utc(2026, 11, 28, 22))


def test_weekday_sla_judges_the_weekend_on_monday(owner):
    # registered after Friday's 08:00 deadline: the first one judged is Monday's
    register(owner, utc(2026, 11, 27, 14), sla_cron="0 8 * * 1-5", sla_timezone="America/New_York")
    publish(owner, "2026-11-27", utc(2026, 11, 28, 1))
    reports = freshness.evaluate_due(now=utc(2026, 11, 30, 14))
    assert sorted(r.partition for r in reports) == ["2026-11-28", "2026-11-29"]


def test_two_evaluations_at_once_tell_once(owner):
    register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *")
    first = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 1))
    Dataset.objects.update(
        next_deadline_at=utc(2026, 11, 29, 6), next_check_at=utc(2026, 11, 29, 6)
    )
    second = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 2))  # as if a second beat replayed it
    assert len(first) == 1 and second == []
    assert Notification.objects.filter(type="dataset.late").count() == 1


def test_sla_change_reschedules_and_is_audited(owner):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *")
    with time_machine.travel(utc(2026, 11, 28, 13), tick=False):
        dataset = dataset_update(
            actor=Actor(team=owner, username="t"), dataset=dataset, sla_cron="0 9 * * *"
        )
    assert dataset.next_deadline_at == utc(2026, 11, 29, 9)


@pytest.mark.parametrize(
    "change",
    [
        {"sla_grace_seconds": 1800},  # a shorter grace: 06:00 is late at 06:30
        {"sla_cron": "5 6 * * *"},  # a deadline moved by five minutes
        {"sla_timezone": "UTC", "sla_grace_seconds": 2400},  # same zone named again
    ],
    ids=["grace", "cron", "zone-and-grace"],
)
def test_sla_change_inside_a_grace_period_still_judges_that_deadline(owner, change):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *", sla_grace_seconds=3600)
    with time_machine.travel(utc(2026, 11, 29, 6, 20), tick=False):  # 06:00 in its grace
        dataset = dataset_update(actor=Actor(team=owner, username="t"), dataset=dataset, **change)
    assert dataset.next_deadline_at <= utc(2026, 11, 29, 6, 5)

    [late] = freshness.evaluate_due(now=utc(2026, 11, 29, 7, 6))
    assert late.partition == "2026-11-28"
    assert Notification.objects.filter(type="dataset.late").count() == 1
    assert freshness.evaluate_due(now=utc(2026, 11, 30, 7, 6))[0].partition == "2026-11-29"


def test_sla_change_after_a_judged_deadline_does_not_judge_it_again(owner):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *", sla_grace_seconds=600)
    [late] = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 11))
    assert late.partition == "2026-11-28"
    with time_machine.travel(utc(2026, 11, 29, 6, 30), tick=False):
        dataset = dataset_update(
            actor=Actor(team=owner, username="t"), dataset=dataset, sla_grace_seconds=60
        )
    assert dataset.next_deadline_at == utc(2026, 11, 30, 6)
    assert freshness.evaluate_due(now=utc(2026, 11, 29, 23)) == []
    assert Notification.objects.filter(type="dataset.late").count() == 1


def test_freshness_api_and_command(owner, client_for, capsys):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *")
    EndpointFactory(team=owner)
    with time_machine.travel(utc(2026, 11, 29, 7), tick=False):
        call_command("evaluate_freshness")
        body = client_for(owner).get(f"/api/v1/datasets/{dataset.id}/freshness").json()
    assert "late: s3://lake/raw/orders partition 2026-11-28" in capsys.readouterr().out
    assert body["state"] == "late" and body["partition_due"] == "2026-11-28"
    assert body["late_seconds"] == 3600
    assert body["sla"].startswith("At 06:00 every day, UTC")


def test_dataset_without_sla_has_no_deadline(owner):
    dataset = register(owner, utc(2026, 11, 28, 12))
    assert dataset.next_check_at is None
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29)).state == "no_sla"


def test_badge_shows_state_without_a_key_and_only_owners_see_its_url(owner, client_for, client):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *")
    body = client_for(owner).get(f"/api/v1/datasets/{dataset.id}").json()
    other = client_for(TeamFactory(slug="others")).get(f"/api/v1/datasets/{dataset.id}").json()
    assert "badge_url" not in other
    path = body["badge_url"].split("testserver", 1)[1]
    with time_machine.travel(utc(2026, 11, 29, 9), tick=False):
        freshness.evaluate_due(now=utc(2026, 11, 29, 9))
        response = client.get(path)
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"late 3h" in response.content and b"#c62828" in response.content
    assert client.get("/badge/not-a-token.svg").status_code == 404


# --- the repair sweep -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_recover_arrived_closes_the_incident_a_committing_publish_missed(owner):
    """The race: a publish has written the ready partition but not committed; the
    evaluation cannot see it, opens the incident and commits; the publish's statement saw
    no incident, so it closes none. Only the sweep closes it."""
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *")
    subscriber = SubscriptionFactory(dataset=dataset)
    written, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def publish_and_commit_late() -> None:
        try:
            with transaction.atomic():
                outcome["status"] = publish(owner, "2026-11-28", utc(2026, 11, 29, 6, 0, 30))
                written.set()
                assert release.wait(THREAD_TIMEOUT), "never released"
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            written.set()
            connection.close()

    publisher = threading.Thread(target=publish_and_commit_late, daemon=True)
    publisher.start()
    try:
        assert written.wait(THREAD_TIMEOUT)
        assert "error" not in outcome, outcome
        reports = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 1))  # commits the incident
    finally:
        release.set()
        publisher.join(THREAD_TIMEOUT)
    assert not publisher.is_alive(), "the publisher hung"
    assert "error" not in outcome, outcome
    assert outcome["status"].status_code == 201
    assert [r.partition for r in reports] == ["2026-11-28"]

    # Both committed: the partition is ready and its incident open, with nobody to close it.
    incident = LatePartition.objects.get()
    assert incident.recovered_at is None
    assert Partition.objects.get(dataset=dataset, key="2026-11-28").current_revision.state == (
        PartitionRevision.State.READY
    )
    assert recovered_keys() == []

    assert freshness.recover_arrived(now=utc(2026, 11, 29, 6, 2)) == 1

    incident.refresh_from_db()
    assert incident.recovered_at == utc(2026, 11, 29, 6, 2)
    notice = Notification.objects.get(type=Notification.Type.DATASET_RECOVERED)
    assert notice.dedup_key == f"recovered:{incident.pk}"
    assert notice.payload["data"]["partition"] == "2026-11-28"
    assert notice.payload["data"]["late_by_seconds"] == 120
    targets = set(
        Delivery.objects.filter(notification=notice).values_list("endpoint__url", flat=True)
    )
    assert targets == {subscriber.endpoint.url, "mailto:orders-oncall@example.com"}
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 7)).state == "fresh"

    deliveries = Delivery.objects.count()
    assert freshness.recover_arrived(now=utc(2026, 11, 29, 6, 3)) == 0  # closed: told once
    assert Notification.objects.filter(type=Notification.Type.DATASET_RECOVERED).count() == 1
    assert Delivery.objects.count() == deliveries


def test_recover_arrived_closes_only_incidents_whose_current_revision_is_ready(
    owner, django_assert_num_queries
):
    dataset = register(owner, utc(2026, 11, 24, 12), sla_cron="0 6 * * *")
    at = utc(2026, 11, 29, 7)
    # 2026-11-24 is missing
    publish(owner, "2026-11-25", at, state=PartitionRevision.State.FAILED)
    publish(owner, "2026-11-26", at, state=PartitionRevision.State.FAILED)
    restatement = restatements.restatement_open(
        actor=Actor(team=owner, username="t"),
        dataset=dataset,
        version="v2",
        first_partition="2026-11-26",
        last_partition="2026-11-26",
        now=at,
    )
    publish(owner, "2026-11-26", at, version="v2", restatement=restatement.pk)  # ready, staged
    publish(owner, "2026-11-27", at, version="v1")
    publish(owner, "2026-11-27", at, version="v2")  # restated, still ready
    publish(owner, "2026-11-28", at)
    for day in range(24, 29):
        open_incident(dataset, f"2026-11-{day}", utc(2026, 11, day + 1, 6))

    assert freshness.recover_arrived(now=utc(2026, 11, 29, 8)) == 2

    assert recovered_keys() == ["2026-11-27", "2026-11-28"]
    assert open_keys() == {"2026-11-24", "2026-11-25", "2026-11-26"}
    with django_assert_num_queries(1):  # finding nothing to close is one query
        assert freshness.recover_arrived(now=utc(2026, 11, 29, 9)) == 0


def test_recover_arrived_closes_at_most_limit_oldest_first(owner):
    dataset = register(owner, utc(2026, 11, 24, 12), sla_cron="0 6 * * *")
    for day in range(25, 29):
        publish(owner, f"2026-11-{day}", utc(2026, 11, 29, 7))
        open_incident(dataset, f"2026-11-{day}", utc(2026, 11, day + 1, 6))

    assert freshness.recover_arrived(now=utc(2026, 11, 29, 8), limit=3) == 3
    assert open_keys() == {"2026-11-28"}
    assert freshness.recover_arrived(now=utc(2026, 11, 29, 8), limit=3) == 1
    assert open_keys() == set()
    assert recovered_keys() == ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28"]


def test_evaluate_freshness_task_judges_then_closes_incidents_whose_partition_arrived(owner):
    dataset = register(owner, utc(2026, 11, 27, 12), sla_cron="0 6 * * *")
    publish(owner, "2026-11-27", utc(2026, 11, 28, 6, 30))
    open_incident(dataset, "2026-11-27", utc(2026, 11, 28, 6))  # a lost race left it open

    with time_machine.travel(utc(2026, 11, 29, 7), tick=False):
        assert tasks.evaluate_freshness() == 1  # 2026-11-28 newly late

    assert open_keys() == {"2026-11-28"}
    assert recovered_keys() == ["2026-11-27"]


# --- reading at an instant, whether or not an evaluation ran --------------------------------


def test_api_and_badge_say_late_before_the_evaluation_runs(owner, client_for, client):
    """From deadline plus grace on, not from the next beat: nothing is evaluated here."""
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *", sla_grace_seconds=1800)
    badge = client_for(owner).get(f"/api/v1/datasets/{dataset.id}").json()["badge_url"]
    at = utc(2026, 11, 29, 6, 45)  # 15 minutes past deadline plus grace
    with time_machine.travel(at, tick=False):
        body = client_for(owner).get(f"/api/v1/datasets/{dataset.id}/freshness").json()
        svg = client.get(badge.split("testserver", 1)[1]).content
    assert not LatePartition.objects.exists()  # no evaluation judged it
    assert (body["state"], body["partition_due"], body["late_seconds"]) == (
        "late",
        "2026-11-28",
        900,
    )
    assert body["deadline_at"] == "2026-11-29T06:00:00Z"
    assert b"late 15m" in svg and b"#c62828" in svg
    # Inside the grace it is due, and before the first deadline it is awaiting.
    due = freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 6, 29))
    assert (due.state, due.partition_due) == ("due", "2026-11-28")
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 29, 5)).state == "awaiting"


def test_with_beat_stopped_for_three_days_the_oldest_missing_partition_is_late(owner):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *", sla_grace_seconds=1800)
    publish(owner, "2026-11-29", utc(2026, 11, 30, 5))  # on time; the 28th and 30th never come
    now = utc(2026, 12, 2, 9)
    state = freshness_state.dataset_freshness(dataset, now=now)
    assert (state.state, state.partition_due, state.deadline_at) == (
        "late",
        "2026-11-28",
        utc(2026, 11, 29, 6),
    )
    assert state.late_seconds == int((now - utc(2026, 11, 29, 6, 30)).total_seconds())
    # The oldest one arrives: the next missing one is named, by its own deadline.
    publish(owner, "2026-11-28", utc(2026, 12, 2, 8))
    state = freshness_state.dataset_freshness(dataset, now=now)
    assert (state.state, state.partition_due, state.late_seconds) == (
        "late",
        "2026-11-30",
        int((now - utc(2026, 12, 1, 6, 30)).total_seconds()),
    )
    # When the evaluation catches up, it says the same.
    freshness.evaluate_due(now=now)
    assert freshness_state.dataset_freshness(dataset, now=now) == state
    assert open_keys() == {"2026-11-30", "2026-12-01"}


def test_a_deadline_before_registration_is_awaiting_never_due_or_late(owner):
    """Registered at 06:10, after the 06:00 deadline: the 27th's partition is missing,
    but that deadline is never judged; the first judged one is tomorrow's."""
    dataset = register(
        owner, utc(2026, 11, 28, 6, 10), sla_cron="0 6 * * *", sla_grace_seconds=1800
    )
    for at in (utc(2026, 11, 28, 6, 20), utc(2026, 11, 28, 23)):
        state = freshness_state.dataset_freshness(dataset, now=at)
        assert (state.state, state.partition_due) == ("awaiting", None)
    publish(owner, "2026-11-27", utc(2026, 11, 28, 23, 30))
    assert (
        freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 28, 23, 45)).state == "fresh"
    )


def test_a_grace_longer_than_the_cron_is_due_for_each_deadline_inside_it(owner):
    """Hourly partitions, a deadline every hour, two hours' grace: the oldest missing
    partition whose grace runs is due; once its grace passes it is late."""
    dataset = register(
        owner,
        utc(2026, 11, 28, 12, 30),
        partitioning="hourly",
        sla_cron="0 * * * *",
        sla_grace_seconds=7200,
    )
    publish(owner, "2026-11-28T13", utc(2026, 11, 28, 13, 59))
    due = freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 28, 14, 30))
    assert (due.state, due.partition_due) == ("due", "2026-11-28T12")
    late = freshness_state.dataset_freshness(dataset, now=utc(2026, 11, 28, 15, 1))
    assert (late.state, late.partition_due, late.late_seconds) == ("late", "2026-11-28T12", 60)


@pytest.mark.django_db
@pytest.mark.parametrize("count", [3, 12])
def test_a_shared_deadline_asks_for_readiness_once_per_batch(owner, count):
    """Judging many datasets due at one deadline reads their readiness in one query, not
    one per dataset: the batch's cost in partition lookups does not grow with its size."""
    actor = Actor(team=owner, username="t")
    with time_machine.travel(utc(2026, 11, 28, 12), tick=False):
        for n in range(count):
            dataset_register(
                actor=actor, namespace="s3://lake", name=f"raw/t{n:03}", sla_cron="0 6 * * *"
            )
    for n in range(0, count, 3):  # every third is on time
        readiness_publish(
            actor=actor,
            namespace="s3://lake",
            name=f"raw/t{n:03}",
            partition="2026-11-28",
            now=utc(2026, 11, 29, 5),
        )
    with CaptureQueriesContext(connection) as queries:
        reports = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 1))
    partition_reads = [
        q["sql"]
        for q in queries
        if q["sql"].startswith("SELECT") and '"catalog_partition"' in q["sql"]
    ]
    assert len(partition_reads) == 1, partition_reads
    assert sorted(r.dataset.split("/")[-1] for r in reports) == [
        f"t{n:03}" for n in range(count) if n % 3
    ]
