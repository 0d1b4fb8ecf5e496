"""The change-notice scheduler under real concurrency on PostgreSQL: threads released
together by a barrier, each on its own database connection, against committed data."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from catalog import change_notices
from catalog.models import ChangeNotice, Delivery, Notification
from catalog.services import Actor
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
EFFECTIVE_AT = NOW + timedelta(days=14)
THREAD_TIMEOUT = 60


def _race(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``count`` threads released at once; re-raise any error."""
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            outcomes[index] = work(index)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=THREAD_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a scheduler hung"
    assert not failures, failures
    return outcomes


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
        reports = _race(schedulers, lambda _, at=at: change_notices.send_due(now=at))
        assert sum(len(r) for r in reports) == 1
    reports = _race(schedulers, lambda _: change_notices.send_due(now=EFFECTIVE_AT))
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

    reports = [r for r in _race(2, handle) if r is not None]
    assert [(r.kind, r.deliveries) for r in reports] == [("reminder", 4)]
    assert Notification.objects.filter(type="change_notice.reminder").count() == 1
    assert _deliveries("change_notice.reminder") == 4
