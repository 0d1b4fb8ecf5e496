"""At-risk forecasts on real PostgreSQL: a dataset with an SLA whose upstream (verified
lineage) is later than usual is told ``dataset.at_risk`` once, before its deadline, to
its owner and its subscribers, naming the upstream; the freshness API shows the forecast."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from catalog import at_risk, freshness, notices, tasks
from catalog.actors import Actor
from catalog.models import Delivery, Notification, PartitionRevision
from catalog.services.datasets import dataset_register
from catalog.services.publishing import readiness_publish
from tests.catalog.factories import SubscriptionFactory, TeamFactory
from tests.catalog.lineage_helpers import job_between

pytestmark = pytest.mark.django_db

AT_RISK = Notification.Type.DATASET_AT_RISK
REGISTERED = datetime(2026, 10, 20, 12, tzinfo=UTC)
FIRST = datetime(2026, 10, 21, tzinfo=UTC)
DAYS = 38  # history up to the period of 2026-11-27
KEY = "2026-11-28"  # its period ends 2026-11-29 00:00; the deadline is 08:00


def at(hour, minute=0):
    return datetime(2026, 11, 29, hour, minute, tzinfo=UTC)


@pytest.fixture
def owner():
    return TeamFactory(slug="orders", contact_email="orders-people@example.com")


@pytest.fixture
def world(owner):
    """raw/orders (upstream, ready at 02:00 or 02:30) -> job -> mart/orders (SLA 08:00,
    ready an hour after its upstream), with DAYS of history."""
    actor = Actor(team=owner, username="t")
    with time_machine.travel(REGISTERED, tick=False):
        up = dataset_register(
            actor=actor, namespace="s3://lake", name="raw/orders", partitioning="daily"
        )
        down = dataset_register(
            actor=actor,
            namespace="s3://lake",
            name="mart/orders",
            partitioning="daily",
            sla_cron="0 8 * * *",
            sla_grace_seconds=1800,
        )
    job_between(owner, "build_mart", up, down, seen_at=REGISTERED, runs=DAYS)
    for n in range(DAYS):
        day = FIRST + timedelta(days=n)
        up_ready = day + timedelta(days=1, hours=2, minutes=30 if n % 2 else 0)
        publish(owner, up, day.date().isoformat(), up_ready)
        publish(owner, down, day.date().isoformat(), up_ready + timedelta(hours=1))
    freshness.evaluate_due(now=at(0, 1))  # the deadlines so far, judged: all were met
    down.refresh_from_db()
    assert down.next_deadline_at == at(8)
    return up, down


def publish(owner, dataset, key, when, state=PartitionRevision.State.READY):
    result = readiness_publish(
        actor=Actor(team=owner),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=key,
        state=state,
        now=when,
    )
    assert result.status_code in (200, 201)


def told():
    return list(Notification.objects.filter(type=AT_RISK))


def test_on_time_upstream_is_not_at_risk(world, owner):
    up, _down = world
    publish(owner, up, KEY, at(2))
    assert at_risk.check_pass(now=at(2, 5)) == []
    assert told() == []


def test_late_upstream_is_told_once_before_the_deadline_naming_it(world, owner):
    _up, down = world
    consumer = SubscriptionFactory(dataset=down, event_types=[])
    ready_only = SubscriptionFactory(dataset=down, event_types=["partition.ready"])
    # Upstream usually by 02:30 (p90, and p99: it was never later): at 05:30, 3 h past
    # it, expected half of that later (1 h 30 min), plus the hour the job takes: 08:00,
    # in time.
    assert at_risk.check_pass(now=at(5, 30)) == []
    # At 05:40, 3 h 10 min past it: 05:40 + 1 h 35 min + 1 h = 08:15, past the deadline.
    reports = at_risk.check_pass(now=at(5, 40))
    assert [(r.partition, r.estimate_at) for r in reports] == [(KEY, at(8, 15))]
    assert at_risk.check_pass(now=at(5, 45)) == []  # once per partition
    (notification,) = told()
    data = notification.payload["data"]
    assert data["partition"] == KEY
    assert data["deadline_at"] == "2026-11-29T08:00:00Z"
    assert data["estimate_at"] == "2026-11-29T08:15:00Z"
    assert (data["basis"], data["blocked"]) == ("upstream_lag", False)
    upstream = {"dataset": {"namespace": "s3://lake", "name": "raw/orders"}, "partition": KEY}
    assert data["via"] == data["cause"] == upstream
    endpoints = set(
        Delivery.objects.filter(notification=notification).values_list("endpoint_id", flat=True)
    )
    assert consumer.endpoint_id in endpoints
    assert ready_only.endpoint_id not in endpoints
    assert len(endpoints) == 2  # the consumer and the owner's email


def test_failed_upstream_blocks_and_is_told_at_once(world, owner):
    up, _down = world
    publish(owner, up, KEY, at(1), state=PartitionRevision.State.FAILED)
    with time_machine.travel(at(1, 5), tick=False):
        assert tasks.check_at_risk() == 1
    data = told()[0].payload["data"]
    assert (data["estimate_at"], data["blocked"], data["basis"]) == (None, True, "failed")
    assert data["cause"]["partition"] == KEY


def test_ready_partition_is_not_forecast(world, owner):
    _up, down = world
    publish(owner, down, KEY, at(3))
    assert at_risk.check_pass(now=at(7, 5)) == []


def test_partition_landing_while_it_is_forecast_is_not_told_at_risk(world, owner, monkeypatch):
    """The forecast reads the partition awaited, then its upstreams (outside any
    transaction); the partition lands meanwhile, told ready to its consumers. The pass
    must not then tell it at risk: a consumer would read "late" after "ready"."""
    _up, down = world
    forecast = at_risk.dataset_forecasts

    def landing_meanwhile(dataset, **kwargs):
        found = forecast(dataset, **kwargs)
        publish(owner, down, KEY, at(6, 10))  # a publish committing meanwhile
        return found

    monkeypatch.setattr(at_risk, "dataset_forecasts", landing_meanwhile)

    assert at_risk.check_pass(now=at(6, 10)) == []
    assert told() == []


def test_freshness_api_shows_the_forecast(world, owner, client_for):
    _up, down = world
    client = client_for(owner, scopes=["read"])
    url = f"/api/v1/datasets/{down.pk}/freshness"
    with time_machine.travel(at(5, 40), tick=False):
        body = client.get(url).json()
    forecast = body["forecast"]
    assert forecast["partition"] == KEY
    assert forecast["at_risk"] is True
    assert forecast["estimate_at"] == "2026-11-29T08:15:00Z"
    assert forecast["cause"]["dataset"]["name"] == "raw/orders"
    publish(owner, down, KEY, at(7, 10))
    with time_machine.travel(at(7, 15), tick=False):
        assert client.get(url).json()["forecast"] is None


def test_owner_notice_says_when_and_which_upstream(world, owner):
    at_risk.check_pass(now=at(5, 40))
    subject, text = notices.render_text(told()[0].payload)
    assert subject == f"Tidemark: s3://lake/mart/orders partition {KEY} is at risk"
    assert "is expected at 2026-11-29T08:15:00Z, after its deadline 2026-11-29T08:00:00Z" in text
    assert f"Held up by s3://lake/raw/orders partition {KEY}." in text
    assert "Nobody was paged" in text


def test_pass_runs_on_beat_on_the_freshness_queue(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["check-at-risk"]
    assert (entry["task"], entry["schedule"]) == (tasks.CHECK_AT_RISK, 300.0)
    assert settings.CELERY_TASK_ROUTES[tasks.CHECK_AT_RISK] == {"queue": "freshness"}
