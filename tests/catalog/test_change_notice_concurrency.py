"""The change-notice scheduler under real concurrency on PostgreSQL: threads released
together by a barrier, each on its own database connection, against committed data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from catalog import change_notices
from catalog.actors import Actor
from catalog.models import ChangeNotice, Delivery, Notification
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.catalog.threads import race

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
EFFECTIVE_AT = NOW + timedelta(days=14)
THREAD_TIMEOUT = 60


@pytest.fixture
def notice():
    """A notice on a dataset with two consumer teams that never acknowledge it."""
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, change_notice_days=14)
    for slug in ("analytics", "finance"):
        SubscriptionFactory(dataset=dataset, team=TeamFactory(slug=slug))
    return change_notices.change_notice_announce(
        actor=Actor(team=owner, username="ana"),
        dataset=dataset,
        kind=ChangeNotice.Kind.LOCATION_MOVE,
        description="moves to s3://lake-eu",
        effective_at=EFFECTIVE_AT,
        now=NOW,
    )


def _deliveries(kind: str) -> int:
    return Delivery.objects.filter(notification__type=kind).count()


@pytest.mark.parametrize("schedulers", [2, 4])
def test_schedulers_running_at_once_send_each_step_once(notice, schedulers):
    for at in (EFFECTIVE_AT - timedelta(days=7), EFFECTIVE_AT - timedelta(days=1)):
        reports = race([lambda at=at: change_notices.send_due(now=at)] * schedulers)
        assert sum(len(r) for r in reports) == 1
    reports = race([lambda: change_notices.send_due(now=EFFECTIVE_AT)] * schedulers)
    assert [step.kind for r in reports for step in r] == ["effective"]

    assert Notification.objects.filter(type="change_notice.reminder").count() == 2
    assert Notification.objects.filter(type="change_notice.effective").count() == 1
    # Each reminder: two webhooks and two contact emails; effective: two webhooks and the
    # owner's contact email.
    assert _deliveries("change_notice.reminder") == 2 * 4
    assert _deliveries("change_notice.effective") == 3


def test_schedulers_that_read_the_notice_before_either_wrote_send_once(notice):
    """Both hold the same stale ``next_step_at`` (past the SKIP LOCKED selection): the
    compare-and-set lets one through, and the other sends nothing."""
    at = EFFECTIVE_AT - timedelta(days=7)
    stale = [ChangeNotice.objects.select_related("dataset__owner").get(pk=notice.pk)] * 2

    def handle(index: int):
        with transaction.atomic():
            return change_notices._handle_step(stale[index], now=at)

    reports = [r for r in race([lambda: handle(0), lambda: handle(1)]) if r is not None]
    assert [(r.kind, r.deliveries) for r in reports] == [("reminder", 4)]
    assert Notification.objects.filter(type="change_notice.reminder").count() == 1
    assert _deliveries("change_notice.reminder") == 4
