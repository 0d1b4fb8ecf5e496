"""The embedded mode (SQLite) processes lineage events through the ORM path of the
set-based edge writes, with the same result as PostgreSQL's: usage once per run, runs
that belong to their job, and usage of an alias recorded as its dataset's."""

from datetime import UTC, datetime

import pytest
from django.db import connection

from catalog.actors import Actor
from catalog.models import Claim, DatasetUsage, RunConflict
from lineage.models import LineageRun, LineageRunEdge
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


def test_on_sqlite_a_verified_event_takes_a_run_over_and_an_intruders_later_one_conflicts():
    owner = TeamFactory(slug="team-a")
    Claim.objects.create(team=owner, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    intruder = TeamFactory(slug="intruder")

    def send(team, event_type, minute, **datasets):
        receiving.lineage_event_receive(
            actor=Actor(team=team),
            payload=ev.run_event(event_type, event_time=f"2026-11-28T06:0{minute}:00Z", **datasets),
            now=NOW,
        )
        processing.lineage_events_process_due(now=NOW)

    send(intruder, "START", 1, inputs=[ROLLUP])
    send(owner, "START", 0, inputs=[ORDERS])
    send(intruder, "FAIL", 2)
    send(owner, "COMPLETE", 5)
    run = LineageRun.objects.get()
    assert (run.team, run.verified, run.state) == (owner, True, "complete")
    assert [u.dataset_name for u in DatasetUsage.objects.all()] == [ORDERS["name"]]
    assert sorted(RunConflict.objects.values_list("reason", flat=True)) == [
        "unverified",
        "unverified",
    ]


def test_on_sqlite_usage_of_an_alias_is_the_datasets_before_and_after_its_declaration():
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="sales/orders")
    table = ev.dataset("hive://metastore:9083", "sales.orders")
    facet = {
        "_producer": ev.PRODUCER,
        "identifiers": [{**table, "type": "TABLE"}],
    }
    runs = iter(f"0195f6d2-9c4a-7b1e-8a55-{n:012x}" for n in range(1, 10))
    for payload in (
        ev.run_event("COMPLETE", run_id=next(runs), inputs=[table]),  # before: its own row
        ev.run_event(
            "COMPLETE",
            run_id=next(runs),
            outputs=[ev.dataset("s3://lake", "sales/orders", facets={"symlinks": facet})],
        ),
        ev.run_event("COMPLETE", run_id=next(runs), inputs=[table]),  # after
    ):
        receiving.lineage_event_receive(actor=Actor(team=team), payload=payload, now=NOW)
        processing.lineage_events_process_due(now=NOW)
    [read] = DatasetUsage.objects.filter(direction="read")
    assert (read.dataset_name, read.dataset_id, read.run_count) == ("sales/orders", dataset.pk, 2)


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
