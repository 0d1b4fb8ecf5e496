"""Tidemark degraded, as real processes: the catalog's Celery workers (as the Procfile runs
them: one on the work queues, one on ``housekeeping``) and beat on a private redis-server,
the watchdog's web server (gunicorn, ``config.settings.watchdog``) that the catalog
reaches over HTTP, the watchdog loop (``manage.py run_watchdog``) and a PagerDuty-compatible
receiver on loopback.

One story on the wall clock. Publishing a critical dataset's partition pings its data
monitor. The workers stop: the system monitors go quiet, the operators' channel
(``WATCHDOG_OPERATORS_CHANNELS``) is paged once with "Tidemark is degraded", and the
dataset triggers the outage causes are held, each on its own: nothing is grouped while
Tidemark is degraded. The workers come back: the operators' incident resolves at once, but
the held triggers wait ``WATCHDOG_HOLD_AFTER_RECOVERY`` seconds more while the workers
catch up. A dataset whose data landed during the outage (its ping waited in the outbox)
resolves in that time and never pages its owner. Then the rest go out: a channel with more
than ``WATCHDOG_PAGE_GROUP_THRESHOLD`` of them gets one group naming only what is still
missing, another its few triggers one by one. A producer late while the workers run pages
its owner at once. A dataset whose data and pipeline monitors both miss the deadline is
one page (one cause).

Timing: the system monitors' period and grace are seconds (``TIDEMARK_HEARTBEAT_PERIOD``,
``TIDEMARK_HEARTBEAT_GRACE``). Beat's heartbeat follows that period, but its delivery
sweep is a fixed 30 s, so beat is started with a schedule of seconds (the sweep every 2 s,
the heartbeat every second). A data monitor's deadline is a cron minute: each dataset's
SLA is the next minute boundary that leaves room for the setup, daily partitions, and a
grace that places its judgement after the outage began (or after the hold that follows the
recovery); at that deadline yesterday's partition is due.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from catalog import self_monitoring, watchdog_feed
from catalog.models import Dataset, Delivery, Notification
from schedules import FreshnessSla
from tests.catalog.factories import TeamFactory
from tests.catalog.stack_helpers import (
    Beat,
    ProcfileWorker,
    WatchdogLoop,
    procfile_workers,
    publish_and_ping,
    register_critical,
    stop,
    watchdog_environment,
)
from tests.catalog.worker_helpers import LoggedProcess, Receiver, free_port, worker_environment
from tests.catalog.worker_helpers import wait_until as _wait_until
from tests.watchdog.processes import WatchdogServer
from watchdog import tokens
from watchdog.models import Incident, LoopState, Monitor, Page, PageGroup, Ping

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(180),
]

PD_PATH = "/v2/enqueue"
OPERATORS = "O" * 32  # the operators' PagerDuty routing key (a watchdog setting)
ORDERS = "R" * 32  # team orders' routing key
SHIPPING = "S" * 32  # team shipping's routing key
HEARTBEAT_PERIOD = 3  # seconds: a system monitor is down 6 s after its last ping
HEARTBEAT_GRACE = 3
GROUP_THRESHOLD = 1  # more due triggers than this for one channel go out as one group
HOLD_AFTER_RECOVERY = timedelta(seconds=5)  # held triggers wait this long after recovery
# From registration: the first SLA minute is at least this far away (the monitors must
# exist before it), and the held deadlines are judged no sooner than this (the outage must
# have been noticed by then).
FIRST_DEADLINE_LEAD = timedelta(seconds=12)
HELD_JUDGED_AFTER = timedelta(seconds=26)
# From the held judgement to the judgement of the deadline missed with the workers running:
# room for the workers' start, the recovery and the hold after it.
RECOVERED_WITHIN = timedelta(seconds=20)
# Beat as configured, on a schedule of seconds; it runs on while the workers are stopped.
BEAT_SCHEDULE = {
    "sweep-deliveries": {"task": "catalog.tasks.deliver_due", "schedule": 2.0},
    "heartbeat": {"task": "catalog.tasks.heartbeat", "schedule": 1.0},
}


# --- processes --------------------------------------------------------------------------


@dataclass
class Tidemark:
    """The running processes and what the test needs to reach them."""

    receiver: Receiver
    server: WatchdogServer
    loop: WatchdogLoop
    beat: Beat
    worker_env: dict[str, str]
    tmp_path: Path
    processes: list[LoggedProcess]

    def start_workers(self, suffix: str = "") -> list[ProcfileWorker]:
        """Every Celery worker of the Procfile, as it runs them (names end in ``suffix``)."""
        workers = [
            ProcfileWorker(
                name=f"{name}{suffix}",
                log_path=self.tmp_path / f"{name}{suffix}.log",
                env=self.worker_env,
                args=tuple(args),
            )
            for name, args in procfile_workers().items()
        ]
        self.processes += workers
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
        return workers

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()[-2500:]}" for p in self.processes)


_running: list[Tidemark] = []  # the current test's processes, for failure messages


@pytest.fixture
def tidemark(transactional_db, broker, tmp_path, settings) -> Iterator[Tidemark]:
    """Redis, the receiver, the watchdog's server and loop, and the catalog's beat, all
    started (no workers yet); every process is killed at teardown, before the test
    databases are flushed and Redis goes away."""
    receiver = Receiver()
    receiver.respond = lambda hit: 202  # PagerDuty accepts events with 202
    var = tmp_path / "var"
    watchdog_env = watchdog_environment(
        TIDEMARK_VAR_DIR=str(var),
        WATCHDOG_OPERATORS_CHANNELS=json.dumps(
            [{"kind": "pagerduty", "target": OPERATORS, "name": "operators on-call"}]
        ),
        WATCHDOG_PAGERDUTY_URL=receiver.url_for(PD_PATH),
        WATCHDOG_PAGE_DEADLINE="3",
        WATCHDOG_PAGE_GROUP_THRESHOLD=str(GROUP_THRESHOLD),
        WATCHDOG_HOLD_AFTER_RECOVERY=str(int(HOLD_AFTER_RECOVERY.total_seconds())),
    )
    server = WatchdogServer(
        name="watchdog-web", log_path=tmp_path / "watchdog-web.log", env=watchdog_env
    )
    server.port = free_port()
    loop = WatchdogLoop(
        name="watchdog-loop", log_path=tmp_path / "watchdog-loop.log", env=watchdog_env
    )

    _, token = tokens.create("catalog")
    settings.TIDEMARK_WATCHDOG_URL = server.url
    settings.TIDEMARK_WATCHDOG_TOKEN = token
    settings.WATCHDOG_PUBLIC_URL = server.url
    worker_env = worker_environment(
        broker_url=broker.url,
        lease_seconds=30,
        TIDEMARK_VAR_DIR=str(var),
        TIDEMARK_WATCHDOG_URL=server.url,
        TIDEMARK_WATCHDOG_TOKEN=token,
        TIDEMARK_HEARTBEAT_PERIOD=str(HEARTBEAT_PERIOD),
        TIDEMARK_HEARTBEAT_GRACE=str(HEARTBEAT_GRACE),
    )
    beat = Beat(
        name="beat",
        log_path=tmp_path / "beat.log",
        env=worker_env,
        schedule=BEAT_SCHEDULE,
        schedule_file=tmp_path / "beat-schedule",
    )
    running = Tidemark(
        receiver=receiver,
        server=server,
        loop=loop,
        beat=beat,
        worker_env=worker_env,
        tmp_path=tmp_path,
        processes=[server, loop, beat],
    )
    _running[:] = [running]
    try:
        for process in (server, loop, beat):
            process.start()
        for process in (server, loop, beat):
            process.wait_ready()
        yield running
    finally:
        for process in running.processes:
            process.kill()
        receiver.close()
        _running.clear()


# --- reads and steps -------------------------------------------------------------------


def wait_until(condition, timeout: float, what: str) -> None:
    """Poll ``condition`` until true; on timeout fail with every process's log."""
    try:
        _wait_until(condition, timeout, what)
    except AssertionError as exc:
        logs = _running[0].logs() if _running else ""
        raise AssertionError(f"{exc}\n{logs}") from None


def let_cycles_run(seconds: float) -> None:
    """Wait until the loop has been cycling for ``seconds`` more."""
    until = timezone.now() + timedelta(seconds=seconds)
    wait_until(
        lambda: LoopState.objects.filter(pk=1, last_cycle_at__gte=until).exists(),
        seconds + 10,
        "the watchdog loop to keep cycling",
    )


def events(receiver: Receiver, routing_key: str, action: str | None = None) -> list[dict]:
    found = [json.loads(hit.body) for hit in receiver.snapshot() if hit.path == PD_PATH]
    return [
        e
        for e in found
        if e["routing_key"] == routing_key and (action is None or e["event_action"] == action)
    ]


def system_monitors() -> list[Monitor]:
    return list(Monitor.objects.filter(system=True).order_by("external_id"))


def data_monitor(dataset: Dataset) -> Monitor:
    return Monitor.objects.get(external_id=watchdog_feed.external_id(dataset))


def pipeline_monitor(dataset: Dataset) -> Monitor:
    return Monitor.objects.get(external_id=watchdog_feed.pipeline_external_id(dataset))


def open_incident(monitor: Monitor) -> Incident:
    return Incident.objects.get(monitor=monitor, resolved_at__isnull=True)


# --- the story --------------------------------------------------------------------------


def test_while_the_worker_is_stopped_operators_are_paged_once_and_dataset_pages_wait(
    tidemark,
):
    receiver = tidemark.receiver
    workers = tidemark.start_workers()

    # Healthy: beat's heartbeat, run by the housekeeping worker, provisions and pings the
    # system monitors; the watchdog gives them the operators' channel.
    wait_until(
        lambda: (
            len(system_monitors()) == len(self_monitoring.system_monitors())
            and all(m.state == Monitor.State.UP for m in system_monitors())
        ),
        20,
        "the system monitors to be provisioned and up",
    )
    for monitor in system_monitors():
        [channel] = monitor.channels.all()
        assert (channel.kind, channel.target, channel.owner) == (
            "pagerduty",
            OPERATORS,
            "operators",
        )
        assert (monitor.period_seconds, monitor.grace_seconds) == (
            HEARTBEAT_PERIOD,
            HEARTBEAT_GRACE,
        )

    # Six critical datasets, all with a deadline at the same minute boundary.
    registered_at = timezone.now()
    deadline = (registered_at + FIRST_DEADLINE_LEAD).replace(second=0, microsecond=0)
    deadline += timedelta(minutes=1)
    held_grace = math.ceil(
        max(timedelta(seconds=1), registered_at + HELD_JUDGED_AFTER - deadline).total_seconds()
    )
    late_grace = held_grace + int(RECOVERED_WITHIN.total_seconds())
    orders = TeamFactory(slug="orders", paging_routing_key=ORDERS)
    shipping = TeamFactory(slug="shipping", paging_routing_key=SHIPPING)
    on_time = register_critical(orders, "orders", deadline=deadline, grace_seconds=held_grace)
    lands_meanwhile = register_critical(
        orders, "parcels", deadline=deadline, grace_seconds=held_grace
    )
    late = [
        register_critical(orders, name, deadline=deadline, grace_seconds=held_grace)
        for name in ("invoices", "refunds")
    ]
    late_elsewhere = register_critical(
        shipping, "manifests", deadline=deadline, grace_seconds=held_grace
    )
    late_while_running = register_critical(
        orders, "payouts", deadline=deadline, grace_seconds=late_grace
    )
    datasets = [on_time, lands_meanwhile, *late, late_elsewhere, late_while_running]
    [due] = [
        period.key
        for period in FreshnessSla(
            cron=on_time.sla_cron, time_zone="UTC", grace_seconds=0, partitioning="daily"
        ).due_at(deadline)
    ]
    assert due == (deadline - timedelta(days=1)).date().isoformat()

    wait_until(
        lambda: (
            Monitor.objects.filter(external_id__startswith="tidemark:dataset:").count()
            == 2 * len(datasets)
        ),
        15,
        "the data and pipeline monitors to be created",
    )
    monitor = data_monitor(on_time)
    assert (monitor.kind, monitor.partitioning, monitor.owner) == ("deadline", "daily", "orders")
    assert monitor.deadline_at == deadline
    assert [c.target for c in monitor.channels.all()] == [ORDERS]
    assert [c.target for c in data_monitor(late_elsewhere).channels.all()] == [SHIPPING]

    # Publishing a critical dataset's partition pings its data monitor.
    publish_and_ping(on_time, due)
    wait_until(
        lambda: Ping.objects.filter(monitor=data_monitor(on_time), partition=due).exists(),
        15,
        "the data monitor's ping",
    )
    ping = Ping.objects.get(monitor=data_monitor(on_time))
    assert (ping.kind, ping.partition) == (Ping.Kind.SUCCESS, due)

    # The workers stop; beat runs on. Parcels' producer publishes meanwhile: the catalog
    # records it, but its ping waits in the outbox.
    for worker in workers:
        stop(worker)
    stopped_at = timezone.now()
    publish_and_ping(lands_meanwhile, due)
    wait_until(
        lambda: events(receiver, OPERATORS, "trigger"),
        2 * (HEARTBEAT_PERIOD + HEARTBEAT_GRACE) + 5,
        "the operators' page",
    )
    degraded_at = timezone.now()
    assert degraded_at < deadline + timedelta(seconds=held_grace), (
        "the outage was noticed after the held deadlines were judged"
    )
    [trigger] = events(receiver, OPERATORS, "trigger")
    assert trigger["payload"]["summary"].startswith("Tidemark is degraded"), trigger
    assert not Ping.objects.filter(monitor=data_monitor(lands_meanwhile)).exists()
    assert Delivery.objects.filter(
        notification__type=Notification.Type.WATCHDOG_PING,
        notification__dataset=lands_meanwhile,
        state=Delivery.State.PENDING,
    ).exists()

    # The deadline passes while Tidemark is degraded: the triggers it causes are held, one
    # by one, one per dataset (its data and pipeline monitors miss the same deadline: one
    # page). Three to team orders' channel, more than the threshold, are not grouped yet.
    parcels = data_monitor(lands_meanwhile)
    still_missing = [m for d in late for m in (data_monitor(d), pipeline_monitor(d))]
    elsewhere = [data_monitor(late_elsewhere), pipeline_monitor(late_elsewhere)]
    held_monitors = [parcels, *still_missing, *elsewhere]
    wait_until(
        lambda: Incident.objects.filter(monitor__in=held_monitors).count() == len(held_monitors),
        (deadline + timedelta(seconds=held_grace) - timezone.now()).total_seconds() + 15,
        "the held deadlines to be judged",
    )
    let_cycles_run(1.5)

    assert all(m.state == Monitor.State.DOWN for m in system_monitors())
    system_incidents = Incident.objects.filter(monitor__system=True)
    held_incidents = Incident.objects.filter(monitor__in=held_monitors)
    assert max(i.opened_at for i in system_incidents) < min(i.opened_at for i in held_incidents)
    # every part went quiet...
    assert system_incidents.count() == len(self_monitoring.system_monitors())
    assert all(i.summary.startswith("Tidemark is degraded") for i in system_incidents)
    operators_pages = Page.objects.filter(channel__target=OPERATORS)
    assert operators_pages.count() == 1  # ...and the operators were paged once
    assert len(events(receiver, OPERATORS)) == 1
    assert events(receiver, ORDERS) == [] and events(receiver, SHIPPING) == []
    assert not Incident.objects.filter(
        monitor__in=[
            data_monitor(on_time),
            pipeline_monitor(on_time),
            pipeline_monitor(lands_meanwhile),
        ]
    ).exists()
    assert not Incident.objects.filter(monitor__in=[data_monitor(late_while_running)]).exists()
    assert not PageGroup.objects.exists()
    held_pages = Page.objects.filter(incident__monitor__in=held_monitors)
    assert sorted(
        held_pages.values_list("channel__target", "action", "state", "attempts", "group_id")
    ) == [(ORDERS, Page.Action.TRIGGER, Page.State.PENDING, 0, None)] * 3 + [
        (SHIPPING, Page.Action.TRIGGER, Page.State.PENDING, 0, None)
    ]
    for dataset in [*late, late_elsewhere]:
        data, pipeline = (
            open_incident(data_monitor(dataset)),
            open_incident(pipeline_monitor(dataset)),
        )
        assert {data.part_of_id, pipeline.part_of_id} in ({None, data.pk}, {None, pipeline.pk})
    parcels_incident = open_incident(parcels)
    assert parcels_incident.partition == due

    # The workers come back and catch up: the system monitors are pinged again and the
    # operators' incident resolves at once, while parcels' ping leaves the outbox.
    tidemark.start_workers("-back")
    wait_until(
        lambda: (
            events(receiver, OPERATORS, "resolve")
            and not system_incidents.filter(resolved_at__isnull=True).exists()
        ),
        20,
        "the system incidents to resolve and the operators' resolve",
    )
    recovered_at = max(i.resolved_at for i in Incident.objects.filter(monitor__system=True))
    released_at = recovered_at + HOLD_AFTER_RECOVERY
    assert recovered_at > stopped_at
    [operators_resolve] = events(receiver, OPERATORS, "resolve")
    assert operators_resolve["dedup_key"] == trigger["dedup_key"]

    # The held triggers wait out the hold, then go out: grouped for team orders, one by one
    # for team shipping (under the threshold).
    wait_until(
        lambda: (
            len(events(receiver, ORDERS, "trigger")) == 1
            and len(events(receiver, SHIPPING, "trigger")) == 1
        ),
        (released_at - timezone.now()).total_seconds() + 15,
        "the held pages to go out after the hold",
    )
    let_cycles_run(1.0)
    assert all(m.state == Monitor.State.UP for m in system_monitors())

    # Parcels' data landed in the meantime: its incident resolved before the release, its
    # trigger was dropped unsent, and its owner was never paged about it.
    assert Ping.objects.filter(monitor=parcels, partition=due).exists()
    parcels_incident.refresh_from_db()
    assert parcels_incident.resolved_at is not None
    assert parcels_incident.resolved_at < released_at, (
        "parcels' ping landed after the hold: raise HOLD_AFTER_RECOVERY?"
    )
    assert sorted(
        Page.objects.filter(incident=parcels_incident).values_list("action", "state", "attempts")
    ) == [(Page.Action.TRIGGER, Page.State.CANCELLED, 0)]
    everything_paged = [json.loads(hit.body) for hit in receiver.snapshot()]
    assert parcels_incident.dedup_key not in {e["dedup_key"] for e in everything_paged}

    # Team orders: one group, made at the release, of the two datasets still missing (each
    # paged through one of its two monitors).
    group = PageGroup.objects.get()
    assert group.channel.target == ORDERS and group.resolved_at is None
    assert group.opened_at >= released_at
    assert len(group.monitors) == 2
    assert {name.rsplit(" ", 1)[0] for name in group.monitors} == {
        f"{d.namespace}/{d.name}" for d in late
    }
    assert parcels.name not in group.summary
    members = Page.objects.filter(group=group, incident__isnull=False)
    assert sorted(members.values_list("incident__monitor__name", flat=True)) == sorted(
        group.monitors
    )
    assert set(members.values_list("action", "state", "attempts")) == {
        (Page.Action.TRIGGER, Page.State.GROUPED, 0)
    }
    group_trigger = Page.objects.get(group=group, incident__isnull=True)
    assert (group_trigger.action, group_trigger.state, group_trigger.attempts) == (
        Page.Action.TRIGGER,
        Page.State.SENT,
        1,
    )
    assert group_trigger.sent_at >= released_at
    [group_page] = events(receiver, ORDERS, "trigger")
    assert group_page["dedup_key"] == group.dedup_key
    assert group_page["payload"]["summary"].startswith("2 deadlines missed at once")
    assert group_page["payload"]["custom_details"] == {
        "monitors": group.monitors,
        "count": 2,
    }
    # Team shipping: its trigger on its own (under the threshold), after the hold too.
    shipping_pages = Page.objects.filter(channel__target=SHIPPING)
    assert sorted(shipping_pages.values_list("action", "state", "attempts", "group_id")) == [
        (Page.Action.TRIGGER, Page.State.SENT, 1, None)
    ]
    assert all(p.sent_at >= released_at for p in shipping_pages)
    [shipping_incident] = [open_incident(m) for m in elsewhere if not open_incident(m).part_of]
    assert {e["dedup_key"] for e in events(receiver, SHIPPING, "trigger")} == {
        shipping_incident.dedup_key
    }
    # The operators' resolve was never held.
    operators_resolve_page = Page.objects.get(channel__target=OPERATORS, action=Page.Action.RESOLVE)
    assert operators_resolve_page.sent_at < released_at

    # The workers run and payouts' producer is late: its owner is paged at once.
    payouts = data_monitor(late_while_running)
    wait_until(
        lambda: len(events(receiver, ORDERS, "trigger")) == 2,
        (deadline + timedelta(seconds=late_grace) - timezone.now()).total_seconds() + 15,
        "payouts' pages",
    )
    let_cycles_run(1.0)
    payouts_incident = open_incident(payouts)
    assert payouts_incident.opened_at > released_at, (
        "payouts' deadline was judged during the hold: raise RECOVERED_WITHIN?"
    )
    assert payouts_incident.partition == due
    pipeline_incident = open_incident(pipeline_monitor(late_while_running))
    # Its data and pipeline monitors missed the same deadline: one page.
    [paging] = [i for i in (payouts_incident, pipeline_incident) if i.part_of_id is None]
    [part] = [i for i in (payouts_incident, pipeline_incident) if i.part_of_id == paging.pk]
    triggers = events(receiver, ORDERS, "trigger")
    assert [e["dedup_key"] for e in triggers[1:]] == [paging.dedup_key]
    assert triggers[1]["payload"]["summary"] == paging.summary
    page = Page.objects.get(incident=paging)
    assert (page.state, page.attempts, page.group_id) == (Page.State.SENT, 1, None)
    assert page.sent_at - paging.opened_at < timedelta(seconds=1)
    assert not Page.objects.filter(incident=part).exists()
    assert PageGroup.objects.count() == 1
    # Nothing else: one page and its resolve for the operators, the group and payouts'
    # page for team orders, manifests' page for team shipping.
    assert len(events(receiver, OPERATORS)) == 2
    assert len(events(receiver, ORDERS)) == 2
    assert len(events(receiver, SHIPPING)) == 1
    assert not Page.objects.filter(state=Page.State.PENDING).exists()
