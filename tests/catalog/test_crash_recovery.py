"""Crash at every named point; after recovery the tables equal those of a clean run.

For each point in ``catalog.crashpoints.POINTS`` a subprocess runs the scenario (two
publishes, then a delivery pass) and SIGKILLs itself at that point. Recovery is what
production does: the producer retries its publishes (it never got an answer), the leases
of dead workers run out, and the next delivery pass picks up what is due. Then:
- the normalised tables equal the golden ones of a crash-free run;
- every (notification, endpoint) reached the receiver at least once;
- a repeat carried the same ``webhook-id`` and a byte-identical body, and happens only
  when the crash fell between a send and its record (to the sends then in flight).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connections
from django.utils import timezone

from catalog import delivery
from catalog.actors import Actor
from catalog.crashpoints import POINTS
from catalog.models import Delivery, Notification, Partition, PartitionRevision, ReadinessEvent
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default"])

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = ("2026-11-27", "2026-11-28")

SCENARIO = """
import django; django.setup()
from django.utils import timezone
from catalog import delivery
from catalog.actors import Actor
from catalog.models import Team
from catalog.services.publishing import readiness_publish
owner = Team.objects.get(slug="orders")
for partition in {partitions!r}:
    readiness_publish(actor=Actor(team=owner), namespace="s3://lake", name="raw/orders",
                      partition=partition, now=timezone.now())
delivery.deliver_due(sender=delivery.sender_from_settings(), batch_size=2)
"""

GOLDEN = {
    "partitions": [("2026-11-27", "", "ready"), ("2026-11-28", "", "ready")],
    "revisions": [("2026-11-27", "", "ready"), ("2026-11-28", "", "ready")],
    "events": [("2026-11-27", "ready"), ("2026-11-28", "ready")],
    "notifications": [("partition.ready", "2026-11-27"), ("partition.ready", "2026-11-28")],
    "deliveries": [
        ("2026-11-27", "/a", "succeeded"),
        ("2026-11-27", "/b", "succeeded"),
        ("2026-11-28", "/a", "succeeded"),
        ("2026-11-28", "/b", "succeeded"),
    ],
}


class Receiver:
    """A loopback webhook receiver recording (path, webhook-id, body) of every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.path, self.headers["webhook-id"], body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def world(receiver):
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    for slug in ("a", "b"):
        subscription_create(
            actor=Actor(team=TeamFactory(slug=f"reader-{slug}")),
            dataset=dataset,
            endpoint_url=f"{receiver.url}/{slug}",
        )
    return owner


def run_scenario(crash_at: str | None) -> int:
    db = connections["default"].settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": url,
        "WATCHDOG_DATABASE_URL": url,
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",  # no broker: doorbells fail quietly
        "TIDEMARK_CRASH_AT": crash_at or "",
        "PYTHONPATH": str(REPO),
    }
    script = SCENARIO.format(partitions=PARTITIONS)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, timeout=120, check=False
    ).returncode


def recover(owner) -> None:
    """What production does after a crash, with the lease wait taken out."""
    for partition in PARTITIONS:  # the producer never got its answer: it publishes again
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )
    # The dead worker's leases run out (the database clock cannot be travelled).
    Delivery.objects.filter(claimed_until__isnull=False).update(claimed_until=timezone.now())
    sender = delivery.sender_from_settings()
    try:
        while delivery.deliver_due(sender=sender).claimed:
            pass
    finally:
        sender.close()


def snapshot() -> dict:
    def rows(queryset, *fields):
        return sorted(tuple(r) for r in queryset.values_list(*fields))

    return {
        "partitions": rows(
            Partition.objects.all(), "key", "current_revision__version", "current_revision__state"
        ),
        "revisions": rows(PartitionRevision.objects.all(), "partition__key", "version", "state"),
        "events": rows(ReadinessEvent.objects.all(), "partition__key", "state"),
        "notifications": sorted(
            (n.type, n.payload["data"]["partition"]) for n in Notification.objects.all()
        ),
        "deliveries": sorted(
            (
                d.notification.payload["data"]["partition"],
                urlsplit(d.endpoint.url).path,
                d.state,
            )
            for d in Delivery.objects.select_related("notification", "endpoint")
        ),
    }


@pytest.mark.parametrize("point", [None, *POINTS])
def test_crash_at_point_then_recovery_equals_a_clean_run(world, receiver, point):
    returncode = run_scenario(f"{point}:1" if point else None)

    assert returncode == (-9 if point else 0), "the crash point was not on the path"
    recover(world)

    assert snapshot() == GOLDEN
    by_delivery: dict[tuple[str, str], list[bytes]] = {}
    for path, webhook_id, body in receiver.requests:
        by_delivery.setdefault((webhook_id, path), []).append(body)
    expected = {(str(n.id), path) for n in Notification.objects.all() for path in ("/a", "/b")}
    assert set(by_delivery) == expected  # every (event, endpoint) at least once
    repeats = {key: bodies for key, bodies in by_delivery.items() if len(bodies) > 1}
    assert all(len(set(bodies)) == 1 for bodies in repeats.values())  # same bytes each time
    if point == "delivery.after_send":
        # The one sent but not recorded is sent again, and so is the other send of its
        # batch when it was in flight beside it (sends run concurrently): never more.
        assert 1 <= len(repeats) <= 2
    elif point == "delivery.after_record":
        # Recorded, but the other send of its batch may have been in flight beside it.
        assert len(repeats) <= 1
    else:
        assert repeats == {}
