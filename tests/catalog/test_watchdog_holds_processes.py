"""One late root, one page, as real processes: the catalog's Celery workers (as the
Procfile runs them) and beat on a private redis-server, the watchdog's web server
(gunicorn, ``config.settings.watchdog``) the catalog reaches over HTTP, the watchdog loop
(``manage.py run_watchdog``) and a receiver on loopback standing in for PagerDuty and a
team's Slack.

Team orders owns two upstream datasets, orders and customers; team finance owns three
critical datasets downstream, each written by a job that reads one upstream (verified
lineage): revenue and refunds read orders, margins reads customers. Beat's
``sync-watchdog-dependencies`` tells the watchdog which data monitor each depends on.

All SLAs share one deadline minute; the upstreams' grace ends first. Orders is late,
customers is on time. Orders' owner is paged once; revenue's and refunds' pages are held
under orders' incident, and finance's Slack is told (``dataset.late`` with ``caused_by``)
instead; margins is late on its own (its upstream was on time) and pages finance as
before. Refunds lands while held: its page is resolved without ever going out. Orders
lands while revenue is still missing: orders' page resolves and revenue's held page goes
out.

Timing: a deadline is a cron minute at least ``FIRST_DEADLINE_LEAD`` after registration;
the upstreams' grace is 1 s, the downstreams' ``DOWNSTREAM_GRACE``; beat judges
freshness and syncs dependencies every second, sweeps deliveries every two.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog import watchdog_feed
from catalog.models import Dataset, LatePartition
from tests.catalog.factories import TeamFactory
from tests.catalog.lineage_helpers import job_between
from tests.catalog.stack_helpers import (
    Beat,
    ProcfileWorker,
    WatchdogLoop,
    procfile_workers,
    publish_and_ping,
    register_critical,
    watchdog_environment,
)
from tests.catalog.worker_helpers import Receiver, free_port, worker_environment
from tests.catalog.worker_helpers import wait_until as _wait_until
from tests.watchdog.processes import WatchdogServer
from watchdog import tokens
from watchdog.models import Incident, Monitor, Page

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(180),
]

PD_PATH = "/v2/enqueue"
SLACK_PATH = "/slack/finance"
ORDERS = "R" * 32  # team orders' routing key
FINANCE = "F" * 32  # team finance's routing key
FIRST_DEADLINE_LEAD = timedelta(seconds=25)  # monitors defined and lineage synced by then
DOWNSTREAM_GRACE = 8  # seconds: the downstreams are judged after the upstreams
HOLD_AFTER_UPSTREAM = 3  # seconds
BEAT_SCHEDULE = {
    "sweep-deliveries": {"task": "catalog.tasks.deliver_due", "schedule": 2.0},
    "evaluate-freshness": {"task": "catalog.tasks.evaluate_freshness", "schedule": 1.0},
    "sync-watchdog-dependencies": {
        "task": "catalog.tasks.sync_watchdog_dependencies",
        "schedule": 1.0,
    },
}

_processes: list = []


@pytest.fixture
def stack(transactional_db, broker, tmp_path, settings) -> Iterator[Receiver]:
    """The receiver, the watchdog's server and loop, the catalog's workers and beat, all
    started; every process is killed at teardown."""
    receiver = Receiver()
    receiver.respond = lambda hit: 202 if hit.path == PD_PATH else 200
    var = tmp_path / "var"
    watchdog_env = watchdog_environment(
        TIDEMARK_VAR_DIR=str(var),
        WATCHDOG_PAGERDUTY_URL=receiver.url_for(PD_PATH),
        WATCHDOG_PAGE_DEADLINE="3",
        # The downstream's run catches up for this long after its upstream recovered.
        WATCHDOG_HOLD_AFTER_UPSTREAM=str(HOLD_AFTER_UPSTREAM),
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
        WATCHDOG_PUBLIC_URL=server.url,
    )
    beat = Beat(
        name="beat",
        log_path=tmp_path / "beat.log",
        env=worker_env,
        schedule=BEAT_SCHEDULE,
        schedule_file=tmp_path / "beat-schedule",
    )
    workers = [
        ProcfileWorker(
            name=name, log_path=tmp_path / f"{name}.log", env=worker_env, args=tuple(args)
        )
        for name, args in procfile_workers().items()
    ]
    _processes[:] = [server, loop, beat, *workers]
    try:
        for process in _processes:
            process.start()
        for process in _processes:
            process.wait_ready()
        yield receiver
    finally:
        for process in _processes:
            process.kill()
        receiver.close()
        _processes.clear()


def wait_until(condition, timeout: float, what: str) -> None:
    """Poll ``condition``; on timeout fail with every process's log."""
    try:
        _wait_until(condition, timeout, what)
    except AssertionError as exc:
        logs = "\n".join(f"--- {p.name}\n{p.log()[-2500:]}" for p in _processes)
        raise AssertionError(f"{exc}\n{logs}") from None


def pages(receiver: Receiver, routing_key: str, action: str | None = None) -> list[dict]:
    found = [json.loads(hit.body) for hit in receiver.snapshot() if hit.path == PD_PATH]
    return [
        e
        for e in found
        if e["routing_key"] == routing_key and (action is None or e["event_action"] == action)
    ]


def slack_texts(receiver: Receiver) -> list[str]:
    return [json.loads(hit.body)["text"] for hit in receiver.snapshot() if hit.path == SLACK_PATH]


def data_monitor(dataset: Dataset) -> Monitor:
    return Monitor.objects.get(external_id=watchdog_feed.external_id(dataset))


def paging_incident(dataset: Dataset) -> Incident:
    """The open incident of ``dataset`` that pages (or would) for it: its data monitor's
    (a partitioned monitor's incident pages; its pipeline monitor's is part of it)."""
    return Incident.objects.get(monitor=data_monitor(dataset), resolved_at__isnull=True)


def test_one_late_root_pages_once_and_the_pages_it_causes_wait_under_it(stack):
    receiver = stack
    registered_at = timezone.now()
    deadline = (registered_at + FIRST_DEADLINE_LEAD).replace(second=0, microsecond=0)
    deadline += timedelta(minutes=1)
    due = (deadline - timedelta(days=1)).date().isoformat()
    orders_team = TeamFactory(slug="orders", paging_routing_key=ORDERS)
    finance = TeamFactory(
        slug="finance",
        paging_routing_key=FINANCE,
        contact_email="",
        contact_slack_webhook=receiver.url_for(SLACK_PATH),
    )
    orders = register_critical(orders_team, "orders", deadline=deadline, grace_seconds=1)
    customers = register_critical(orders_team, "customers", deadline=deadline, grace_seconds=1)
    revenue, refunds, margins = (
        register_critical(finance, name, deadline=deadline, grace_seconds=DOWNSTREAM_GRACE)
        for name in ("revenue", "refunds", "margins")
    )
    now = timezone.now()
    job_between(finance, "build_revenue", orders, revenue, seen_at=now)
    job_between(finance, "build_refunds", orders, refunds, seen_at=now)
    job_between(finance, "build_margins", customers, margins, seen_at=now)

    # Beat's dependency sync tells the watchdog what each downstream monitor depends on.
    wait_until(
        lambda: (
            Monitor.objects.filter(external_id__startswith="tidemark:dataset:").count() == 10
            and all(
                data_monitor(d).depends_on == [watchdog_feed.external_id(up)]
                for d, up in ((revenue, orders), (refunds, orders), (margins, customers))
            )
        ),
        (deadline - timezone.now()).total_seconds() - 2,
        "the monitors and their dependencies in the watchdog",
    )
    assert data_monitor(orders).depends_on == []

    # Customers is on time; orders, and everything downstream, is late.
    publish_and_ping(customers, due)
    judged = deadline + timedelta(seconds=DOWNSTREAM_GRACE)
    wait_until(
        lambda: (
            Incident.objects.filter(monitor__in=[data_monitor(d) for d in (revenue, refunds)])
            .filter(held_under__isnull=False)
            .count()
            == 2
            and len(pages(receiver, FINANCE, "trigger")) == 1
        ),
        (judged - timezone.now()).total_seconds() + 20,
        "the downstream deadlines to be judged",
    )
    root = paging_incident(orders)
    [orders_trigger] = pages(receiver, ORDERS, "trigger")
    assert orders_trigger["dedup_key"] == root.dedup_key
    for dataset in (revenue, refunds):
        held = paging_incident(dataset)
        assert held.held_under == root and held.released_at is None
        assert list(Page.objects.filter(incident=held).values_list("state", "attempts")) == [
            (Page.State.PENDING, 0)
        ]
    # Margins' upstream was on time: its lateness is its own, and it pages as before.
    [margins_trigger] = pages(receiver, FINANCE, "trigger")
    assert margins_trigger["dedup_key"] == paging_incident(margins).dedup_key
    assert paging_incident(margins).held_under is None

    # Finance is told in Slack why revenue and refunds are late, by the catalog.
    wait_until(
        lambda: sum("caused upstream" in t for t in slack_texts(receiver)) == 2,
        20,
        "finance's late notices",
    )
    late_revenue = LatePartition.objects.get(dataset=revenue, partition_key=due)
    assert (late_revenue.caused_by_dataset, late_revenue.caused_by_partition_key) == (orders, due)
    told = [t for t in slack_texts(receiver) if "revenue" in t and "caused upstream" in t]
    assert len(told) == 1 and f"s3://lake/orders partition {due}" in told[0]

    # Refunds lands while held: its incident resolves and its page never goes out.
    held_refunds = paging_incident(refunds)
    publish_and_ping(refunds, due)
    # The incident's resolution and its trigger's cancellation are two statements.
    wait_until(
        lambda: (
            Incident.objects.get(pk=held_refunds.pk).resolved_at is not None
            and not Page.objects.filter(incident=held_refunds, state=Page.State.PENDING).exists()
        ),
        20,
        "refunds' incident to resolve",
    )
    assert list(
        Page.objects.filter(incident=held_refunds).values_list("action", "state", "attempts")
    ) == [(Page.Action.TRIGGER, Page.State.CANCELLED, 0)]

    # Orders lands while revenue is still missing: orders' page resolves, revenue's goes out.
    held_revenue = paging_incident(revenue)
    publish_and_ping(orders, due)
    wait_until(
        lambda: (
            pages(receiver, ORDERS, "resolve") and len(pages(receiver, FINANCE, "trigger")) == 2
        ),
        60,
        "orders' resolve and revenue's released page",
    )
    held_revenue.refresh_from_db()
    assert held_revenue.released_at is not None and held_revenue.resolved_at is None
    assert pages(receiver, FINANCE, "trigger")[-1]["dedup_key"] == held_revenue.dedup_key
    assert Page.objects.get(incident=held_revenue).sent_at >= held_revenue.released_at
    orders_recovered = Incident.objects.get(pk=root.pk).resolved_at
    assert held_revenue.released_at >= orders_recovered + timedelta(seconds=HOLD_AFTER_UPSTREAM)
    # Everything paged: orders once (and its resolve), finance for margins and revenue.
    assert len(pages(receiver, ORDERS)) == 2
    sent_to_finance = {e["dedup_key"] for e in pages(receiver, FINANCE)}
    assert held_refunds.dedup_key not in sent_to_finance
