"""The pipeline monitor's ping key under concurrency: a dataset change and the lineage
sync defining a critical dataset's monitors at once, each on its own connection, agree
on one key, the one the catalog keeps and shows its producer."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import transaction
from django.utils import timezone

from catalog import watchdog_feed
from catalog.actors import Actor
from catalog.models import Dataset, Notification
from catalog.services import datasets
from tests.catalog.factories import TeamFactory
from tests.concurrency import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_change_and_the_lineage_sync_at_once_give_the_pipeline_monitor_one_key(
    settings, monkeypatch
):
    """A critical dataset registered before the watchdog was configured has no pipeline
    ping key yet. Once it is, the owner changes the SLA while the lineage sync runs: each
    makes a key for the pipeline monitor's definition. The catalog keeps one and shows it
    to the producer; a definition carrying the other would leave the watchdog's monitor
    under a key nobody pings, paging every day for a pipeline that ran. Nor may the sync,
    whose version is the later, define the monitors from the dataset as it was before
    the change committed."""
    team = TeamFactory(slug="orders", paging_routing_key="R" * 32)
    dataset = datasets.dataset_register(
        actor=Actor(team=team),
        namespace="s3://lake",
        name="orders",
        criticality=Dataset.Criticality.CRITICAL,
        sla_cron="30 6 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=600,
    )
    assert dataset.pipeline_ping_key is None  # the watchdog was not configured yet
    settings.TIDEMARK_WATCHDOG_URL = "https://watchdog.example.com"
    settings.TIDEMARK_WATCHDOG_TOKEN = "wd_test"

    ready = watchdog_feed.ready_partitions
    key_written = threading.Event()

    def slowly(*args, **kwargs):
        # Each transaction stays open a while after it wrote its key.
        key_written.set()
        found = ready(*args, **kwargs)
        time.sleep(0.5)
        return found

    monkeypatch.setattr(watchdog_feed, "ready_partitions", slowly)

    def change():
        with transaction.atomic():
            datasets.dataset_update(
                actor=Actor(team=team),
                dataset=Dataset.objects.get(pk=dataset.pk),
                sla_grace_seconds=900,
            )

    def sync():
        # The sync reads the dataset once the change has written its key, uncommitted.
        assert key_written.wait(timeout=30)
        watchdog_feed.sync_dependencies(now=timezone.now())

    race([change, sync])

    kept = Dataset.objects.get(pk=dataset.pk).pipeline_ping_key
    definitions = [
        n.payload["data"]
        for n in Notification.objects.filter(type=Notification.Type.WATCHDOG_MONITOR)
        if n.payload["data"]["external_id"] == watchdog_feed.pipeline_external_id(dataset)
    ]
    assert {d["monitor"]["ping_key"] for d in definitions} == {str(kept)}
    # The watchdog applies the newest version: it is the dataset as changed, never the
    # sync's copy read before the change committed.
    newest = max(definitions, key=lambda d: d["version"])
    assert newest["monitor"]["grace_seconds"] == 900
