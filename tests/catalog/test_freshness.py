"""SLA deadlines judged on real PostgreSQL, with the evaluation's clock passed in and the
request clock moved by time-machine."""

from datetime import UTC, datetime

import pytest
import time_machine
from django.core.management import call_command

from catalog import freshness
from catalog.models import Dataset, Delivery, LatePartition, Notification
from catalog.services import Actor, dataset_register, dataset_update, readiness_publish
from tests.catalog.factories import EndpointFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db


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


def publish(owner, partition, at):
    return readiness_publish(
        actor=Actor(team=owner),
        namespace="s3://lake",
        name="raw/orders",
        partition=partition,
        now=at,
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
    assert freshness.dataset_freshness(dataset, now=utc(2026, 11, 29, 5, 45)).state == "due"

    [late] = freshness.evaluate_due(now=utc(2026, 11, 29, 6, 1))
    assert (late.partition, late.deadline_at) == ("2026-11-28", utc(2026, 11, 29, 5, 30))
    assert freshness.evaluate_due(now=utc(2026, 11, 29, 6, 2)) == []  # told once
    state = freshness.dataset_freshness(dataset, now=utc(2026, 11, 29, 7, 0))
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
    assert freshness.dataset_freshness(dataset, now=utc(2026, 11, 29, 8)).state == "fresh"


def test_partition_arriving_in_grace_is_never_late(owner):
    dataset = register(owner, utc(2026, 11, 28, 12), sla_cron="0 6 * * *", sla_grace_seconds=3600)
    publish(owner, "2026-11-28", utc(2026, 11, 29, 6, 30))
    assert freshness.evaluate_due(now=utc(2026, 11, 29, 7, 1)) == []
    assert freshness.dataset_freshness(dataset, now=utc(2026, 11, 29, 7, 1)).state == "fresh"
    assert not Notification.objects.filter(type="dataset.late").exists()


def test_backfilling_an_old_partition_does_not_make_a_late_one_fresh(owner):
    dataset = register(owner, utc(2026, 11, 27, 12), sla_cron="0 6 * * *")
    freshness.evaluate_due(now=utc(2026, 11, 29, 6, 1))  # 2026-11-27 and 2026-11-28 both late
    assert set(LatePartition.objects.values_list("partition_key", flat=True)) == {
        "2026-11-27",
        "2026-11-28",
    }
    publish(owner, "2026-11-27", utc(2026, 11, 29, 6, 30))
    state = freshness.dataset_freshness(dataset, now=utc(2026, 11, 29, 7))
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
    assert freshness.dataset_freshness(dataset, now=utc(2026, 11, 29)).state == "no_sla"


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
