"""Two watchdog monitors, an upstream and a downstream reading it, for the hold tests
(``tests/watchdog/test_holds.py``, ``test_hold_races.py``); the ``pair`` fixture is in
this folder's conftest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import time_machine

from watchdog import monitors
from watchdog.models import Channel, Monitor

CREATED = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=10)
UPSTREAM_KEY, DOWNSTREAM_KEY = "U" * 32, "D" * 32


def monitor(name, *, cron, key, external_id, depends_on=(), partitioning="daily", **fields):
    """A daily deadline monitor created at ``CREATED``, paging its own PagerDuty channel
    (routing key ``key``; none when empty)."""
    channels = []
    if key:
        channels = [
            Channel.objects.create(name=f"{name} on-call", kind=Channel.Kind.PAGERDUTY, target=key)
        ]
    with time_machine.travel(CREATED, tick=False):
        return monitors.monitor_create(
            channels=channels,
            now=CREATED,
            name=name,
            kind=Monitor.Kind.DEADLINE,
            cron=cron,
            timezone="UTC",
            partitioning=partitioning,
            partition_timezone="UTC",
            grace_seconds=int(GRACE.total_seconds()),
            external_id=external_id,
            depends_on=list(depends_on),
            **fields,
        )


def orders_and_revenue(*, upstream_key: str = UPSTREAM_KEY):
    """Orders (upstream, due 04:00 UTC) and revenue (downstream, due 05:30 UTC, reading
    orders): two teams, two channels (``upstream_key`` ``""``: orders pages nobody)."""
    upstream = monitor(
        "orders data", cron="0 4 * * *", key=upstream_key, external_id="tidemark:dataset:1:data"
    )
    downstream = monitor(
        "revenue data",
        cron="30 5 * * *",
        key=DOWNSTREAM_KEY,
        external_id="tidemark:dataset:2:data",
        depends_on=["tidemark:dataset:1:data"],
    )
    return upstream, downstream
