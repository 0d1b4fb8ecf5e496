"""The watchdog in process: pings, deadlines, incidents and pages to a real local
PagerDuty-compatible receiver (pytest-httpserver on 127.0.0.1)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from watchdog import evaluation, loop, monitors, paging
from watchdog.models import Incident, Monitor, Page, PageGroup, Ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
# Run ids (``?rid=``) are UUIDs, as the ping convention requires.
RUN_A = "0a6e4c1e-5d3b-4f7a-9c2e-00000000000a"
RUN_B = "0a6e4c1e-5d3b-4f7a-9c2e-00000000000b"


def cycle(at):
    with time_machine.travel(at, tick=False):
        return loop.run_cycle(sender=paging.sender_from_settings(), now=at)


def ping(monitor, suffix="", at=T0, method="get", **params):
    with time_machine.travel(at, tick=False):
        client = Client()
        return getattr(client, method)(f"/ping/{monitor.ping_key}{suffix}", params)


def daily_monitor(channel, **fields):
    fields.setdefault("name", "orders daily")
    with time_machine.travel(T0 - timedelta(hours=12), tick=False):
        return monitors.monitor_create(
            channels=[channel],
            now=T0 - timedelta(hours=12),
            kind=Monitor.Kind.DEADLINE,
            cron="30 6 * * *",
            timezone="Europe/Berlin",
            partitioning="daily",
            partition_timezone="Europe/Berlin",
            grace_seconds=600,
            **fields,
        )


def test_a_missed_deadline_pages_once_and_the_partition_resolves_it(pagerduty, channel):
    monitor = daily_monitor(channel)
    deadline = datetime(2026, 11, 29, 5, 30, tzinfo=UTC)  # 06:30 Berlin
    assert monitor.deadline_at == deadline

    cycle(deadline + timedelta(minutes=9))
    assert pagerduty == []  # inside the grace
    cycle(deadline + timedelta(minutes=10))
    cycle(deadline + timedelta(minutes=11))

    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    trigger = pagerduty[0]
    assert trigger["routing_key"] == "R" * 32
    assert "2026-11-28" in trigger["payload"]["summary"]
    incident = Incident.objects.get()
    assert trigger["dedup_key"] == incident.dedup_key

    # Yesterday's partition does not satisfy today's deadline.
    assert (
        ping(monitor, partition="2026-11-27", at=deadline + timedelta(minutes=20)).status_code
        == 200
    )
    cycle(deadline + timedelta(minutes=21))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]

    assert (
        ping(monitor, partition="2026-11-28", at=deadline + timedelta(minutes=30)).status_code
        == 200
    )
    cycle(deadline + timedelta(minutes=31))

    assert [e["event_action"] for e in pagerduty] == ["trigger", "resolve"]
    assert pagerduty[1]["dedup_key"] == trigger["dedup_key"]
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.UP


def test_a_ping_before_the_deadline_means_no_page(pagerduty, channel):
    monitor = daily_monitor(channel)
    ping(monitor, partition="2026-11-28", at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 6, 0, tzinfo=UTC))
    assert pagerduty == [] and not Incident.objects.exists()
    monitor.refresh_from_db()
    assert monitor.deadline_at == datetime(2026, 11, 30, 5, 30, tzinfo=UTC)


def test_after_downtime_each_missed_deadline_is_one_incident_at_once(pagerduty, channel):
    daily_monitor(channel)
    report = cycle(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))  # three deadlines missed
    assert [m.partition for m in report.missed] == ["2026-11-28", "2026-11-29", "2026-11-30"]
    assert [e["event_action"] for e in pagerduty] == ["trigger"] * 3
    assert len({e["dedup_key"] for e in pagerduty}) == 3
    cycle(datetime(2026, 12, 1, 12, 1, tzinfo=UTC))
    assert len(pagerduty) == 3


def test_evaluating_twice_opens_one_incident(pagerduty, channel):
    daily_monitor(channel)
    at = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
    evaluation.evaluate_due(now=at)
    Monitor.objects.update(deadline_at=datetime(2026, 11, 29, 5, 30, tzinfo=UTC), check_at=at)
    evaluation.evaluate_due(now=at)  # as a second loop that read the row before the first wrote
    assert Incident.objects.count() == 1
    assert Page.objects.filter(action="trigger").count() == 1


def test_period_monitor_goes_down_once_and_recovers_on_ping(pagerduty, channel):
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[channel], now=T0, name="hourly export", period_seconds=3600, grace_seconds=300
        )
    assert monitor.check_at is None  # watched from its first ping
    ping(monitor, at=T0)
    cycle(T0 + timedelta(minutes=64))
    assert pagerduty == []
    cycle(T0 + timedelta(minutes=66))
    cycle(T0 + timedelta(hours=5))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    ping(monitor, at=T0 + timedelta(hours=5, minutes=1))
    cycle(T0 + timedelta(hours=5, minutes=2))
    assert [e["event_action"] for e in pagerduty] == ["trigger", "resolve"]


def test_fail_and_exit_status_page_at_once(pagerduty, channel):
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(channels=[channel], now=T0, name="job", period_seconds=60)
    ping(monitor, "/start", rid=RUN_A)
    ping(monitor, "/3", at=T0 + timedelta(seconds=42), rid=RUN_A)
    cycle(T0 + timedelta(seconds=43))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    assert "exit status 3" in pagerduty[0]["payload"]["summary"]
    failed = Ping.objects.get(kind="fail")
    assert (failed.exit_status, failed.duration_ms) == (3, 42_000)
    ping(monitor, "/0", at=T0 + timedelta(seconds=50))
    cycle(T0 + timedelta(seconds=51))
    assert [e["event_action"] for e in pagerduty] == ["trigger", "resolve"]


def test_resolved_before_sent_means_no_page_at_all(pagerduty, channel):
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(channels=[channel], now=T0, name="job", period_seconds=60)
    ping(monitor, "/fail")
    ping(monitor, at=T0 + timedelta(seconds=1))
    cycle(T0 + timedelta(seconds=2))
    assert pagerduty == []
    assert Page.objects.get().state == Page.State.CANCELLED


def test_ping_endpoints_answer_tiny_and_strict(channel):
    monitor = daily_monitor(channel, post_only=True)
    assert Client().get("/ping/6f9619ff-8b86-d011-b42d-00cf4fc964ff").status_code == 404
    assert Client().get("/ping/not-a-uuid").status_code == 404
    ignored = ping(monitor, partition="2026-11-28")
    assert ignored.status_code == 200 and Ping.objects.count() == 0
    bad = Client().post(f"/ping/{monitor.ping_key}?partition=28.11.2026")
    assert bad.status_code == 400 and b"partition" in bad.content
    assert Client().post(f"/ping/{monitor.ping_key}/256").status_code == 400
    body = "é".encode() * 6000 + b"\xff\x00"
    ok = Client().post(f"/ping/{monitor.ping_key}", data=body, content_type="text/plain")
    assert ok.status_code == 200 and ok.content == b"OK"
    stored = Ping.objects.get().body
    assert len(stored) <= 10_000 and "\x00" not in stored


def test_pings_are_rate_limited_per_monitor(channel, settings):
    settings.WATCHDOG_PING_RATE_PER_MINUTE = 3
    monitor = daily_monitor(channel)
    codes = [ping(monitor, at=T0 + timedelta(seconds=i)).status_code for i in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    assert ping(monitor, at=T0 + timedelta(minutes=2)).status_code == 200


def test_a_flood_of_missed_deadlines_is_one_grouped_page_resolved_when_all_are(pagerduty, channel):
    many = [daily_monitor(channel, name=f"feed {n:02d}") for n in range(15)]
    cycle(datetime(2026, 11, 29, 6, 0, tzinfo=UTC))

    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    assert pagerduty[0]["payload"]["summary"].startswith("15 deadlines missed at once")
    assert pagerduty[0]["payload"]["custom_details"]["count"] == 15
    assert Incident.objects.count() == 15  # each deadline is still its own incident

    for monitor in many[:-1]:
        ping(monitor, partition="2026-11-28", at=datetime(2026, 11, 29, 6, 5, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 6, 6, tzinfo=UTC))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]  # one is still missing

    ping(many[-1], partition="2026-11-28", at=datetime(2026, 11, 29, 6, 7, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 6, 8, tzinfo=UTC))
    assert [e["event_action"] for e in pagerduty] == ["trigger", "resolve"]
    assert pagerduty[1]["dedup_key"] == pagerduty[0]["dedup_key"]


def test_a_few_missed_deadlines_are_paged_one_by_one(pagerduty, channel):
    for n in range(3):
        daily_monitor(channel, name=f"feed {n}")
    cycle(datetime(2026, 11, 29, 6, 0, tzinfo=UTC))
    assert len({e["dedup_key"] for e in pagerduty}) == 3


def test_one_late_ping_does_not_excuse_the_deadlines_missed_before_it(pagerduty, channel):
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[channel], now=T0, name="nightly", kind="deadline", cron="0 6 * * *"
        )
    ping(monitor, at=datetime(2026, 12, 1, 11, 0, tzinfo=UTC))  # after three deadlines
    report = cycle(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    assert len(report.missed) == 3


def test_while_tidemark_is_degraded_operators_are_paged_once_and_dataset_pages_wait(
    pagerduty, channel, settings
):
    settings.WATCHDOG_OPERATORS_CHANNELS = [{"kind": "pagerduty", "target": "O" * 32}]
    operators = monitors.operators_channels()
    with time_machine.travel(T0, tick=False):
        system = [
            monitors.monitor_create(
                channels=operators,
                now=T0,
                name=name,
                period_seconds=60,
                grace_seconds=120,
                system=True,
            )
            for name in ("Tidemark beat and workers", "Tidemark deliveries")
        ]
    dataset_monitor = daily_monitor(channel)
    for monitor in system:
        ping(monitor, at=datetime(2026, 11, 29, 5, 0, tzinfo=UTC))

    # The workers stop at 05:00: the system monitors go quiet, then the data is late.
    cycle(datetime(2026, 11, 29, 5, 5, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 5, 45, tzinfo=UTC))

    assert [(e["routing_key"][0], e["event_action"]) for e in pagerduty] == [("O", "trigger")]
    assert pagerduty[0]["payload"]["summary"].startswith("Tidemark is degraded")
    assert Incident.objects.filter(monitor=dataset_monitor).count() == 1  # opened, held

    # Tidemark recovers and the data it was holding back lands: nobody else is woken.
    for monitor in system:
        ping(monitor, at=datetime(2026, 11, 29, 5, 50, tzinfo=UTC))
    ping(dataset_monitor, partition="2026-11-28", at=datetime(2026, 11, 29, 5, 50, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 5, 51, tzinfo=UTC))
    assert [(e["routing_key"][0], e["event_action"]) for e in pagerduty] == [
        ("O", "trigger"),
        ("O", "resolve"),
    ]


def test_after_tidemark_recovers_a_still_missing_partition_pages_its_owner(
    pagerduty, channel, settings
):
    with time_machine.travel(T0, tick=False):
        system = monitors.monitor_create(
            now=T0, name="Tidemark deliveries", period_seconds=60, grace_seconds=120, system=True
        )
    dataset_monitor = daily_monitor(channel)
    ping(system, at=datetime(2026, 11, 29, 5, 0, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 5, 45, tzinfo=UTC))
    assert pagerduty == []  # held while degraded
    ping(system, at=datetime(2026, 11, 29, 5, 50, tzinfo=UTC))
    # Still held while the catalog catches up on what queued during its outage.
    cycle(datetime(2026, 11, 29, 5, 51, tzinfo=UTC))
    assert pagerduty == []
    cycle(datetime(2026, 11, 29, 5, 52, 1, tzinfo=UTC))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    assert pagerduty[0]["dedup_key"] == Incident.objects.get(monitor=dataset_monitor).dedup_key


def test_held_pages_are_grouped_on_release_and_those_whose_data_landed_never_go_out(
    pagerduty, channel, settings
):
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "group_threshold": 3}
    with time_machine.travel(T0, tick=False):
        system = monitors.monitor_create(
            now=T0, name="Tidemark deliveries", period_seconds=60, grace_seconds=120, system=True
        )
    datasets = [daily_monitor(channel, name=f"ds{i}") for i in range(6)]
    ping(system, at=datetime(2026, 11, 29, 5, 0, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 5, 45, tzinfo=UTC))
    assert pagerduty == [] and Incident.objects.filter(monitor__system=False).count() == 6
    assert not PageGroup.objects.exists()  # held pages are not grouped while held

    # Two datasets' data lands during the outage; Tidemark recovers and catches up.
    for monitor in datasets[:2]:
        ping(monitor, partition="2026-11-28", at=datetime(2026, 11, 29, 5, 46, tzinfo=UTC))
    ping(system, at=datetime(2026, 11, 29, 5, 50, tzinfo=UTC))
    cycle(datetime(2026, 11, 29, 5, 52, 30, tzinfo=UTC))

    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    group = PageGroup.objects.get()
    assert pagerduty[0]["dedup_key"] == group.dedup_key
    assert group.monitors == ["ds2", "ds3", "ds4", "ds5"]


def test_a_group_resolved_before_its_trigger_went_out_is_never_sent(pagerduty, channel, settings):
    settings.WATCHDOG_PAGING = {**settings.WATCHDOG_PAGING, "group_threshold": 3}
    datasets = [daily_monitor(channel, name=f"ds{i}") for i in range(4)]
    at = datetime(2026, 11, 29, 5, 45, tzinfo=UTC)
    paging.group_floods(now=at)  # nothing due yet
    with time_machine.travel(at, tick=False):
        evaluation.evaluate_due(now=at)
        (group,) = paging.group_floods(now=at)
    for monitor in datasets:
        ping(monitor, partition="2026-11-28", at=at + timedelta(seconds=1))
    cycle(at + timedelta(seconds=2))
    assert pagerduty == []
    assert Page.objects.get(group=group, incident__isnull=True).state == Page.State.CANCELLED


def test_a_hung_run_pages_even_when_a_later_run_finished(pagerduty, channel):
    with time_machine.travel(T0, tick=False):
        monitor = monitors.monitor_create(
            channels=[channel], now=T0, name="loader", period_seconds=3600, max_runtime_seconds=60
        )
    ping(monitor, "/start", rid=RUN_A, at=T0)
    ping(monitor, "/start", rid=RUN_B, at=T0 + timedelta(seconds=10))
    ping(monitor, "/0", rid=RUN_B, at=T0 + timedelta(seconds=20))
    cycle(T0 + timedelta(seconds=59))
    assert pagerduty == []

    cycle(T0 + timedelta(seconds=61))
    cycle(T0 + timedelta(seconds=62))
    assert [e["event_action"] for e in pagerduty] == ["trigger"]
    assert f"run {RUN_A} " in pagerduty[0]["payload"]["summary"]
    assert pagerduty[0]["payload"]["class"] == "runtime"

    ping(monitor, "/0", rid=RUN_A, at=T0 + timedelta(seconds=90))
    cycle(T0 + timedelta(seconds=91))
    assert [e["event_action"] for e in pagerduty] == ["trigger", "resolve"]
    assert Ping.objects.get(run_id=RUN_A, kind="success").duration_ms == 90_000


@pytest.mark.parametrize(
    ("cron", "created", "deadlines"),
    [
        # Europe/Berlin springs forward on 2026-03-29: 02:30 does not exist that night and
        # moves to the next valid instant (03:00 CEST = 01:00 UTC).
        (
            "30 2 * * *",
            datetime(2026, 3, 27, 12, 0, tzinfo=UTC),
            [
                datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
                datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
                datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
            ],
        ),
        # It falls back on 2026-10-25: 02:30 happens twice and counts once, the first time.
        (
            "30 2 * * *",
            datetime(2026, 10, 23, 12, 0, tzinfo=UTC),
            [
                datetime(2026, 10, 24, 0, 30, tzinfo=UTC),
                datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
                datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
            ],
        ),
    ],
)
def test_deadlines_across_dst_changes_open_one_incident_each(
    pagerduty, channel, cron, created, deadlines
):
    with time_machine.travel(created, tick=False):
        monitors.monitor_create(
            channels=[channel],
            now=created,
            name="berlin nightly",
            kind="deadline",
            cron=cron,
            timezone="Europe/Berlin",
        )
    report = cycle(deadlines[-1] + timedelta(minutes=1))
    assert [m.deadline_at for m in report.missed] == deadlines


def test_judging_many_due_deadlines_costs_a_few_statements(channel, django_assert_max_num_queries):
    """Each monitor's newest success settles its judgement: no statement per monitor."""
    for i in range(15):
        daily_monitor(channel, name=f"daily {i}")
        with time_machine.travel(T0, tick=False):
            monitors.monitor_create(
                channels=[channel],
                now=T0,
                name=f"plain {i}",
                kind=Monitor.Kind.DEADLINE,
                cron="30 5 * * *",
                grace_seconds=600,
            )
    at = datetime(2026, 11, 29, 5, 45, tzinfo=UTC)
    with time_machine.travel(at, tick=False), django_assert_max_num_queries(12):
        missed = evaluation.evaluate_due(now=at)
    assert len(missed) == 30
