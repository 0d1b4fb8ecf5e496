"""Tidemark watching itself (``catalog.self_monitoring``): where the heartbeat runs, and
the lags it measures against their thresholds. The heartbeat under a real backlog, with
real processes, is ``test_self_monitoring_processes.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.conf import settings

from catalog import notices, self_monitoring, tasks
from catalog.models import ChangeNotice, Delivery, StorageGroup
from tests.catalog.factories import DatasetFactory, EndpointFactory, TeamFactory
from tests.catalog.stack_helpers import (
    PROCFILE,
    PRODUCTION_PROCFILE,
    procfile_queues,
    procfile_workers,
)

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
HEARTBEAT = "catalog.tasks.heartbeat"


def _queue(task: str) -> str:
    route = settings.CELERY_TASK_ROUTES.get(task, {})
    return route.get("queue", settings.CELERY_TASK_DEFAULT_QUEUE)


def _tidemark_tasks() -> set[str]:
    """Every task of Tidemark's Celery app (Celery's own excepted)."""
    from config.celery import app

    app.loader.import_default_modules()
    return {name for name in app.tasks if not name.startswith("celery.")}


BOTH_PROCFILES = pytest.mark.parametrize(
    "procfile", [PROCFILE, PRODUCTION_PROCFILE], ids=["procfile", "production"]
)


@BOTH_PROCFILES
def test_the_heartbeat_has_a_queue_and_a_worker_no_backlog_can_hold_up(procfile):
    """A backlog on any work queue must not delay the heartbeat: its queue carries nothing
    else, and the Procfile runs a worker that consumes that queue alone."""
    queue = _queue(HEARTBEAT)
    assert {name for name in _tidemark_tasks() if _queue(name) == queue} == {HEARTBEAT}
    workers = procfile_workers(procfile).values()
    consumers = [q for q in map(procfile_queues, workers) if queue in q]
    assert consumers == [[queue]]


@BOTH_PROCFILES
def test_every_queue_a_task_goes_to_has_a_worker_in_the_procfile(procfile):
    consumed = {q for args in procfile_workers(procfile).values() for q in procfile_queues(args)}
    assert {_queue(name) for name in _tidemark_tasks()} <= consumed
    assert set(settings.CELERY_TASK_ROUTES) <= _tidemark_tasks()


def test_in_production_deliveries_lineage_and_deadlines_never_share_a_worker():
    """A delivery backlog or a burst of lineage events must not hold up the judging of
    deadlines, nor each other; pruning (a run of up to its budget) stays off the
    time-critical passes' worker too."""
    queues_of = [set(procfile_queues(a)) for a in procfile_workers(PRODUCTION_PROCFILE).values()]
    apart = ["delivery", "lineage", _queue("catalog.tasks.evaluate_freshness")]
    for queues in queues_of:
        assert len(queues & set(apart)) <= 1, queues
    passes = next(q for q in queues_of if _queue("catalog.tasks.evaluate_freshness") in q)
    assert _queue("catalog.tasks.prune_history") not in passes
    assert _queue("catalog.tasks.poll_storage") not in passes


def test_both_procfiles_run_the_same_processes_but_the_celery_workers():
    """The production topology differs from ``make run``'s only in how the work queues
    are split: web, beat, the watchdog and its web server are started alike."""

    def others(path):
        lines = dict(line.split(":", 1) for line in path.read_text().splitlines() if line)
        workers = procfile_workers(path)
        return {name: command for name, command in lines.items() if name not in workers}

    assert others(PRODUCTION_PROCFILE) == others(PROCFILE)


def test_a_heartbeat_that_waited_a_period_is_dropped_not_run_late():
    [entry] = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == HEARTBEAT]
    period = settings.TIDEMARK_SELF_MONITORING["period_seconds"]
    assert entry["schedule"] == entry["options"]["expires"] == period


def test_every_system_monitor_has_a_documented_threshold():
    monitors = self_monitoring.system_monitors()
    assert set(monitors) == {
        "tidemark:system:scheduler",
        "tidemark:system:deliveries",
        "tidemark:system:poll",
        "tidemark:system:freshness",
        "tidemark:system:change-notices",
        "tidemark:system:lineage",  # registered by the lineage app
    }
    for lag in self_monitoring._LAGS.values():
        assert settings.TIDEMARK_SELF_MONITORING[lag.threshold] > 0


# --- measured lags -----------------------------------------------------------------------


def _threshold(key: str) -> timedelta:
    return timedelta(seconds=settings.TIDEMARK_SELF_MONITORING[key])


def _delivery(endpoint, key: str, *, due_at: datetime, **fields) -> Delivery:
    notification = notices.notification_write(
        type="partition.ready", dedup_key=key, data={}, now=NOW
    )
    return Delivery.objects.create(
        notification=notification, endpoint=endpoint, next_attempt_at=due_at, **fields
    )


@pytest.mark.django_db
def test_deliveries_are_unhealthy_once_the_oldest_due_one_waited_the_threshold():
    endpoint = EndpointFactory(team=TeamFactory(slug="finance"))
    threshold = _threshold("delivery_lag_seconds")
    assert self_monitoring.health(now=NOW)["tidemark:system:deliveries"]
    _delivery(endpoint, "young", due_at=NOW - timedelta(seconds=5))
    oldest = _delivery(endpoint, "oldest", due_at=NOW - threshold + timedelta(seconds=1))

    assert self_monitoring.lags(now=NOW)["tidemark:system:deliveries"] == threshold - timedelta(
        seconds=1
    )
    assert self_monitoring.health(now=NOW)["tidemark:system:deliveries"]
    later = NOW + timedelta(seconds=1)
    assert not self_monitoring.health(now=later)["tidemark:system:deliveries"]

    # Delivered: the next oldest is measured.
    Delivery.objects.filter(pk=oldest.pk).update(state=Delivery.State.SUCCEEDED)
    assert self_monitoring.lags(now=later)["tidemark:system:deliveries"] == timedelta(seconds=6)


@pytest.mark.django_db
def test_deliveries_waiting_on_their_consumer_are_not_tidemarks_lag():
    """A retrying delivery is not due before its next attempt, and a disabled endpoint's
    deliveries wait for its owner: neither is Tidemark's machinery falling behind."""
    long_ago = NOW - 10 * _threshold("delivery_lag_seconds")
    endpoint = EndpointFactory(team=TeamFactory(slug="finance"))
    _delivery(endpoint, "retry", due_at=NOW + timedelta(minutes=5), state=Delivery.State.RETRYING)
    _delivery(endpoint, "sent", due_at=long_ago, state=Delivery.State.SUCCEEDED)
    disabled = EndpointFactory(team=TeamFactory(slug="ops"), is_active=False)
    _delivery(disabled, "disabled", due_at=long_ago)

    assert self_monitoring.lags(now=NOW)["tidemark:system:deliveries"] is None
    assert self_monitoring.health(now=NOW)["tidemark:system:deliveries"]


@pytest.mark.django_db
def test_freshness_is_unhealthy_once_a_judgement_waited_the_threshold():
    threshold = _threshold("freshness_lag_seconds")
    DatasetFactory(next_check_at=NOW + timedelta(hours=1))  # not due yet
    DatasetFactory(next_check_at=None)  # no SLA
    late = DatasetFactory(next_check_at=NOW - threshold)

    assert self_monitoring.lags(now=NOW)["tidemark:system:freshness"] == threshold
    assert not self_monitoring.health(now=NOW)["tidemark:system:freshness"]
    assert self_monitoring.health(now=NOW - timedelta(seconds=1))["tidemark:system:freshness"]
    late.next_check_at = NOW + timedelta(days=1)  # judged: its next deadline is stored
    late.save()
    assert self_monitoring.lags(now=NOW)["tidemark:system:freshness"] is None


@pytest.mark.django_db
def test_the_poll_is_unhealthy_once_a_group_is_overdue_by_the_threshold():
    threshold = _threshold("poll_lag_seconds")
    overdue, ahead = NOW - timedelta(minutes=1), NOW + timedelta(hours=1)
    StorageGroup.objects.create(source="lake", prefix="a/", next_sweep_at=overdue)
    StorageGroup.objects.create(source="lake", prefix="b/", next_sweep_at=ahead)
    assert self_monitoring.lags(now=NOW)["tidemark:system:poll"] == timedelta(minutes=1)
    assert self_monitoring.health(now=NOW)["tidemark:system:poll"]
    later = NOW - timedelta(minutes=1) + threshold
    assert not self_monitoring.health(now=later)["tidemark:system:poll"]


@pytest.mark.django_db
def test_change_notices_are_unhealthy_once_a_due_step_waited_the_threshold():
    threshold = _threshold("change_notice_lag_seconds")
    dataset = DatasetFactory()

    def notice(next_step_at, state=ChangeNotice.State.ANNOUNCED) -> ChangeNotice:
        return ChangeNotice.objects.create(
            dataset=dataset,
            kind=ChangeNotice.Kind.DEPRECATION,
            description="going away",
            announced_at=NOW - timedelta(days=20),
            effective_at=NOW + timedelta(days=1),
            state=state,
            took_effect_at=NOW if state == ChangeNotice.State.EFFECTIVE else None,
            next_step_at=next_step_at,
        )

    notice(None, state=ChangeNotice.State.EFFECTIVE)
    notice(NOW + timedelta(hours=2))  # the next reminder, not due yet
    assert self_monitoring.lags(now=NOW)["tidemark:system:change-notices"] is None
    notice(NOW - threshold + timedelta(seconds=1))

    assert self_monitoring.health(now=NOW)["tidemark:system:change-notices"]
    later = NOW + timedelta(seconds=1)
    assert self_monitoring.lags(now=later)["tidemark:system:change-notices"] == threshold
    assert not self_monitoring.health(now=later)["tidemark:system:change-notices"]


@pytest.mark.django_db
def test_the_scheduler_is_healthy_whenever_the_heartbeat_runs():
    assert self_monitoring.health(now=NOW) == dict.fromkeys(self_monitoring.system_monitors(), True)


# --- the poll worker's start-up sweep ----------------------------------------------------


def _consumer(*queues: str) -> SimpleNamespace:
    """What ``worker_ready`` sends: a consumer whose app consumes ``queues``."""
    consume_from = {queue: object() for queue in queues}
    return SimpleNamespace(
        app=SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(consume_from=consume_from)))
    )


@pytest.mark.parametrize(
    ("queues", "sweeps"),
    [(("housekeeping",), 0), (("poll",), 1), (("default", "delivery", "poll"), 1)],
)
def test_only_a_worker_of_the_poll_queue_asks_for_the_start_up_sweep(monkeypatch, queues, sweeps):
    asked = []
    monkeypatch.setattr(tasks.poll_storage, "delay", lambda **kwargs: asked.append(kwargs))
    tasks._sweep_after_boot(sender=_consumer(*queues))
    assert len(asked) == sweeps
