"""Change notices on real PostgreSQL: the notice period, overrides, who is told, reminders,
taking effect and acknowledgements, with the clock passed in."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command

from catalog import change_notices, errors, notices
from catalog.actors import Actor
from catalog.change_notices import (
    change_notice_acknowledge,
    change_notice_announce,
    change_notice_apply_early,
    send_due,
)
from catalog.models import (
    AuditEntry,
    ChangeNotice,
    Delivery,
    Notification,
)
from catalog.services.subscriptions import subscription_create
from problems import ValidationProblem
from tests.catalog.factories import (
    DatasetFactory,
    EndpointFactory,
    SubscriptionFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
DAY = timedelta(days=1)
EFFECTIVE_AT = NOW + 14 * DAY


@pytest.fixture
def owner():
    return TeamFactory(slug="orders", contact_email="orders-oncall@example.com")


@pytest.fixture
def dataset(owner):
    return DatasetFactory(
        owner=owner, namespace="s3://lake", name="raw/orders", change_notice_days=14
    )


@pytest.fixture
def consumers(dataset):
    """Two consumer teams with a webhook each (and the default contact emails); the owner
    also reads its own dataset, which makes it no consumer of its own notices."""
    analytics = SubscriptionFactory(dataset=dataset, team=TeamFactory(slug="analytics"))
    finance = SubscriptionFactory(
        dataset=dataset, team=TeamFactory(slug="finance"), partition_pattern="2026-*"
    )
    SubscriptionFactory(dataset=dataset, team=dataset.owner)
    return {"analytics": analytics, "finance": finance}


def announce(dataset, effective_at=EFFECTIVE_AT, now=NOW, **kwargs):
    kwargs.setdefault("kind", ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE)
    kwargs.setdefault("description", "order_total becomes a decimal")
    return change_notice_announce(
        actor=Actor(team=dataset.owner, username="ana"),
        dataset=dataset,
        effective_at=effective_at,
        now=now,
        **kwargs,
    )


def targets(notification) -> set[str]:
    return set(
        Delivery.objects.filter(notification=notification).values_list("endpoint__url", flat=True)
    )


def sent(kind) -> list[Notification]:
    return list(Notification.objects.filter(type=kind).order_by("created_at"))


def acknowledge(notice, slug, now=NOW):
    team = TeamFactory(slug=slug)
    return change_notice_acknowledge(
        actor=Actor(team=team, username=f"{slug}-lead"), notice=notice, now=now
    )


# --- the notice period --------------------------------------------------------------------


def test_announce_sooner_than_the_notice_period_is_refused_naming_the_earliest_date(
    dataset, consumers
):
    with pytest.raises(errors.NoticePeriodTooShort) as refused:
        announce(dataset, effective_at=NOW + 3 * DAY)
    problem = refused.value.document()
    assert problem["status"] == 422
    assert problem["earliest_effective_at"] == "2026-12-13T07:00:00Z"
    assert problem["rule"] == "change_notice_days" and problem["change_notice_days"] == 14
    assert problem["errors"] == [
        {
            "field": "effective_at",
            "rule": "change_notice_days",
            "detail": "must be at or after 2026-12-13T07:00:00Z",
        }
    ]
    assert not ChangeNotice.objects.exists()
    assert not Notification.objects.exists() and not AuditEntry.objects.exists()


def test_announce_exactly_one_notice_period_ahead_is_accepted(dataset, consumers):
    notice = announce(dataset, effective_at=NOW + 14 * DAY)
    assert (notice.emergency, notice.announced_at, notice.announced_by) == (False, NOW, "user:ana")
    assert AuditEntry.objects.get(action="change_notice.announced").changes["kind"] == [
        None,
        "breaking_schema_change",
    ]


def test_emergency_override_is_accepted_flagged_and_audited(dataset, consumers):
    notice = announce(
        dataset,
        effective_at=NOW + DAY,
        emergency=True,
        override_reason="  the upstream vendor changed the feed overnight ",
    )
    assert notice.emergency is True
    assert notice.override_reason == "the upstream vendor changed the feed overnight"
    entry = AuditEntry.objects.get(dataset=dataset, action="change_notice.emergency_override")
    assert entry.actor == "user:ana"
    assert entry.changes["override_reason"] == [
        None,
        "the upstream vendor changed the feed overnight",
    ]
    assert entry.changes["earliest_effective_at"] == [None, "2026-12-13T07:00:00Z"]
    [announced] = sent(Notification.Type.CHANGE_NOTICE_ANNOUNCED)[:1]
    data = announced.payload["data"]
    assert (data["emergency"], data["override_reason"]) == (True, notice.override_reason)
    subject, text = notices.render_text(announced.payload)
    assert subject.startswith("Tidemark: EMERGENCY breaking schema change of s3://lake/raw/orders")
    assert "the upstream vendor changed the feed overnight" in text


@pytest.mark.parametrize(
    ("fields", "field", "rule"),
    [
        (
            {"emergency": True, "override_reason": "   "},
            "override_reason",
            "required_for_emergency",
        ),
        ({"override_reason": "why not"}, "emergency", "emergency"),
        (
            {"effective_at": NOW - DAY, "emergency": True, "override_reason": "x"},
            "effective_at",
            "not_in_past",
        ),
    ],
)
def test_announce_refuses_malformed_overrides_and_past_dates(dataset, fields, field, rule):
    with pytest.raises(ValidationProblem) as refused:
        announce(dataset, **fields)
    assert [(e.field, e.rule) for e in refused.value.errors] == [(field, rule)]
    assert not ChangeNotice.objects.exists()


def test_only_the_owner_team_announces(dataset, consumers):
    with pytest.raises(errors.NotDatasetOwner):
        change_notice_announce(
            actor=Actor(team=consumers["analytics"].team),
            dataset=dataset,
            kind=ChangeNotice.Kind.SEMANTIC_CHANGE,
            description="x",
            effective_at=EFFECTIVE_AT,
            now=NOW,
        )
    assert not ChangeNotice.objects.exists()


# --- who is told ----------------------------------------------------------------------------


def test_announcement_reaches_every_subscriber_once_and_the_consumer_teams(dataset, consumers):
    # A subscriber that only wants readiness events is not sent change notices.
    ready_only = SubscriptionFactory(
        dataset=dataset, team=TeamFactory(slug="ml"), event_types=["partition.ready"]
    )
    notice = announce(dataset)

    [announced, *owner_notices] = sent(Notification.Type.CHANGE_NOTICE_ANNOUNCED)
    assert announced.dataset_id == dataset.pk
    # The finance subscription's partition pattern does not hide a dataset-wide notice.
    assert targets(announced) == {
        consumers["analytics"].endpoint.url,
        consumers["finance"].endpoint.url,
        dataset.owner.subscriptions.get().endpoint.url,
    }
    assert ready_only.endpoint.url not in targets(announced)
    assert announced.payload["data"]["acknowledge_path"] == (
        f"/api/v1/datasets/{dataset.pk}/change-notices/{notice.pk}/acknowledgements"
    )
    # One owner notice per consumer team (ml reads it too), to its human contacts; the
    # owner team announced it and is no consumer of its own notice.
    assert sorted(n.payload["data"]["team"] for n in owner_notices) == [
        "analytics",
        "finance",
        "ml",
    ]
    assert set().union(*(targets(n) for n in owner_notices)) == {
        "mailto:analytics@example.com",
        "mailto:finance@example.com",
        "mailto:ml@example.com",
    }
    assert send_due(now=NOW) == []  # nothing more to send at once
    assert Notification.objects.count() == 4


def test_reminders_go_only_to_consumer_teams_that_have_not_acknowledged(dataset, consumers):
    notice = announce(dataset)
    assert notice.next_step_at == EFFECTIVE_AT - 7 * DAY
    acknowledge(notice, "analytics", now=NOW + DAY)

    [report] = send_due(now=EFFECTIVE_AT - 7 * DAY)
    assert (report.kind, report.seconds_before) == ("reminder", 7 * 86400)
    [reminder] = sent(Notification.Type.CHANGE_NOTICE_REMINDER)
    assert targets(reminder) == {consumers["finance"].endpoint.url, "mailto:finance@example.com"}
    assert report.deliveries == 2
    assert reminder.payload["data"]["reminder_seconds_before"] == 7 * 86400

    assert send_due(now=EFFECTIVE_AT - 7 * DAY + timedelta(minutes=1)) == []  # sent once
    acknowledge(notice, "finance", now=EFFECTIVE_AT - 2 * DAY)
    [quiet] = send_due(now=EFFECTIVE_AT - DAY)  # everyone acknowledged: nobody to remind
    assert (quiet.kind, quiet.deliveries) == ("reminder", 0)
    assert len(sent(Notification.Type.CHANGE_NOTICE_REMINDER)) == 1
    notice.refresh_from_db()
    assert notice.next_step_at == EFFECTIVE_AT


def test_after_an_outage_only_the_latest_overdue_reminder_is_sent(dataset, consumers):
    announce(dataset)
    [report] = send_due(now=EFFECTIVE_AT - timedelta(hours=12))
    assert report.seconds_before == 86400
    [reminder] = sent(Notification.Type.CHANGE_NOTICE_REMINDER)
    assert reminder.dedup_key.endswith(":reminder:86400")


def test_a_reminder_is_never_sent_twice_even_when_its_step_comes_round_again(dataset, consumers):
    notice = announce(dataset)
    send_due(now=EFFECTIVE_AT - 7 * DAY)
    # A scheduler acting on a stale read of the schedule finds the step again: the
    # notification's unique dedup key still sends it once.
    ChangeNotice.objects.filter(pk=notice.pk).update(next_step_at=EFFECTIVE_AT - 7 * DAY)
    [again] = send_due(now=EFFECTIVE_AT - 7 * DAY)
    assert again.deliveries == 0
    assert len(sent(Notification.Type.CHANGE_NOTICE_REMINDER)) == 1
    assert Delivery.objects.filter(notification__type="change_notice.reminder").count() == 4


def test_effective_notification_is_sent_once_to_subscribers_and_the_owner(dataset, consumers):
    notice = announce(dataset)
    send_due(now=EFFECTIVE_AT - 7 * DAY)
    send_due(now=EFFECTIVE_AT - DAY)
    [report] = send_due(now=EFFECTIVE_AT + timedelta(minutes=1))
    assert report.kind == "effective"
    notice.refresh_from_db()
    assert (notice.state, notice.took_effect_at, notice.next_step_at) == (
        "effective",
        EFFECTIVE_AT,
        None,
    )
    assert notice.applied_early is False
    [effective] = sent(Notification.Type.CHANGE_NOTICE_EFFECTIVE)
    assert targets(effective) == {
        consumers["analytics"].endpoint.url,
        consumers["finance"].endpoint.url,
        dataset.owner.subscriptions.get().endpoint.url,
        "mailto:orders-oncall@example.com",
    }
    assert effective.payload["data"]["took_effect_at"] == "2026-12-13T07:00:00Z"
    assert send_due(now=EFFECTIVE_AT + DAY) == []
    assert len(sent(Notification.Type.CHANGE_NOTICE_EFFECTIVE)) == 1
    assert len(sent(Notification.Type.CHANGE_NOTICE_REMINDER)) == 2


def test_send_change_notices_command_runs_one_pass(dataset, consumers, capsys):
    notice = announce(dataset)
    with time_machine.travel(EFFECTIVE_AT - DAY, tick=False):
        call_command("send_change_notices")
    out = capsys.readouterr().out
    assert f"change notice {notice.pk}: reminder 86400 s before (4 deliveries)" in out
    assert "1 step(s) sent" in out


def test_beat_runs_the_scheduler_every_minute_and_the_task_sends_what_is_due(
    dataset, consumers, settings
):
    from catalog import tasks

    entry = settings.CELERY_BEAT_SCHEDULE["send-change-notices"]
    assert (entry["task"], entry["schedule"]) == ("catalog.tasks.send_change_notices", 60.0)
    announce(dataset)
    with time_machine.travel(EFFECTIVE_AT - 7 * DAY, tick=False):
        assert tasks.send_change_notices() == 1
        assert tasks.send_change_notices() == 0
    assert len(sent(Notification.Type.CHANGE_NOTICE_REMINDER)) == 1


# --- acknowledgements and apply-early -------------------------------------------------------


def test_only_consumer_teams_acknowledge_and_once(dataset, consumers):
    notice = announce(dataset)
    for stranger in (dataset.owner, TeamFactory(slug="strangers")):
        with pytest.raises(errors.NotAConsumer):
            change_notice_acknowledge(actor=Actor(team=stranger), notice=notice, now=NOW)
    first, created = acknowledge(notice, "analytics", now=NOW + DAY)
    again, created_again = acknowledge(notice, "analytics", now=NOW + 2 * DAY)
    assert (created, created_again) == (True, False)
    assert again.pk == first.pk and again.acknowledged_at == NOW + DAY
    assert first.acknowledged_by == "user:analytics-lead"
    assert [t.slug for t in change_notices.pending_teams(notice)] == ["finance"]


def test_apply_early_needs_a_notice_that_requires_acknowledgements(dataset, consumers):
    notice = announce(dataset)
    acknowledge(notice, "analytics")
    acknowledge(notice, "finance")
    with pytest.raises(errors.AcknowledgementsNotRequired):
        change_notice_apply_early(actor=Actor(team=dataset.owner), notice=notice, now=NOW)
    notice.refresh_from_db()
    assert notice.state == "announced"


def test_apply_early_waits_for_every_consumer_then_takes_effect_once(dataset, consumers):
    notice = announce(dataset, require_acknowledgements=True)
    acknowledge(notice, "analytics")
    with pytest.raises(errors.AcknowledgementsPending) as pending:
        change_notice_apply_early(actor=Actor(team=dataset.owner), notice=notice, now=NOW + DAY)
    assert pending.value.extra["pending_teams"] == ["finance"]
    assert not sent(Notification.Type.CHANGE_NOTICE_EFFECTIVE)

    acknowledge(notice, "finance", now=NOW + DAY)
    with pytest.raises(errors.NotDatasetOwner):
        change_notice_apply_early(
            actor=Actor(team=consumers["finance"].team), notice=notice, now=NOW + DAY
        )
    applied = change_notice_apply_early(
        actor=Actor(team=dataset.owner, username="ana"), notice=notice, now=NOW + 2 * DAY
    )
    assert (applied.state, applied.took_effect_at, applied.applied_early) == (
        "effective",
        NOW + 2 * DAY,
        True,
    )
    [effective] = sent(Notification.Type.CHANGE_NOTICE_EFFECTIVE)
    assert effective.payload["data"]["applied_early"] is True
    assert AuditEntry.objects.filter(action="change_notice.applied_early").count() == 1
    with pytest.raises(errors.ChangeNoticeInEffect):
        change_notice_apply_early(actor=Actor(team=dataset.owner), notice=notice, now=NOW)
    # The scheduler has nothing left: no reminder, no second effective notification.
    assert send_due(now=EFFECTIVE_AT + DAY) == []
    assert len(sent(Notification.Type.CHANGE_NOTICE_EFFECTIVE)) == 1
    assert not sent(Notification.Type.CHANGE_NOTICE_REMINDER)


def test_a_late_subscriber_catching_up_gets_the_announcement_but_no_reminder(dataset, consumers):
    from django.utils import timezone

    real_now = timezone.now()  # catch-up reads the rows' real creation times
    announce(dataset, effective_at=real_now + 14 * DAY, now=real_now)
    send_due(now=real_now + 7 * DAY)  # the 7-day reminder
    assert sent(Notification.Type.CHANGE_NOTICE_REMINDER)
    newcomer = TeamFactory(slug="newcomer")
    result = subscription_create(
        actor=Actor(team=newcomer),
        dataset=dataset,
        endpoint_url="https://hooks.example.com/newcomer",
        partition_pattern="2027-*",
        since=real_now - timedelta(minutes=1),
        now=real_now,
    )
    # The partition pattern does not hide a notice about the whole dataset.
    caught_up = Delivery.objects.filter(endpoint=result.subscription.endpoint)
    assert [d.notification.type for d in caught_up] == ["change_notice.announced"]


def test_an_endpoint_of_a_team_without_subscription_is_not_a_recipient(dataset, consumers):
    EndpointFactory(team=TeamFactory(slug="bystanders"))
    announce(dataset)
    urls = set(Delivery.objects.values_list("endpoint__url", flat=True))
    assert not any("bystanders" in url for url in urls)


def test_teams_seen_reading_the_dataset_at_run_time_are_consumers_too(dataset, consumers):
    """A team whose job was seen reading the dataset (verified lineage) is told and may
    acknowledge, though it never subscribed; an unverified sighting counts for nothing."""
    from catalog.models import DatasetUsage, Job

    def seen_reading(slug, *, verified):
        team = TeamFactory(slug=slug)
        job = Job.objects.create(
            namespace=f"airflow://{slug}",
            name="daily_report",
            team=team if verified else None,
            first_seen_at=NOW - DAY,
            last_seen_at=NOW - DAY,
        )
        DatasetUsage.objects.create(
            job=job,
            dataset=dataset,
            dataset_namespace=dataset.namespace,
            dataset_name=dataset.name,
            direction=DatasetUsage.Direction.READ,
            team=team,
            verified=verified,
            first_seen_at=NOW - DAY,
            last_seen_at=NOW - DAY,
            run_count=3,
        )
        return team

    seen_reading("marketing", verified=True)
    seen_reading("intruder", verified=False)
    notice = announce(dataset)

    [_, *owner_notices] = sent(Notification.Type.CHANGE_NOTICE_ANNOUNCED)
    assert sorted(n.payload["data"]["team"] for n in owner_notices) == [
        "analytics",
        "finance",
        "marketing",
    ]
    acknowledge(notice, "marketing")
    with pytest.raises(errors.NotAConsumer):
        acknowledge(notice, "intruder")
