"""A consumer's need-by and the producer's SLA judged at the same moment by two workers,
each on its own connection: the consumer is told ``dataset.late`` once for the
partition, not once by each."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
import time_machine

from catalog import freshness, need_by_judging
from catalog.actors import Actor
from catalog.models import Delivery
from catalog.services.datasets import dataset_register
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import TeamFactory
from tests.concurrency import race

pytestmark = pytest.mark.django_db(transaction=True)

REGISTERED = datetime(2026, 11, 28, 12, tzinfo=UTC)
JUDGED = datetime(2026, 11, 29, 9, 31, tzinfo=UTC)  # past the SLA's 09:30 and the need-by


def test_a_need_by_judged_while_the_sla_judges_the_partition_tells_it_late_once(monkeypatch):
    owner = TeamFactory(slug="orders")
    with time_machine.travel(REGISTERED, tick=False):
        dataset = dataset_register(
            actor=Actor(team=owner, username="t"),
            namespace="s3://lake",
            name="raw/orders",
            sla_cron="0 9 * * *",  # late after 09:30 with the grace
            sla_grace_seconds=1800,
        )
    subscription = subscription_create(
        actor=Actor(team=TeamFactory(slug="early")),
        dataset=dataset,
        endpoint_url="https://hooks.example.com/early",
        need_by_cron="30 9 * * *",
        now=REGISTERED,
    ).subscription

    opened = threading.Event()
    tell = freshness._tell_late

    def slowly(*args, **kwargs):
        # The SLA's judging has opened the partition's late row and told everyone, and
        # takes its time to commit.
        tell(*args, **kwargs)
        opened.set()
        time.sleep(0.5)

    monkeypatch.setattr(freshness, "_tell_late", slowly)

    def need_by():
        assert opened.wait(timeout=30)
        need_by_judging.judge_batch(now=JUDGED)

    race([lambda: freshness.evaluate_batch(now=JUDGED), need_by])

    # The need-by left while the SLA was judging its dataset is judged at the next pass.
    need_by_judging.judge_batch(now=JUDGED)
    subscription.refresh_from_db()
    assert subscription.need_by_next_at == datetime(2026, 11, 30, 9, 30, tzinfo=UTC)

    late = Delivery.objects.filter(
        notification__type="dataset.late",
        notification__payload__data__partition="2026-11-28",
        endpoint=subscription.endpoint,
    )
    assert [d.notification.payload["data"]["judged_at"] for d in late] == ["sla"]
