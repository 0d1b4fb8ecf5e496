"""What the watchdog saw of the demo's month, for its own side of the story (``manage.py
load_watchdog_demo``, which imports no catalog module and reads this as a JSON file).

Two sources: the catalog's feed as the workers delivered it (the critical dataset's
monitor definitions and a ping per ready partition, each at its delivery's last
attempt), and the pings the critical dataset's pipeline sent its pipeline monitor itself
(a start and a success, or a failure with exit status 1, per run, paired by run id).
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta

from .. import watchdog_feed
from ..models import Delivery, Endpoint, Notification
from ..notices import iso
from . import world
from .history import History

FORMAT = 1
PIPELINE_HOST = "10.30.0.21"  # finance's scheduler, as its pings' remote address
PIPELINE_AGENT = "curl/8.5.0"


def watchdog_feed_events(history: History, *, seed: int) -> dict:
    """The watchdog's side of the demo, in time order.

    Returns:
        ``{"format": 1, "now": ISO 8601, "seed": seed, "events": [...]}``, each event
        ``{"at", "monitor": {"external_id", "version", "monitor"}}`` (a definition as ``POST
        /api/v1/monitors/external/<id>`` takes it) or ``{"at", "ping": {"external_id",
        "kind", "partition", "run_id", "exit_status", "method", "remote_addr",
        "user_agent"}}``. Empty events when the catalog feeds no watchdog (none set up).
    """
    events: list[tuple[datetime, int, dict]] = []
    delivered = (
        Delivery.objects.filter(
            endpoint__kind=Endpoint.Kind.WATCHDOG, state=Delivery.State.SUCCEEDED
        )
        .select_related("notification")
        .order_by("last_attempt_at", "pk")
    )
    for delivery in delivered:
        notification = delivery.notification
        data = notification.payload["data"]
        at = delivery.last_attempt_at
        if notification.type == Notification.Type.WATCHDOG_MONITOR:
            events.append((at, len(events), {"monitor": data}))
        else:
            ping = _ping(data["external_id"], "success", method="POST", partition=data["partition"])
            events.append((at, len(events), {"ping": {**ping, "remote_addr": "127.0.0.1"}}))
    if events:
        revenue = history.dataset(world.DAILY_REVENUE)
        pipeline = watchdog_feed.pipeline_external_id(revenue)
        first = min(at for at, _, _ in events)  # its monitors' definitions
        rng = random.Random(f"{seed}:pipeline")
        for run in history.runs:
            if run.dataset is not world.DAILY_REVENUE:
                continue
            run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))[:8]
            end = "success" if run.outcome == "success" else "fail"
            for at, kind in ((run.started_at, "start"), (run.ended_at - timedelta(seconds=2), end)):
                if first < at <= history.now:
                    ping = _ping(pipeline, kind, run_id=run_id)
                    events.append((at, len(events), {"ping": ping}))
    events.sort(key=lambda item: (item[0], item[1]))
    return {
        "format": FORMAT,
        "now": iso(history.now),
        "seed": seed,
        "events": [{"at": iso(at), **event} for at, _, event in events],
    }


def _ping(external_id: str, kind: str, *, method="GET", partition="", run_id=""):
    return {
        "external_id": external_id,
        "kind": kind,
        "partition": partition,
        "run_id": run_id,
        "exit_status": 1 if kind == "fail" else None,  # the job's ``/1``
        "method": method,
        "remote_addr": PIPELINE_HOST,
        "user_agent": PIPELINE_AGENT if method == "GET" else "Tidemark",
    }
