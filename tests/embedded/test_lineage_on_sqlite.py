"""The embedded mode (SQLite) processes lineage events through the ORM path of the
set-based edge writes, with the same result as PostgreSQL's."""

from datetime import UTC, datetime

import pytest
from django.db import connection

from catalog.actors import Actor
from catalog.models import Claim, DatasetUsage
from lineage.models import LineageRunEdge
from lineage.services import processing, receiving
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 28, 7, 0, tzinfo=UTC)
ORDERS = ev.dataset("postgres://warehouse:5432", "shop.public.orders")
ROLLUP = ev.dataset("postgres://warehouse:5432", "shop.marts.daily_orders")


def test_events_on_sqlite_record_usage_once_per_run_with_widened_seen_times():
    assert connection.vendor == "sqlite"
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    dataset = DatasetFactory(namespace=ORDERS["namespace"], name=ORDERS["name"])
    actor = Actor(team=team)
    for event_type, minute in (("COMPLETE", 5), ("START", 0), ("COMPLETE", 5)):
        receiving.lineage_event_receive(
            actor=actor,
            payload=ev.run_event(
                event_type,
                event_time=f"2026-11-28T06:0{minute}:00Z",
                inputs=[ORDERS],
                outputs=[ROLLUP] if event_type == "COMPLETE" else [],
            ),
            now=NOW,
        )
    processing.lineage_events_process_due(now=NOW)
    read = DatasetUsage.objects.get(direction="read")
    write = DatasetUsage.objects.get(direction="write")
    assert (read.dataset_id, read.run_count, write.dataset_id, write.run_count) == (
        dataset.pk,
        1,
        None,
        1,
    )
    assert read.first_seen_at == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    assert read.last_seen_at == datetime(2026, 11, 28, 6, 5, tzinfo=UTC)
    assert read.verified and LineageRunEdge.objects.count() == 2


def test_an_event_declaring_more_aliases_than_one_sqlite_expression_holds_is_processed():
    # 20 datasets, each with a full symlinks facet: 1,280 identities, more than one OR
    # of them could hold on SQLite (an expression at most 1,000 deep).
    from catalog.models import DatasetAlias
    from lineage.models import LineageEvent
    from lineage.openlineage import MAX_SYMLINKS

    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    outputs = []
    for d in range(20):
        DatasetFactory(owner=team, namespace="s3://lake", name=f"sales/t{d}")
        identifiers = [
            {"namespace": "hive://metastore:9083", "name": f"sales.t{d}_{i}", "type": "TABLE"}
            for i in range(MAX_SYMLINKS)
        ]
        outputs.append(
            ev.dataset(
                "s3://lake",
                f"sales/t{d}",
                facets={"symlinks": {"_producer": ev.PRODUCER, "identifiers": identifiers}},
            )
        )
    receiving.lineage_event_receive(
        actor=Actor(team=team), payload=ev.run_event("COMPLETE", outputs=outputs), now=NOW
    )
    processing.lineage_events_process_due(now=NOW)
    assert LineageEvent.objects.get().state == LineageEvent.State.PROCESSED
    assert DatasetAlias.objects.filter(kind="symlink").count() == 20 * MAX_SYMLINKS
