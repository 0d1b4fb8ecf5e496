"""Pruning's duty cycle: it rests between batches in proportion to each batch's time, so a
backlog is worked off beside the live workload (a clock and a sleep stand in for time)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError

from catalog import tasks
from catalog.models import Delivery
from pruning import engine
from tests.catalog.test_retention import NOW, _delivery
from watchdog import loop

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

BATCH_SECONDS = 2.0


class FakeTime:
    """A monotonic clock that only the sleeps and the batches move (each batch takes
    ``BATCH_SECONDS``); ``sleeps`` records every rest asked for, in seconds."""

    def __init__(self, monkeypatch):
        self.now = 1000.0
        self.sleeps: list[float] = []
        real_batch = engine.prune_batch

        def slow_batch(*args, **kwargs):
            counts = real_batch(*args, **kwargs)
            self.now += BATCH_SECONDS
            return counts

        monkeypatch.setattr(engine, "prune_batch", slow_batch)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _old_deliveries(n: int) -> None:
    for _ in range(n):
        _delivery("succeeded", NOW - timedelta(days=31))


def _run(fake: FakeTime, **kwargs) -> engine.Outcome:
    [outcome] = engine.prune(
        engine.rules(["deliveries"]),
        now=NOW,
        batch_size=1,
        clock=fake.clock,
        sleep=fake.sleep,
        **kwargs,
    )
    return outcome


def test_the_rest_after_a_batch_is_in_proportion_to_its_time():
    assert engine.pause_after(2.0, 0.5) == 2.0
    assert engine.pause_after(2.0, 0.25) == 6.0
    assert engine.pause_after(2.0, 1.0) == 0.0
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="duty cycle"):
            engine.pause_after(1.0, bad)


def test_half_duty_rests_as_long_as_each_batch_took_and_not_after_the_last(monkeypatch):
    _old_deliveries(3)
    fake = FakeTime(monkeypatch)
    outcome = _run(fake, duty_cycle=0.5)
    # Three full batches of one, then one that finds nothing: a rest between each.
    assert (outcome.deleted, outcome.batches, outcome.more) == (3, 4, False)
    assert fake.sleeps == [BATCH_SECONDS] * 3
    assert fake.now - 1000.0 == 7 * BATCH_SECONDS  # worked 4 x 2 s, rested 3 x 2 s
    assert not Delivery.objects.exists()


def test_full_duty_runs_the_batches_back_to_back(monkeypatch):
    _old_deliveries(3)
    fake = FakeTime(monkeypatch)
    assert _run(fake, duty_cycle=1.0).deleted == 3
    assert fake.sleeps == []


def test_rests_count_against_the_budget_and_the_next_run_resumes(monkeypatch):
    _old_deliveries(4)
    fake = FakeTime(monkeypatch)
    # 0-2 s a batch, 2-4 s rest, 4-6 s a batch: the 5 s budget is spent.
    first = _run(fake, duty_cycle=0.5, budget_seconds=5.0)
    assert (first.deleted, first.more) == (2, True)
    assert fake.sleeps == [BATCH_SECONDS, 0.0]  # the second rest is cut to the budget
    assert Delivery.objects.count() == 2
    assert _run(fake, duty_cycle=0.5).deleted == 2
    assert not Delivery.objects.exists()


def test_a_bad_duty_cycle_deletes_nothing(monkeypatch):
    _old_deliveries(1)
    with pytest.raises(ValueError, match="duty cycle"):
        _run(FakeTime(monkeypatch), duty_cycle=0.0)
    assert Delivery.objects.count() == 1


@pytest.fixture
def seen(monkeypatch):
    """The duty cycle each ``engine.prune`` call was given (the runs themselves go on)."""
    cycles: list[float] = []
    real = engine.prune

    def spy(*args, **kwargs):
        cycles.append(kwargs["duty_cycle"])
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "prune", spy)
    return cycles


def test_the_command_paces_by_the_setting_unless_told_otherwise(settings, seen):
    settings.TIDEMARK_PRUNE = {**settings.TIDEMARK_PRUNE, "duty_cycle": 0.25}
    _old_deliveries(2)
    out = StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("prune", "--only", "deliveries", stdout=out)
        call_command("prune", "--only", "deliveries", "--no-pause", stdout=out)
        call_command("prune", "--only", "deliveries", "--duty-cycle", "0.75", stdout=out)
    assert seen == [0.25, 1.0, 0.75]
    assert "deliveries: deleted 2 (with 2 catalog.DeliveryAttempt) in 1 batch(es)" in (
        out.getvalue().splitlines()
    )
    with pytest.raises(CommandError, match=r"duty cycle must be in \(0, 1\]"):
        call_command("prune", "--duty-cycle", "0", stdout=out)
    with pytest.raises(CommandError):
        call_command("prune", "--no-pause", "--duty-cycle", "0.5", stdout=out)
    # A dry run checks its options as a real run does.
    with pytest.raises(CommandError, match=r"duty cycle must be in \(0, 1\]"):
        call_command("prune", "--dry-run", "--duty-cycle", "2", stdout=out)
    for size in ("0", "-3"):
        with pytest.raises(CommandError, match=f"--batch-size must be at least 1, not {size}"):
            call_command("prune", "--dry-run", "--batch-size", size, stdout=out)


def test_the_periodic_task_and_the_watchdog_loop_pace_by_their_settings(settings, seen):
    settings.TIDEMARK_PRUNE = {**settings.TIDEMARK_PRUNE, "duty_cycle": 0.4}
    settings.WATCHDOG_PRUNE = {**settings.WATCHDOG_PRUNE, "duty_cycle": 0.6}
    _old_deliveries(1)
    with time_machine.travel(NOW, tick=False):
        assert tasks.prune_history().startswith("deliveries 1,")
    loop.prune_history(now=NOW)
    assert seen == [0.4, 0.6]
