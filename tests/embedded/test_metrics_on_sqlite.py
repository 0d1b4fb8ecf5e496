"""``/metrics`` in the embedded mode: the state gauges on SQLite, and the queue lengths
read from the filesystem broker's folder (messages are files named ``<ms>_<uuid>.<queue>.msg``
there), rung as the doorbells ring them."""

from __future__ import annotations

import pytest
from django.test import Client

from catalog import doorbell
from tests.metrics_helpers import scrape, value

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])


def test_queue_lengths_are_read_from_the_filesystem_broker():
    before = scrape(Client())
    assert value(before, "tidemark_broker_up") == 1
    for task in (
        "catalog.tasks.poll_storage",
        "catalog.tasks.poll_storage",
        "catalog.tasks.heartbeat",
    ):
        doorbell.ring_now(task)
    after = scrape(Client())

    def delta(queue):
        return value(after, "tidemark_queue_messages", queue=queue) - value(
            before, "tidemark_queue_messages", queue=queue
        )

    assert (delta("poll"), delta("housekeeping"), delta("delivery")) == (2, 1, 0)
    assert value(after, "tidemark_database_up") == 1
    assert value(after, "tidemark_deliveries_waiting", state="pending") == 0
