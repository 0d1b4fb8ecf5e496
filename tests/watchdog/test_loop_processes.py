"""The watchdog loop as real processes: ``manage.py run_watchdog`` subprocesses, deployed
alone (``config.settings.watchdog``) on pytest-django's test watchdog database, paging a
PagerDuty-compatible receiver on loopback. Two loops page once; a survivor carries on
after the other is SIGKILLed; one loop started after downtime pages every deadline missed
meanwhile, at once; the heartbeat goes out once per interval whatever the number of loops,
and a failing heartbeat never stops paging.

Real time throughout (the loops run on the wall clock), so monitors have periods of
seconds; ``transaction=True`` because the loops only see committed rows.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client
from django.utils import timezone

from tests.catalog.worker_helpers import LoggedProcess, Receiver
from tests.catalog.worker_helpers import wait_until as _wait_until
from tests.watchdog.processes import standalone_environment, watchdog_database_url
from watchdog import monitors
from watchdog.models import Channel, Incident, LoopState, Monitor, Page

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
    pytest.mark.timeout(90),
]

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
INTERVAL = "0.2"  # seconds between a loop's cycles
PAGED_WITHIN = 12.0  # seconds from a missed deadline (+ grace) to the page at the receiver
PD_PATH = "/v2/enqueue"
HEARTBEAT_PATH = "/heartbeat"


# --- processes --------------------------------------------------------------------------


@dataclass
class Loop(LoggedProcess):
    """One ``manage.py run_watchdog`` process in its own session, logging to a file."""

    def argv(self) -> list[str]:
        return [sys.executable, MANAGE, "run_watchdog", "--interval", INTERVAL]

    @property
    def application_name(self) -> str:
        return f"tidemark-wd-{self.name}"

    def connected(self) -> bool:
        with connections["watchdog"].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = %s AND datname = current_database()",
                [self.application_name],
            )
            return cursor.fetchone()[0] > 0

    def wait_ready(self, timeout: float = 20) -> None:
        """Running cycles: its first cycle opened its database connection."""
        wait_until(
            lambda: not self.alive or self.connected(), timeout, f"loop {self.name} to connect"
        )
        assert self.alive, f"loop {self.name} exited:\n{self.log()[-3000:]}"


_running: list[Loop] = []  # the current test's loops, for failure messages


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """PagerDuty Events API v2 stand-in (and heartbeat endpoint): answers 202 and records."""
    server = Receiver()
    server.respond = lambda hit: 202
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def start_loop(transactional_db, receiver, tmp_path):
    """``start_loop(name, **env) -> Loop``, started and connected; every loop is SIGKILLed
    at teardown, before the test databases are flushed."""
    loops: list[Loop] = []

    def start(name: str, **extra_env: str) -> Loop:
        env = standalone_environment(
            tmp_path,
            **{
                "WATCHDOG_DATABASE_URL": watchdog_database_url(
                    application_name=f"tidemark-wd-{name}"
                ),
                "WATCHDOG_PAGERDUTY_URL": receiver.url_for(PD_PATH),
                "WATCHDOG_PAGE_DEADLINE": "3",
                "TIDEMARK_OUTBOUND_ALLOW_NETWORKS": "127.0.0.0/8",
                "TIDEMARK_OUTBOUND_ALLOW_HTTP": "true",
                **extra_env,
            },
        )
        loop = Loop(name=name, env=env, log_path=tmp_path / f"{name}.log")
        loops.append(loop)
        _running[:] = loops
        loop.start().wait_ready()
        return loop

    try:
        yield start
    finally:
        for loop in loops:
            loop.kill()
        _running.clear()


@pytest.fixture
def channel(transactional_db) -> Channel:
    return Channel.objects.create(
        name="orders on-call", kind=Channel.Kind.PAGERDUTY, target="R" * 32
    )


# --- helpers ----------------------------------------------------------------------------


def wait_until(condition, timeout: float, what: str) -> None:
    """Poll ``condition`` until true; on timeout fail with the loops' logs and LoopState."""
    try:
        _wait_until(condition, timeout, what)
    except AssertionError as exc:
        state = LoopState.objects.filter(pk=1).values().first()
        raise AssertionError(f"{exc}\nLoopState: {state}\n{logs(*_running)}") from None


def events(receiver: Receiver, action: str | None = None) -> list[dict]:
    found = [json.loads(hit.body) for hit in receiver.snapshot() if hit.path == PD_PATH]
    return [e for e in found if action is None or e["event_action"] == action]


def heartbeats(receiver: Receiver):
    return [hit for hit in receiver.snapshot() if hit.path == HEARTBEAT_PATH]


def let_cycles_run(seconds: float) -> None:
    """Wait until the loops have been cycling for ``seconds`` more (LoopState advances)."""
    until = timezone.now() + timedelta(seconds=seconds)
    wait_until(
        lambda: (
            (state := LoopState.objects.filter(pk=1).first()) is not None
            and state.last_cycle_at is not None
            and state.last_cycle_at >= until
        ),
        seconds + 10,
        "the loops to keep cycling",
    )


def quick_period_monitor(channel: Channel, name: str) -> Monitor:
    """A period monitor (2 s, 1 s grace) pinged once now: judged missed 3 s from now."""
    monitor = monitors.monitor_create(
        channels=[channel], now=timezone.now(), name=name, period_seconds=2, grace_seconds=1
    )
    assert Client().post(f"/ping/{monitor.ping_key}").status_code == 200
    monitor.refresh_from_db()
    assert monitor.check_at is not None
    return monitor


def logs(*loops: Loop) -> str:
    return "\n".join(f"--- {loop.name}\n{loop.log()[-2000:]}" for loop in loops)


# --- tests ------------------------------------------------------------------------------


def test_two_loops_page_a_missed_deadline_once_and_a_survivor_carries_on(
    start_loop, receiver, channel
):
    first, second = start_loop("a"), start_loop("b")

    monitor = quick_period_monitor(channel, "quick export")
    wait_until(
        lambda: len(events(receiver, "trigger")) >= 1,
        PAGED_WITHIN,
        "the trigger",
    )
    let_cycles_run(1.5)  # ~7 more cycles of each loop: no duplicate may appear

    incident = Incident.objects.get()
    assert (incident.monitor_id, incident.reason) == (monitor.pk, "missed")
    triggers = events(receiver, "trigger")
    assert len(triggers) == 1, logs(first, second)
    assert triggers[0]["dedup_key"] == incident.dedup_key
    assert triggers[0]["routing_key"] == "R" * 32
    assert triggers[0]["payload"]["component"] == "quick export"
    page = Page.objects.get()
    assert (page.state, page.attempts) == (Page.State.SENT, 1)
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.DOWN and monitor.check_at is None
    assert first.alive and second.alive

    # One loop dies without a word; the other pages the next missed deadline alone.
    first.kill()
    assert not first.alive
    # PostgreSQL ends a killed client's backend when it notices, not at once.
    wait_until(lambda: not first.connected(), 10, "the killed loop's connection to close")
    later = quick_period_monitor(channel, "quick import")
    wait_until(
        lambda: len(events(receiver, "trigger")) >= 2,
        PAGED_WITHIN,
        "the survivor's trigger",
    )
    let_cycles_run(1.5)

    assert second.alive, logs(second)
    triggers = events(receiver, "trigger")
    assert len(triggers) == 2, logs(first, second)
    later_incident = Incident.objects.get(monitor=later)
    assert triggers[1]["dedup_key"] == later_incident.dedup_key != incident.dedup_key
    assert Incident.objects.count() == 2
    assert set(Page.objects.values_list("state", flat=True)) == {Page.State.SENT}

    # A ping resolves it: one resolve, paired by dedup_key.
    assert Client().post(f"/ping/{later.ping_key}").status_code == 200
    wait_until(lambda: events(receiver, "resolve"), PAGED_WITHIN, "the resolve")
    let_cycles_run(0.6)
    assert [e["dedup_key"] for e in events(receiver, "resolve")] == [later_incident.dedup_key]


def _minute_with_room(seconds_left: int) -> None:
    """Wait (at most 60 - ``seconds_left`` s) until the current minute has at least
    ``seconds_left`` seconds to go, so a per-minute deadline cannot slip in mid-test."""
    wait_until(
        lambda: timezone.now().second < 60 - seconds_left,
        62 - seconds_left,
        "room in the current minute",
    )


def test_after_downtime_one_loop_pages_every_missed_deadline_at_once(start_loop, receiver, channel):
    _minute_with_room(20)
    now = timezone.now()
    floor = now.replace(second=0, microsecond=0)
    monitor = monitors.monitor_create(
        channels=[channel],
        now=now,
        name="every minute",
        kind=Monitor.Kind.DEADLINE,
        cron="* * * * *",
        grace_seconds=0,
    )
    assert monitor.deadline_at == floor + timedelta(minutes=1)
    # No loop ran while the last three per-minute deadlines passed.
    missed = [floor - timedelta(minutes=2), floor - timedelta(minutes=1), floor]
    Monitor.objects.filter(pk=monitor.pk).update(deadline_at=missed[0], check_at=missed[0])

    loop = start_loop("catch-up")
    wait_until(
        lambda: len(events(receiver, "trigger")) >= 3,
        PAGED_WITHIN,
        "three triggers",
    )
    let_cycles_run(1.5)

    # Should the test outlast the minute (a loaded machine), the next deadline is missed
    # too, and rightly paged: it is counted apart.
    incidents = list(Incident.objects.order_by("deadline_at"))
    caught_up = [i for i in incidents if i.deadline_at <= floor]
    assert [i.deadline_at for i in caught_up] == missed, logs(loop)
    assert len({i.opened_at for i in caught_up}) == 1  # all in the loop's first judging cycle
    assert all(i.deadline_at > floor for i in incidents[3:])
    triggers = events(receiver, "trigger")
    assert len(triggers) == len(incidents), logs(loop)
    assert sorted(e["dedup_key"] for e in triggers) == sorted(i.dedup_key for i in incidents)
    assert len({e["dedup_key"] for e in triggers}) == len(triggers)
    monitor.refresh_from_db()
    assert monitor.deadline_at == incidents[-1].deadline_at + timedelta(minutes=1)
    assert monitor.deadline_at > timezone.now() - timedelta(seconds=5)
    assert monitor.state == Monitor.State.DOWN


def test_the_heartbeat_goes_out_once_per_interval_and_its_failure_never_stops_paging(
    start_loop, receiver, channel
):
    heartbeat = {
        "WATCHDOG_HEARTBEAT_URL": receiver.url_for(HEARTBEAT_PATH),
        "WATCHDOG_HEARTBEAT_SECONDS": "1",
    }
    first, second = start_loop("a", **heartbeat), start_loop("b", **heartbeat)

    seen = len(heartbeats(receiver))
    wait_until(lambda: len(heartbeats(receiver)) >= seen + 7, 25, "seven more heartbeats")
    beats = heartbeats(receiver)[seen:]
    gaps = [b.started - a.started for a, b in itertools.pairwise(beats)]
    # Ten cycles a second in each loop, but one heartbeat a second between them (each loop
    # on its own would make two a second, half a second apart on average).
    assert (len(beats) - 1) / (beats[-1].started - beats[0].started) < 1.25, gaps
    assert min(gaps) > 0.4, gaps
    assert all(hit.status == 202 for hit in beats[:-1])
    state = LoopState.objects.get()
    assert state.heartbeat_ok and state.heartbeat_error == ""

    # The heartbeat's receiver fails: recorded, and paging goes on.
    receiver.respond = lambda hit: 500 if hit.path == HEARTBEAT_PATH else 202
    wait_until(
        lambda: not LoopState.objects.get().heartbeat_ok, 10, "the heartbeat failure recorded"
    )
    assert "500" in LoopState.objects.get().heartbeat_error
    monitor = quick_period_monitor(channel, "quick export")
    wait_until(lambda: events(receiver, "trigger"), PAGED_WITHIN, "the trigger")
    assert events(receiver, "trigger")[0]["dedup_key"] == Incident.objects.get().dedup_key
    assert Incident.objects.get().monitor_id == monitor.pk
    failing = len(heartbeats(receiver))
    wait_until(lambda: len(heartbeats(receiver)) >= failing + 2, 10, "heartbeats to go on")
    assert not LoopState.objects.get().heartbeat_ok
    assert first.alive and second.alive, logs(first, second)

    # And it recovers when the receiver does.
    receiver.respond = lambda hit: 202
    wait_until(lambda: LoopState.objects.get().heartbeat_ok, 10, "the heartbeat recovered")
    assert LoopState.objects.get().heartbeat_error == ""
