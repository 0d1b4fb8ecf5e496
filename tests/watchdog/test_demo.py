"""watchdog.demo and ``load_watchdog_demo``: the demo's on-call operator, and a feed
replayed through the watchdog's services at its instants (the whole demo's feed is
replayed in ``tests/lineage/test_demo.py``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from watchdog import demo, operators
from watchdog.models import Incident, Monitor, Page, Ping

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

NOW = datetime(2026, 12, 1, 16, 48, tzinfo=UTC)
MADE = NOW - timedelta(days=5)
DEFINITION = {
    "name": "lake/orders data",
    "owner": "orders",
    "kind": "deadline",
    "cron": "0 6 * * *",
    "timezone": "UTC",
    "grace_seconds": 600,
    "partitioning": "daily",
    "channels": [{"kind": "pagerduty", "target": "R" * 32, "name": "orders on-call"}],
    "active": True,
}


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def a_feed(*, pinged_days: int) -> dict:
    """A monitor made five days ago, pinged for the first ``pinged_days`` partitions at
    05:00, then never again (its later deadlines are missed)."""
    events = [
        {
            "at": iso(MADE),
            "monitor": {"external_id": "ext:1", "version": iso(MADE), "monitor": DEFINITION},
        }
    ]
    for day in range(pinged_days):
        at = (MADE + timedelta(days=day + 1)).replace(hour=5, minute=0, second=0, microsecond=0)
        partition = (at - timedelta(days=1)).date().isoformat()
        events.append(
            {
                "at": iso(at),
                "ping": {
                    "external_id": "ext:1",
                    "kind": "success",
                    "partition": partition,
                    "run_id": "",
                    "exit_status": None,
                    "method": "POST",
                    "remote_addr": "127.0.0.1",
                    "user_agent": "Tidemark",
                },
            }
        )
    return {"format": 1, "now": iso(NOW), "seed": 3, "events": events}


def test_replay_opens_an_incident_per_missed_deadline_at_its_check_time_and_pages_once():
    replayed = demo.replay(a_feed(pinged_days=3))

    monitor = Monitor.objects.get(external_id="ext:1")
    assert monitor.state == Monitor.State.DOWN
    assert monitor.pings.filter(kind=Ping.Kind.SUCCESS).count() == 3
    missed = list(monitor.incidents.order_by("deadline_at"))
    # Pinged for the 26th, 27th and 28th; the 29th's and 30th's partitions never came.
    assert [(i.partition, i.opened_at, i.resolved_at) for i in missed] == [
        ("2026-11-29", datetime(2026, 11, 30, 6, 10, tzinfo=UTC), None),
        ("2026-11-30", datetime(2026, 12, 1, 6, 10, tzinfo=UTC), None),
    ]
    pages = Page.objects.filter(incident__monitor=monitor)
    assert [(p.action, p.state, p.sent_at) for p in pages.order_by("pk")] == [
        ("trigger", "sent", datetime(2026, 11, 30, 6, 10, 2, tzinfo=UTC)),
        ("trigger", "sent", datetime(2026, 12, 1, 6, 10, 2, tzinfo=UTC)),
    ]
    own = Monitor.objects.filter(name__in=[m.definition["name"] for m in demo.OWN_MONITORS])
    assert set(own.values_list("state", flat=True)) == {Monitor.State.UP}
    assert replayed.pages == 2


def test_replay_once_only_and_a_ping_to_an_unknown_monitor_is_dropped():
    feed = a_feed(pinged_days=1)
    feed["events"].insert(0, {**feed["events"][1], "at": iso(MADE - timedelta(hours=1))})

    first = demo.replay(feed)
    again = demo.replay(feed)

    assert Monitor.objects.get(external_id="ext:1").pings.count() == 1
    assert first.events > 0 and again == demo.Replayed(0, 0, 0)
    assert Incident.objects.filter(monitor__external_id="ext:1").count() == 4


def test_replay_refuses_a_feed_of_another_format():
    with pytest.raises(ValueError, match="format 2"):
        demo.replay({**a_feed(pinged_days=0), "format": 2})


def test_load_watchdog_demo_creates_the_operator_once_and_refuses_a_configured_database(
    settings, tmp_path, monkeypatch
):
    settings.EMBEDDED, settings.VAR_DIR = True, tmp_path
    (tmp_path / "demo-watchdog-feed.json").write_text(json.dumps(a_feed(pinged_days=2)))
    with pytest.raises(CommandError, match="only in the embedded mode"):
        call_command("load_watchdog_demo")
    monkeypatch.delenv("WATCHDOG_DATABASE_URL", raising=False)

    call_command("load_watchdog_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    username, password = (tmp_path / "demo-oncall-login").read_text().split()
    call_command("load_watchdog_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115

    assert (tmp_path / "demo-oncall-login").read_text().split() == [username, password]
    signed_in = operators.sign_in(username=username, password=password, remote_addr="::1", now=NOW)
    assert signed_in.operator.all_labels
    (tmp_path / "demo-oncall-login").unlink()  # lost: a new password, kept this time
    call_command("load_watchdog_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    _, new_password = (tmp_path / "demo-oncall-login").read_text().split()
    assert new_password != password
    assert operators.sign_in(username=username, password=new_password, remote_addr="::1", now=NOW)
