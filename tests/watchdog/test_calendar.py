"""A monitor's business-day calendar, as the catalog's feed defines it for a dataset with an
SLA calendar: the watchdog judges the same deadlines as the catalog (the same
``schedules`` arithmetic), so a holiday's deadline never pages, what it owed is paged at
the next business day's (``next_business_day``) or never (``skip``), and bad holiday codes
are refused naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from rest_framework.test import APIClient

from schedules import BusinessCalendar, FreshnessSla
from watchdog import schedule, tokens
from watchdog.models import Incident, Monitor

from .test_watchdog import cycle

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

EXTERNAL_ID = "tidemark:dataset:8:data"
DEFINED = datetime(2026, 12, 23, 12, tzinfo=UTC)
THURSDAY_24TH = datetime(2026, 12, 24, 5, 30, tzinfo=UTC)
MONDAY_28TH = datetime(2026, 12, 28, 5, 30, tzinfo=UTC)
GRACE = timedelta(minutes=10)
PROBLEM = "application/problem+json"


@pytest.fixture
def api(db) -> APIClient:
    _, token = tokens.create("catalog")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def upsert(api, *, at=DEFINED, **fields):
    """A data monitor's definition as the catalog's feed sends it for a Bavarian SLA."""
    body = {
        "name": "orders data",
        "owner": "orders",
        "kind": "deadline",
        "cron": "30 6 * * *",
        "timezone": "Europe/Berlin",
        "partitioning": "daily",
        "partition_timezone": "Europe/Berlin",
        "grace_seconds": int(GRACE.total_seconds()),
        "calendar": "business_days",
        "holidays_country": "DE",
        "holidays_subdivision": "BY",
        "non_business_day": "next_business_day",
        "channels": [{"kind": "pagerduty", "target": "R" * 32}],
        "version": "1",
        "ready_partitions": ["2026-12-23"],
        **fields,
    }
    with time_machine.travel(at, tick=False):
        return api.post(f"/api/v1/monitors/external/{EXTERNAL_ID}", body, format="json")


def test_a_moved_deadline_pages_nothing_on_christmas_and_monday_for_thursday(api, pagerduty):
    response = upsert(api)
    assert response.status_code == 200, response.content
    assert [d["utc"] for d in response.json()["next_deadlines"]] == [
        "2026-12-24T05:30:00Z",
        "2026-12-28T05:30:00Z",
        "2026-12-29T05:30:00Z",
    ]
    cycle(THURSDAY_24TH + GRACE)  # the 23rd was ready
    cycle(datetime(2026, 12, 26, 12, tzinfo=UTC))
    assert pagerduty == [] and not Incident.objects.exists()

    cycle(MONDAY_28TH + GRACE)
    [incident] = Incident.objects.all()
    # The oldest partition owed at Monday's deadline: Thursday's.
    assert (incident.deadline_at, incident.partition) == (MONDAY_28TH, "2026-12-24")
    assert len(pagerduty) == 1


def test_a_skipped_deadline_owes_nothing_and_monday_owes_sunday(api, pagerduty):
    assert upsert(api, non_business_day="skip").status_code == 200
    cycle(MONDAY_28TH + GRACE)
    [incident] = Incident.objects.all()
    assert (incident.deadline_at, incident.partition) == (MONDAY_28TH, "2026-12-27")


@pytest.mark.parametrize(
    ("fields", "field", "value"),
    [
        ({"holidays_country": "XX"}, "holidays_country", "'XX'"),
        ({"holidays_subdivision": "ZZ"}, "holidays_subdivision", "'ZZ'"),
        ({"cron": "30 6 * * 0"}, "cron", "'30 6 * * 0'"),
        ({"calendar": "weekly"}, "calendar", "weekly"),
    ],
)
def test_a_bad_calendar_is_a_problem_naming_the_field(api, fields, field, value):
    response = upsert(api, **fields)
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    [error] = response.json()["errors"]
    assert error["field"] == field
    assert value in error["detail"]
    assert not Monitor.objects.exists()


@pytest.mark.parametrize("rule", ["next_business_day", "skip"])
def test_the_watchdog_judges_the_deadlines_of_the_catalogs_sla(rule):
    """Across a year of Bavarian holidays, the watchdog's deadlines and the partitions it
    expects at each are the catalog's (``FreshnessSla`` of the dataset)."""
    monitor = Monitor(
        kind=Monitor.Kind.DEADLINE,
        cron="30 6 * * *",
        timezone="Europe/Berlin",
        partitioning="daily",
        partition_timezone="Europe/Berlin",
        calendar="business_days",
        holidays_country="DE",
        holidays_subdivision="BY",
        non_business_day=rule,
    )
    sla = FreshnessSla(
        "30 6 * * *",
        "Europe/Berlin",
        0,
        "daily",
        "Europe/Berlin",
        BusinessCalendar("DE", "BY", rule),
    )
    catalog_at = watchdog_at = datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(260):
        catalog_at = sla.next_deadline(catalog_at)
        watchdog_at = schedule.next_deadline(monitor, watchdog_at)
        assert watchdog_at == catalog_at
        assert schedule.expected_partitions(monitor, watchdog_at) == [
            p.key for p in sla.due_at(catalog_at)
        ]
    assert catalog_at.year == 2027  # a whole year walked


@pytest.mark.parametrize(
    ("rule", "opens"),
    [
        # Monday's deadline takes a run since Friday's (Thursday's here: Friday is Christmas).
        ("next_business_day", THURSDAY_24TH),
        # With skip, only a run since the cron's last firing, Sunday's, counts for Monday.
        ("skip", datetime(2026, 12, 27, 5, 30, tzinfo=UTC)),
    ],
)
def test_a_pipeline_monitors_window_follows_the_rule(rule, opens):
    monitor = Monitor(
        kind=Monitor.Kind.DEADLINE,
        cron="30 6 * * *",
        timezone="Europe/Berlin",
        calendar="business_days",
        holidays_country="DE",
        holidays_subdivision="BY",
        non_business_day=rule,
    )
    assert schedule.next_deadline(monitor, THURSDAY_24TH) == MONDAY_28TH
    assert schedule.window_start(monitor, MONDAY_28TH) == opens - schedule.EARLY_TOLERANCE
