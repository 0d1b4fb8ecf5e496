"""Tidemark's self-monitoring reflects real health, as real processes: the catalog's Celery
workers exactly as the Procfile runs them and beat with the configured schedule, on a
private redis-server; the watchdog's web server (gunicorn) and loop
(``manage.py run_watchdog``); a slow consumer and a PagerDuty-compatible receiver on
loopback.

The story: thousands of deliveries queue behind a consumer that answers slowly, and drain
over several heartbeat periods, though far within ``TIDEMARK_DELIVERY_LAG_ALERT``. Nothing
is wrong with Tidemark, so: beat's heartbeat runs on time throughout, every system monitor
stays up, the operators are never paged, and a dataset team's monitor that goes quiet
during the backlog pages its owner at once (no trigger is held).

Time is compressed honestly: every duration that decides the outcome is the production
default times ``SCALE`` (the heartbeat's period, grace and expiry, the lag thresholds,
beat's whole schedule, a delivery pass's length and its lease, the per-request deadline
and margin, the watchdog's cycle), and so is the consumer's answer time. The backlog's
drain time is measured, and must span several heartbeat periods yet stay under the lag
threshold, as the production story does (about five minutes of a 10-minute threshold,
with 60 s heartbeats).

With the heartbeat on one worker with every other queue (as the Procfile ran it before),
this run expired four heartbeats in a row behind the delivery passes and the change-notice
sweeps, left the scheduler 28 s (4.6 periods) without a ping, put every system monitor
down and paged the operators "Tidemark is degraded".
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.utils import timezone

from catalog import doorbell, notices, self_monitoring
from catalog.actors import Actor
from catalog.models import Dataset, Delivery, Endpoint, Notification
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.catalog.stack_helpers import (
    Beat,
    ProcfileWorker,
    WatchdogLoop,
    procfile_queues,
    procfile_workers,
    scaled_beat_schedule,
    watchdog_environment,
)
from tests.catalog.worker_helpers import LoggedProcess, Receiver, free_port, worker_environment
from tests.catalog.worker_helpers import wait_until as _wait_until
from tests.watchdog.processes import WatchdogServer
from watchdog import monitors, tokens
from watchdog.models import Channel, Incident, Monitor, Page, Ping

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(240),
]

SCALE = 0.1  # a second here is ten in production
PD_PATH = "/v2/enqueue"
HOOK_PATH = "/hooks/slow"
OPERATORS = "O" * 32
ORDERS = "R" * 32
# Production: a consumer answering each delivery in 100 ms, and thousands of deliveries due
# at once that take it about 5 heartbeat periods to drain (half the lag threshold). The
# backlog's size is set from the time per delivery measured on a first batch here.
ANSWER_SECONDS = 0.1 * SCALE
DRAIN_PERIODS = 5
MIN_BACKLOG = 1000
# Production: a team's pipeline pinging every 2 minutes with 30 s of grace: it goes quiet
# as the backlog starts and is late halfway through it.
PIPELINE_PERIOD = round(120 * SCALE)
PIPELINE_GRACE = round(30 * SCALE)
HEARTBEAT_TASK = "catalog.tasks.heartbeat"


def scaled(seconds: float) -> float:
    return seconds * SCALE


def scaled_int(seconds: float) -> str:
    """A scaled duration for a setting read with ``env.int`` (whole seconds)."""
    value = seconds * SCALE
    assert value == int(value), f"{seconds} s does not scale to whole seconds"
    return str(int(value))


SELF = settings.TIDEMARK_SELF_MONITORING  # the production defaults, as this process reads them
DELIVERY = settings.TIDEMARK_DELIVERY
PERIOD = scaled(SELF["period_seconds"])
GRACE = scaled(SELF["grace_seconds"])
DELIVERY_LAG_ALERT = scaled(SELF["delivery_lag_seconds"])


def scaled_catalog_settings() -> dict[str, str]:
    """The catalog's settings that time its work and its heartbeat, scaled."""
    return {
        "TIDEMARK_HEARTBEAT_PERIOD": scaled_int(SELF["period_seconds"]),
        "TIDEMARK_HEARTBEAT_GRACE": scaled_int(SELF["grace_seconds"]),
        "TIDEMARK_DELIVERY_LAG_ALERT": scaled_int(SELF["delivery_lag_seconds"]),
        "TIDEMARK_POLL_LAG_ALERT": scaled_int(SELF["poll_lag_seconds"]),
        "TIDEMARK_FRESHNESS_LAG_ALERT": scaled_int(SELF["freshness_lag_seconds"]),
        "TIDEMARK_LINEAGE_LAG_ALERT": scaled_int(SELF["lineage_lag_seconds"]),
        "TIDEMARK_CHANGE_NOTICE_LAG_ALERT": scaled_int(SELF["change_notice_lag_seconds"]),
        "TIDEMARK_DELIVERY_DEADLINE": str(scaled(DELIVERY["total_deadline"])),
        "TIDEMARK_DELIVERY_LEASE_MARGIN": str(scaled(DELIVERY["lease_margin_seconds"])),
        "TIDEMARK_DELIVERY_PASS_SECONDS": str(scaled(DELIVERY["pass_seconds"])),
        "TIDEMARK_DOORBELL_INTERVAL": str(scaled(settings.TIDEMARK_DOORBELL_INTERVAL)),
    }


@dataclass
class Stack:
    """The running processes and what the test needs to reach them."""

    receiver: Receiver
    watchdog_url: str
    workers: dict[str, ProcfileWorker]
    processes: list[LoggedProcess] = field(default_factory=list)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()[-2500:]}" for p in self.processes)


_running: list[Stack] = []


def wait_until(condition, timeout: float, what: str, **kwargs) -> None:
    """Poll ``condition`` until true; on timeout fail with every process's log."""
    try:
        _wait_until(condition, timeout, what, **kwargs)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_running[0].logs() if _running else ''}") from None


@pytest.fixture
def stack(transactional_db, broker, tmp_path, settings) -> Iterator[Stack]:
    """Every process started and ready; all killed at teardown, before the test databases
    are flushed and Redis goes away."""
    receiver = Receiver()

    def answer(hit) -> int:
        if hit.path == HOOK_PATH:
            receiver.closing.wait(ANSWER_SECONDS)  # the slow consumer
            return 200
        return 202  # PagerDuty accepts events with 202

    receiver.respond = answer
    var = tmp_path / "var"
    watchdog_env = watchdog_environment(
        TIDEMARK_VAR_DIR=str(var),
        WATCHDOG_OPERATORS_CHANNELS=json.dumps(
            [{"kind": "pagerduty", "target": OPERATORS, "name": "operators on-call"}]
        ),
        WATCHDOG_PAGERDUTY_URL=receiver.url_for(PD_PATH),
        WATCHDOG_HOLD_AFTER_RECOVERY=scaled_int(
            settings.WATCHDOG_PAGING["hold_after_recovery_seconds"]
        ),
    )
    server = WatchdogServer(name="watchdog-web", log_path=tmp_path / "web.log", env=watchdog_env)
    server.port = free_port()
    loop = WatchdogLoop(
        name="watchdog-loop",
        log_path=tmp_path / "loop.log",
        env=watchdog_env,
        interval=scaled(settings.WATCHDOG_LOOP_SECONDS),
    )
    _, token = tokens.create("catalog")
    settings.TIDEMARK_WATCHDOG_URL = server.url
    settings.TIDEMARK_WATCHDOG_TOKEN = token
    catalog_env = worker_environment(
        broker_url=broker.url,
        lease_seconds=int(scaled_int(DELIVERY["lease_seconds"])),
        TIDEMARK_VAR_DIR=str(var),
        TIDEMARK_WATCHDOG_URL=server.url,
        TIDEMARK_WATCHDOG_TOKEN=token,
        **scaled_catalog_settings(),
    )
    beat = Beat(
        name="beat",
        log_path=tmp_path / "beat.log",
        env=catalog_env,
        schedule=scaled_beat_schedule(SCALE),
        schedule_file=tmp_path / "beat-schedule",
    )
    workers = {
        name: ProcfileWorker(
            name=name, log_path=tmp_path / f"{name}.log", env=catalog_env, args=tuple(args)
        )
        for name, args in procfile_workers().items()
    }
    running = Stack(receiver=receiver, watchdog_url=server.url, workers=workers)
    running.processes = [server, loop, beat, *workers.values()]
    _running[:] = [running]
    try:
        for process in running.processes:
            process.start()
        for process in running.processes:
            process.wait_ready()
        yield running
    finally:
        for process in running.processes:
            process.kill()
        receiver.close()
        _running.clear()


def pages(receiver: Receiver, routing_key: str) -> list[dict]:
    found = [json.loads(hit.body) for hit in receiver.snapshot() if hit.path == PD_PATH]
    return [e for e in found if e["routing_key"] == routing_key]


def seed_backlog(dataset: Dataset, endpoint: Endpoint, count: int, *, prefix: str) -> None:
    """``count`` notifications of ``dataset`` to ``endpoint``, every delivery due now (one
    commit, as after a producer's backfill), then the doorbell."""
    now = timezone.now()
    rows = [
        Notification(type=Notification.Type.PARTITION_READY, dataset=dataset, dedup_key=key)
        for key in (f"{prefix}:{i}" for i in range(count))
    ]
    for i, row in enumerate(rows):
        row.payload = notices.notification_payload(
            row.id, type=row.type, data={"partition": f"p{i}"}, now=now
        )
    Notification.objects.bulk_create(rows)
    Delivery.objects.bulk_create(
        Delivery(notification=row, endpoint=endpoint, next_attempt_at=now) for row in rows
    )
    doorbell.ring_now(doorbell.DELIVER_DUE)


def test_a_delivery_backlog_under_its_threshold_pages_nobody_and_heartbeats_stay_on_time(stack):
    receiver = stack.receiver
    # The documented topology: the heartbeat's queue has a worker of its own.
    queues = {name: procfile_queues(list(w.args)) for name, w in stack.workers.items()}
    [housekeeping] = [name for name, q in queues.items() if q == ["housekeeping"]]

    wait_until(
        lambda: (
            Monitor.objects.filter(system=True).count() == len(self_monitoring.system_monitors())
            and not Monitor.objects.filter(system=True).exclude(state=Monitor.State.UP).exists()
        ),
        30,
        "the system monitors to be provisioned and up",
    )
    scheduler = Monitor.objects.get(external_id=self_monitoring.SCHEDULER)
    assert (scheduler.period_seconds, scheduler.grace_seconds) == (PERIOD, GRACE)

    # A team's pipeline monitor, pinged now and then silent: it must page its owner
    # during the backlog, at once.
    orders_channel = monitors.channel_for(
        kind=Channel.Kind.PAGERDUTY, target=ORDERS, owner="orders", name="orders on-call"
    )
    pipeline = monitors.monitor_create(
        channels=[orders_channel],
        now=timezone.now(),
        name="orders nightly load",
        owner="orders",
        kind=Monitor.Kind.PERIOD,
        period_seconds=PIPELINE_PERIOD,
        grace_seconds=PIPELINE_GRACE,
    )

    # The backlog: a consumer's endpoint that answers slowly, every delivery due at once.
    owner = TeamFactory(slug="sales")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    subscription_create(
        actor=Actor(team=TeamFactory(slug="finance")),
        dataset=dataset,
        endpoint_url=receiver.url_for(HOOK_PATH),
    )
    endpoint = Endpoint.objects.get(url=receiver.url_for(HOOK_PATH))

    def drained() -> bool:
        return not Delivery.objects.filter(
            endpoint=endpoint, state__in=(Delivery.State.PENDING, Delivery.State.RETRYING)
        ).exists()

    measured_at = time.monotonic()
    seed_backlog(dataset, endpoint, 100, prefix="first")
    wait_until(drained, 30, "the first batch to be delivered")
    per_delivery = (time.monotonic() - measured_at) / 100
    backlog = max(MIN_BACKLOG, round(DRAIN_PERIODS * PERIOD / per_delivery))
    seeded_at = time.monotonic()
    seed_backlog(dataset, endpoint, backlog, prefix="backlog")
    ping = httpx.post(f"{stack.watchdog_url}/ping/{pipeline.ping_key}", timeout=5)
    assert ping.status_code == 200, ping.text
    started_at = timezone.now()

    lags: list[float] = []
    states: set[str] = set()

    def sample() -> None:
        waited = self_monitoring.lags(now=timezone.now())["tidemark:system:deliveries"]
        lags.append(waited.total_seconds() if waited else 0.0)
        states.update(Monitor.objects.filter(system=True).values_list("state", flat=True))

    wait_until(drained, DELIVERY_LAG_ALERT * 2, "the backlog to drain", every=sample)
    drain_seconds = time.monotonic() - seeded_at
    drained_at = timezone.now()
    # A tail as long as a system monitor's period and grace: a heartbeat missed during
    # the backlog would page now.
    tail_until = time.monotonic() + PERIOD + GRACE
    wait_until(lambda: time.monotonic() > tail_until, PERIOD + GRACE + 5, "the tail", every=sample)
    ended_at = timezone.now()

    # The story is the production one: a backlog over several heartbeat periods, its
    # oldest delivery far younger than the threshold (else paging would be right).
    assert drain_seconds >= 3 * PERIOD, f"{backlog} drained in {drain_seconds:.1f} s"
    assert max(lags) < DELIVERY_LAG_ALERT, f"the oldest due delivery waited {max(lags)} s"
    succeeded = Delivery.objects.filter(endpoint=endpoint, state=Delivery.State.SUCCEEDED)
    assert succeeded.count() == 100 + backlog

    # Heartbeats on time: one per period, each run by the housekeeping worker at once,
    # none expired in a queue.
    pings = list(
        Ping.objects.filter(monitor=scheduler, received_at__gte=started_at)
        .order_by("received_at")
        .values_list("received_at", flat=True)
    )
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(pings)]
    window = (ended_at - started_at).total_seconds()
    assert len(pings) >= window / PERIOD - 1, (len(pings), window)
    assert max(gaps) < 1.5 * PERIOD, gaps
    for name, worker in stack.workers.items():
        assert "Discarding revoked task" not in worker.log(), name
        if name != housekeeping:
            assert worker.ran(HEARTBEAT_TASK) == 0, name
    assert stack.workers[housekeeping].ran(HEARTBEAT_TASK) >= len(pings)

    # Nobody was told Tidemark is degraded, and nothing was held.
    assert states == {Monitor.State.UP}
    assert not Incident.objects.filter(monitor__system=True).exists()
    assert pages(receiver, OPERATORS) == []
    # The pipeline that went quiet during the backlog paged its owner at once.
    [incident] = Incident.objects.filter(monitor=pipeline)
    assert incident.opened_at < drained_at
    [page] = Page.objects.filter(incident=incident)
    assert (page.state, page.attempts) == (Page.State.SENT, 1)
    assert page.sent_at - incident.opened_at < timedelta(seconds=1)
    assert [e["event_action"] for e in pages(receiver, ORDERS)] == ["trigger"]
    assert set(Page.objects.values_list("state", flat=True)) == {Page.State.SENT}
