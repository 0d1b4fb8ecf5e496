"""The one-statement path for plain success pings does exactly what the general path does:
the same monitor row and the same ping row, whatever state the monitor is in (and when it
cannot, it leaves the ping to the general path)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connections
from django.forms.models import model_to_dict

from watchdog import db, monitors, pings
from watchdog.models import Monitor, Ping

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
_VOLATILE = {"id", "ping_key", "created_at", "name", "channels"}

PERIOD = {"kind": "period", "period_seconds": 600, "grace_seconds": 60}
DEADLINE = {
    "kind": "deadline",
    "cron": "30 6 * * *",
    "timezone": "Europe/Berlin",
    "grace_seconds": 600,
}
PARTITIONED = {**DEADLINE, "partitioning": "daily", "partition_timezone": "Europe/Berlin"}

STATES = {
    "period, new": (PERIOD, {}),
    "period, up": (PERIOD, {"state": "up", "last_success_at": T0 - timedelta(minutes=5)}),
    "period, down": (PERIOD, {"state": "down"}),
    "period, paused": (PERIOD, {"state": "paused", "deadline_at": None, "check_at": None}),
    "deadline, new": (DEADLINE, {}),
    "deadline, new, no deadline yet": (DEADLINE, {"deadline_at": None, "check_at": None}),
    "deadline, up, older partition": (DEADLINE, {"state": "up", "last_partition": "b"}),
    "partitioned": (PARTITIONED, {"state": "up"}),
    "post only": (PERIOD, {"post_only": True}),
    "a run open": (PERIOD, {"last_start_at": T0 - timedelta(minutes=1), "last_ping_kind": "start"}),
    "rate limit reached": (
        PERIOD,
        {"rate_window_start": T0 - timedelta(seconds=30), "rate_count": 120},
    ),
    "rate window over": (
        PERIOD,
        {"rate_window_start": T0 - timedelta(minutes=2), "rate_count": 120},
    ),
}
PINGS = {
    "plain GET": pings.PingInput(kind="success", method="GET", user_agent="curl/8"),
    "POST with a body": pings.PingInput(kind="success", method="POST", body=b"ok \xff\x00 done"),
    "exit status 0": pings.PingInput(kind="success", method="GET", exit_status=0),
    "with a partition": pings.PingInput(kind="success", method="GET", partition="c"),
    "a daily partition": pings.PingInput(kind="success", method="GET", partition="2026-11-28"),
}


def _outcome(monitor_fields, state, ping, *, general: bool, monkeypatch) -> tuple:
    if general:
        monkeypatch.setattr(pings.ping_statement, "run", lambda *a, **k: None)
    monitor = monitors.monitor_create(
        now=T0 - timedelta(hours=1), name=str(uuid.uuid4()), **monitor_fields
    )
    Monitor.objects.filter(pk=monitor.pk).update(**state)
    try:
        answer = pings.record(ping_key=monitor.ping_key, ping=ping, now=T0)
    except pings.PingRejected as exc:
        answer = exc.status
    monkeypatch.undo()
    monitor.refresh_from_db()
    row = {k: v for k, v in model_to_dict(monitor).items() if k not in _VOLATILE}
    row["updated_at"] = monitor.updated_at == T0
    stored = [
        {k: v for k, v in model_to_dict(p).items() if k not in ("id", "monitor")}
        for p in Ping.objects.filter(monitor=monitor)
    ]
    return answer, row, stored


@pytest.mark.parametrize("ping_name", PINGS)
@pytest.mark.parametrize("state_name", STATES)
def test_the_one_statement_path_matches_the_general_one(state_name, ping_name, monkeypatch):
    fields, state = STATES[state_name]
    ping = PINGS[ping_name]
    with time_machine.travel(T0, tick=False):
        fast = _outcome(fields, state, ping, general=False, monkeypatch=monkeypatch)
        general = _outcome(fields, state, ping, general=True, monkeypatch=monkeypatch)
    assert fast[0] == general[0]
    differ = {k: (fast[1][k], general[1][k]) for k in fast[1] if fast[1][k] != general[1][k]}
    assert differ == {}
    assert fast[2] == general[2]


def test_a_plain_ping_is_one_statement(django_assert_num_queries):
    monitor = monitors.monitor_create(now=T0, name="plain", **PERIOD)
    with django_assert_num_queries(1, connection=connections[db.alias()]):
        assert pings.record(ping_key=monitor.ping_key, ping=PINGS["plain GET"], now=T0) == "ok"
    assert Ping.objects.filter(monitor=monitor).count() == 1
