"""The OpenLineage ``symlinks`` dataset facet: the owner's verified events declare aliases
of a catalog dataset, usage naming an alias is usage of the dataset, and no one else's
alias hijacks a dataset."""

from __future__ import annotations

import pytest

from catalog.models import Claim, DatasetAlias, DatasetUsage, SchemaObservation
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

LAKE = ("s3://lake", "sales/orders")
TABLE = ("hive://metastore:9083", "sales.orders")
RUN_1 = "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a71"
RUN_2 = "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a72"
OTHER_JOB = ("airflow://team-b", "reports.daily")


def symlinked(identity=LAKE, *aliases) -> dict:
    identifiers = [{"namespace": ns, "name": n, "type": "TABLE"} for ns, n in aliases or [TABLE]]
    return ev.dataset(
        *identity,
        facets={
            "symlinks": {
                "_producer": ev.PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
                "identifiers": identifiers,
            }
        },
    )


def write(receive, dataset: dict, *, team=None, run_id=RUN_1, job=ev.JOB):
    receive(
        ev.run_event("COMPLETE", run_id=run_id, job=job, outputs=[dataset]),
        **({"team": team} if team else {}),
    )


@pytest.fixture
def orders(team_a):
    return DatasetFactory(owner=team_a, namespace=LAKE[0], name=LAKE[1])


@pytest.fixture
def team_b(db):
    team = TeamFactory(slug="team-b")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=OTHER_JOB[0])
    return team


def test_the_owners_symlink_makes_a_later_event_naming_the_alias_resolve_to_the_dataset(
    receive, process, orders, team_a, team_b
):
    write(receive, symlinked())
    process()
    alias = DatasetAlias.objects.get(kind=DatasetAlias.Kind.SYMLINK)
    assert (alias.alias_namespace, alias.alias_name) == TABLE
    assert (alias.dataset, alias.declared_by, alias.symlink_type) == (orders, team_a, "TABLE")

    receive(
        ev.run_event("COMPLETE", run_id=RUN_2, job=OTHER_JOB, inputs=[ev.dataset(*TABLE)]),
        team=team_b,
    )
    process()
    read = DatasetUsage.objects.get(team=team_b)
    assert (read.dataset_namespace, read.dataset_name) == LAKE  # the dataset's identity
    assert read.dataset == orders
    assert [u.team.slug for u in orders.usages.filter(direction="read")] == ["team-b"]


def test_usage_seen_before_the_symlink_is_linked_when_it_is_declared(
    receive, process, orders, team_b
):
    receive(
        ev.run_event("COMPLETE", run_id=RUN_2, job=OTHER_JOB, inputs=[ev.dataset(*TABLE)]),
        team=team_b,
    )
    process()
    assert DatasetUsage.objects.get().dataset is None
    write(receive, symlinked())
    process()
    assert DatasetUsage.objects.get(team=team_b).dataset == orders


def test_an_unverified_event_declares_no_alias(receive, process, orders, team_a):
    Claim.objects.filter(team=team_a).delete()  # its events are unverified now
    write(receive, symlinked())
    process()
    assert not DatasetAlias.objects.filter(kind="symlink").exists()


def test_a_team_that_does_not_own_the_dataset_declares_no_alias_for_it(
    receive, process, orders, team_b
):
    write(receive, symlinked(), team=team_b, job=OTHER_JOB)  # verified, not the owner
    process()
    assert not DatasetAlias.objects.filter(kind="symlink").exists()


def test_an_alias_never_takes_another_registered_datasets_identity(receive, process, orders):
    other = DatasetFactory(namespace=TABLE[0], name=TABLE[1])  # another team's dataset
    write(receive, symlinked())
    process()
    assert not DatasetAlias.objects.filter(kind="symlink").exists()
    assert DatasetUsage.objects.get().dataset == orders
    assert other.usages.count() == 0


def test_the_first_declaration_keeps_an_alias(receive, process, orders, team_b):
    write(receive, symlinked())
    process()
    theirs = DatasetFactory(owner=team_b, namespace="s3://lake", name="b/orders")
    write(receive, symlinked(("s3://lake", "b/orders")), team=team_b, job=OTHER_JOB, run_id=RUN_2)
    process()
    assert DatasetAlias.objects.get(kind="symlink").dataset == orders
    assert theirs.aliases.count() == 0


def test_an_alias_inside_another_teams_prefix_claim_is_refused(receive, process, orders, team_b):
    Claim.objects.create(
        team=team_b, kind=Claim.Kind.DATASET_PREFIX, pattern="hive://metastore:9083/"
    )
    write(receive, symlinked())
    process()
    assert not DatasetAlias.objects.filter(kind="symlink").exists()


def test_a_malformed_symlink_is_flagged_and_the_event_kept(receive, process, orders):
    result = receive(
        ev.run_event(
            "COMPLETE",
            run_id=RUN_1,
            outputs=[symlinked(LAKE, ("hive://metastore:9083", "bad name"), TABLE)],
        )
    )
    assert [p["field"] for p in result.event.problems] == [
        "outputs.0.facets.symlinks.identifiers.0.name"
    ]
    process()
    assert DatasetAlias.objects.get(kind="symlink").alias_name == TABLE[1]  # the good one
    assert DatasetUsage.objects.get().dataset == orders


def test_a_schema_seen_under_an_alias_is_the_datasets(receive, process, orders, team_a):
    write(receive, symlinked())
    process()
    table = ev.dataset(
        *TABLE,
        facets={
            "schema": {"_producer": ev.PRODUCER, "_schemaURL": "x", "fields": [{"name": "id"}]}
        },
    )
    write(receive, table, run_id=RUN_2)
    process()
    assert SchemaObservation.objects.get().dataset == orders


def test_a_dataset_registered_later_under_an_alias_is_itself(receive, process, orders, team_b):
    write(receive, symlinked())
    process()
    table = DatasetFactory(owner=team_b, namespace=TABLE[0], name=TABLE[1])
    receive(
        ev.run_event("COMPLETE", run_id=RUN_2, job=OTHER_JOB, inputs=[ev.dataset(*TABLE)]),
        team=team_b,
    )
    process()
    assert DatasetUsage.objects.get(team=team_b).dataset == table


def test_a_facet_with_too_many_symlinks_is_flagged_and_the_event_still_processed(
    receive, process, orders
):
    from lineage.openlineage import MAX_SYMLINKS

    many = [("hive://metastore:9083", f"sales.orders_{i}") for i in range(MAX_SYMLINKS + 1)]
    result = receive(ev.run_event("COMPLETE", run_id=RUN_1, outputs=[symlinked(LAKE, *many)]))
    assert [(p["field"], p["rule"]) for p in result.event.problems] == [
        ("outputs.0.facets.symlinks.identifiers", "max_items")
    ]
    assert process().by_state == {"processed": 1}
    assert not DatasetAlias.objects.filter(kind="symlink").exists()
    assert DatasetUsage.objects.get().dataset == orders
