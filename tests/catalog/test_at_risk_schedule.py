"""The at-risk pass costs what is due: each dataset with an SLA stores when it is next
forecast (``next_forecast_at``, indexed), so datasets not due cost the pass nothing."""

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import at_risk, tasks
from catalog.actors import Actor
from catalog.models import Dataset
from catalog.services.datasets import dataset_update
from tests.catalog.test_at_risk import KEY, at, owner, publish, world  # noqa: F401

pytestmark = pytest.mark.django_db


def not_due(owner, first, count):  # noqa: F811
    """``count`` daily datasets with an 08:00 SLA, their partitions ready: planned at
    the deadline (the old pass read each one's readiness every pass)."""
    Dataset.objects.bulk_create(
        Dataset(
            namespace="s3://lake",
            name=f"mart/idle_{n}",
            owner=owner,
            badge_token=f"idle-{n}",
            partitioning="daily",
            sla_cron="0 8 * * *",
            next_deadline_at=at(8),
            next_check_at=at(8, 30),
            next_forecast_at=at(8),
        )
        for n in range(first, first + count)
    )


def statements(queries):
    # The test's transaction turns each atomic block into savepoints: not the pass's cost.
    return [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]


def next_forecast_at(dataset):
    dataset.refresh_from_db()
    return dataset.next_forecast_at


def test_pass_queries_do_not_grow_with_datasets_not_due(world, owner):  # noqa: F811
    _up, down = world
    not_due(owner, 0, 3)
    with CaptureQueriesContext(connection) as few:
        assert at_risk.check_pass(now=at(5, 20)) == []
    not_due(owner, 3, 297)
    with CaptureQueriesContext(connection) as many:
        assert at_risk.check_pass(now=at(5, 25)) == []
    assert len(statements(few)) == len(statements(many))
    # Still awaited: forecast again at the next beat.
    assert next_forecast_at(down) == at(5, 27) + timedelta(seconds=30)


def test_an_idle_pass_is_one_indexed_query(world, owner):  # noqa: F811
    not_due(owner, 0, 300)
    at_risk.check_pass(now=at(6, 30))
    with CaptureQueriesContext(connection) as queries:
        assert at_risk.check_batch(now=at(6, 31)).checked == 0
    found = statements(queries)
    assert len(found) == 1
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_dataset")
        cursor.execute("EXPLAIN " + found[0])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "dataset_next_forecast" in plan, plan


def test_plan_waits_for_the_horizon_and_rests_once_settled(world, owner):  # noqa: F811
    _up, down = world
    # At 07:00 the day before, the 08:00 deadline is 25 hours ahead: wait for the horizon.
    assert at_risk.check_pass(now=at(7) - timedelta(days=1)) == []
    assert next_forecast_at(down) == at(8) - timedelta(days=1)
    # Told at risk: nothing more to say before the deadline.
    assert len(at_risk.check_pass(now=at(7, 5))) == 1
    assert next_forecast_at(down) == at(8)
    # At the deadline, the next one (tomorrow 08:00) is a day ahead: within the horizon,
    # its partition awaited, so it is forecast every beat.
    assert at_risk.check_pass(now=at(8)) == []
    assert next_forecast_at(down) == at(8, 2) + timedelta(seconds=30)


def test_ready_partition_rests_until_the_deadline(world, owner):  # noqa: F811
    _up, down = world
    publish(owner, down, KEY, at(3))
    with CaptureQueriesContext(connection) as first:
        assert at_risk.check_pass(now=at(3, 5)) == []
    assert next_forecast_at(down) == at(8)
    with CaptureQueriesContext(connection) as later:
        assert at_risk.check_pass(now=at(7, 55)) == []
    assert len(statements(later)) == 1 < len(statements(first))


def test_sla_change_replans_and_removal_stops(world, owner):  # noqa: F811
    _up, down = world
    at_risk.check_pass(now=at(6, 30))
    actor = Actor(team=owner, username="t")
    with time_machine.travel(at(6, 31), tick=False):
        dataset_update(actor=actor, dataset=down, sla_cron="0 9 * * *")
    assert next_forecast_at(down) == at(6, 31)
    with time_machine.travel(at(6, 32), tick=False):
        dataset_update(actor=actor, dataset=down, sla_cron="")
    assert next_forecast_at(down) is None


def test_the_task_continues_while_batches_come_back_full(world, owner, monkeypatch):  # noqa: F811
    not_due(owner, 0, 3)
    Dataset.objects.filter(name__startswith="mart/idle_").update(next_forecast_at=at(7))
    rung = []
    monkeypatch.setattr(tasks.doorbell, "ring_now", rung.append)
    summary = at_risk.run_pass(clock=lambda: at(7, 5), limit=2, budget_seconds=0)
    assert (summary.batches, summary.handled, summary.more_due) == (1, 1, True)
    with time_machine.travel(at(7, 5), tick=False):
        assert tasks.check_at_risk() == 0  # the rest, in one pass: told once
    assert rung == []
    assert Dataset.objects.filter(next_forecast_at__lte=at(7, 5)).count() == 0
