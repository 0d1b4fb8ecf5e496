"""SLA calendars end to end on real PostgreSQL: a deadline on a holiday or weekend is
never judged; what it would have owed is late at the next business-day deadline
(``next_business_day``) or owed never (``skip``), both as the evaluation judges it and as
the freshness read says it before the evaluation runs."""

from datetime import UTC, datetime

import pytest
import time_machine

from catalog import freshness, freshness_state, timeline
from catalog.actors import Actor
from catalog.models import LatePartition, Notification
from catalog.services.datasets import dataset_register
from catalog.services.publishing import readiness_publish
from schedules import period_containing
from tests.catalog.factories import TeamFactory

pytestmark = pytest.mark.django_db


def utc(*args):
    return datetime(*args, tzinfo=UTC)


# 06:30 Berlin is 05:30 UTC in winter; the grace ends at 06:00 UTC.
REGISTERED = utc(2026, 12, 23, 12)
THURSDAY_24TH = utc(2026, 12, 24, 5, 30)
CHRISTMAS_DAY = utc(2026, 12, 25, 5, 30)  # a holiday in Bavaria, as is the 26th
MONDAY_28TH = utc(2026, 12, 28, 5, 30)


@pytest.fixture
def owner():
    return TeamFactory(slug="orders", contact_email="orders-oncall@example.com")


def register(owner, rule: str):
    with time_machine.travel(REGISTERED, tick=False):
        return dataset_register(
            actor=Actor(team=owner, username="t"),
            namespace="s3://lake",
            name="raw/orders",
            partitioning="daily",
            partition_timezone="Europe/Berlin",
            sla_cron="30 6 * * *",
            sla_timezone="Europe/Berlin",
            sla_grace_seconds=1800,
            sla_calendar="business_days",
            sla_holidays_country="DE",
            sla_holidays_subdivision="BY",
            sla_non_business_day=rule,
        )


def publish(owner, partition, at):
    readiness_publish(
        actor=Actor(team=owner),
        namespace="s3://lake",
        name="raw/orders",
        partition=partition,
        now=at,
    )


def late_notices() -> list[tuple[str, str]]:
    return sorted(
        (n.payload["data"]["partition"], n.payload["data"]["deadline_at"])
        for n in Notification.objects.filter(type=Notification.Type.DATASET_LATE)
    )


def test_moved_deadline_nothing_late_on_the_holiday_all_late_on_monday(owner):
    dataset = register(owner, "next_business_day")
    assert dataset.next_deadline_at == THURSDAY_24TH
    publish(owner, "2026-12-23", utc(2026, 12, 24, 5))
    assert freshness.evaluate_due(now=utc(2026, 12, 24, 6, 1)) == []

    # Christmas Day, past what would have been the deadline plus grace: nothing is due.
    on_the_holiday = utc(2026, 12, 25, 9)
    assert freshness.evaluate_due(now=on_the_holiday) == []
    state = freshness_state.dataset_freshness(dataset, now=on_the_holiday)
    assert (state.state, state.next_deadline_at) == ("fresh", MONDAY_28TH)
    dataset.refresh_from_db()
    assert dataset.next_deadline_at == MONDAY_28TH
    assert not Notification.objects.filter(type=Notification.Type.DATASET_LATE).exists()

    # Monday after the grace: the freshness read says late before the evaluation runs ...
    monday = utc(2026, 12, 28, 6, 1)
    state = freshness_state.dataset_freshness(dataset, now=monday)
    assert (state.state, state.partition_due, state.deadline_at) == (
        "late",
        "2026-12-24",
        MONDAY_28TH,
    )
    # ... and the evaluation finds Thursday's to Sunday's partitions late at Monday's.
    reports = freshness.evaluate_due(now=monday)
    assert sorted((r.partition, r.deadline_at) for r in reports) == [
        (key, MONDAY_28TH) for key in ["2026-12-24", "2026-12-25", "2026-12-26", "2026-12-27"]
    ]
    assert {deadline for _, deadline in late_notices()} == {"2026-12-28T05:30:00Z"}


def test_skipped_deadline_owes_nothing_and_monday_owes_only_sunday(owner):
    dataset = register(owner, "skip")
    publish(owner, "2026-12-23", utc(2026, 12, 24, 5))
    assert freshness.evaluate_due(now=utc(2026, 12, 27, 23)) == []
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 12, 26, 9)).state == "fresh"

    monday = utc(2026, 12, 28, 6, 1)
    state = freshness_state.dataset_freshness(dataset, now=monday)
    assert (state.state, state.partition_due) == ("late", "2026-12-27")
    listed = freshness_state.datasets_freshness([dataset], now=monday, latest={})
    assert listed[dataset.pk].partition_due == "2026-12-27"
    [report] = freshness.evaluate_due(now=monday)
    assert (report.partition, report.deadline_at) == ("2026-12-27", MONDAY_28TH)
    assert set(LatePartition.objects.values_list("partition_key", flat=True)) == {"2026-12-27"}
    # Sunday's partition arrives: fresh, though the skipped ones never came.
    publish(owner, "2026-12-27", utc(2026, 12, 28, 7))
    assert freshness_state.dataset_freshness(dataset, now=utc(2026, 12, 28, 8)).state == "fresh"
    assert late_notices() == [("2026-12-27", "2026-12-28T05:30:00Z")]


def test_the_timeline_shows_skipped_periods_as_not_owed(owner):
    dataset = register(owner, "skip")
    sla = freshness_state.sla_of(dataset)
    periods = [
        period_containing(utc(2026, 12, day, 12), "daily", "Europe/Berlin") for day in (24, 27)
    ]
    cells = timeline.cells(periods, partitions={}, late_keys={}, sla=sla, now=utc(2026, 12, 28, 7))
    assert [(c.key, c.status, c.deadline_at) for c in cells] == [
        ("2026-12-24", timeline.NOT_OWED, None),
        ("2026-12-27", timeline.MISSING, MONDAY_28TH),
    ]
