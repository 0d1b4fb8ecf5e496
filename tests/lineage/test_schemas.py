"""The OpenLineage ``schema`` dataset facet: observed into the catalog, breaking changes
found, a malformed facet flagged with the event kept, and no cost without the facet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import change_notices, selectors
from catalog.actors import Actor
from catalog.models import ChangeNotice, Notification, SchemaChange, SchemaObservation
from lineage import openlineage
from lineage.models import LineageEvent, LineageRun
from lineage.services import processing
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev
from tests.lineage.conftest import NOW

pytestmark = pytest.mark.django_db

ORDERS = ("postgres://warehouse:5432", "shop.public.orders")
V1 = [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "numeric"}]
DROPPED = [{"name": "id", "type": "bigint"}]


def schema_facet(fields) -> dict:
    return {
        "_producer": ev.PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": fields,
    }


def with_schema(fields, identity=ORDERS) -> dict:
    return ev.dataset(*identity, facets={"schema": schema_facet(fields)})


def complete(run_id: str, at: str, *, outputs=(), inputs=()) -> dict:
    return ev.run_event(
        "COMPLETE", run_id=run_id, event_time=at, inputs=list(inputs), outputs=list(outputs)
    )


RUN_1 = "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a61"
RUN_2 = "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a62"
RUN_3 = "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a63"


@pytest.fixture
def shop(team_a):
    """``team-a`` (which claims the job namespace) owns the catalog dataset."""
    return DatasetFactory(owner=team_a, namespace=ORDERS[0], name=ORDERS[1])


def test_the_parser_reads_a_well_formed_schema_facet():
    parsed = openlineage.parse_event(
        complete(RUN_1, "2026-11-28T06:00:00Z", outputs=[with_schema([*V1, {"name": "x"}])])
    )
    assert parsed.outputs[0].schema == [*V1, {"name": "x", "type": None}]
    assert parsed.problems == ()


def test_a_schema_facet_dropping_a_column_with_no_notice_is_reported(receive, process, shop):
    receive(complete(RUN_1, "2026-11-27T06:00:00Z", outputs=[with_schema(V1)]))
    receive(complete(RUN_2, "2026-11-28T06:00:00Z", outputs=[with_schema(DROPPED)]))
    assert process().by_state == {"processed": 2}

    observation = SchemaObservation.objects.get(fields=DROPPED)
    assert observation.source == "lineage"
    assert (observation.job_namespace, observation.job_name) == ev.JOB
    assert str(observation.run_id) == RUN_2
    assert observation.lineage_event_id == LineageEvent.objects.get(run_id=RUN_2).pk
    [change] = selectors.unannounced_schema_changes()
    assert change.removed == ["amount"]
    assert change.observed_at == datetime(2026, 11, 28, 6, tzinfo=UTC)
    assert Notification.objects.filter(type="schema.unannounced_change").count() == 1


def test_with_a_notice_covering_it_the_dropped_column_is_not_reported(
    receive, process, shop, team_a
):
    announced = datetime(2026, 11, 1, tzinfo=UTC)
    notice = change_notices.change_notice_announce(
        actor=Actor(team=team_a, username="lead"),
        dataset=shop,
        kind=ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE,
        description="amount goes",
        effective_at=announced + timedelta(days=14),
        now=announced,
    )
    receive(complete(RUN_1, "2026-11-14T06:00:00Z", outputs=[with_schema(V1)]))
    receive(complete(RUN_2, "2026-11-15T06:00:00Z", outputs=[with_schema(DROPPED)]))
    process()

    assert SchemaChange.objects.get().covered_by == notice
    assert not selectors.unannounced_schema_changes().exists()
    assert not Notification.objects.filter(type="schema.unannounced_change").exists()


def test_the_same_event_processed_twice_tells_once(receive, process, shop):
    receive(complete(RUN_1, "2026-11-27T06:00:00Z", outputs=[with_schema(V1)]))
    drop = complete(RUN_2, "2026-11-28T06:00:00Z", outputs=[with_schema(DROPPED)])
    receive(drop)
    process()
    # Processed again (a worker died after committing, say): nothing new.
    LineageEvent.objects.update(state=LineageEvent.State.PENDING, attempts=0)
    process()
    # And sent again by another of the owner's keys (another team row): still once.
    receive(drop, team=TeamFactory(slug="team-b"))
    process()
    assert SchemaObservation.objects.count() == 2
    assert SchemaChange.objects.count() == 1
    assert Notification.objects.filter(type="schema.unannounced_change").count() == 1


def test_a_malformed_schema_facet_is_flagged_and_the_event_kept(receive, process, shop):
    bad = ev.dataset(*ORDERS, facets={"schema": schema_facet([{"type": "int"}, "amount"])})
    result = receive(complete(RUN_1, "2026-11-28T06:00:00Z", outputs=[bad]))
    assert result.event.problems == [
        {
            "field": "outputs.0.facets.schema.fields.0.name",
            "rule": "required",
            "detail": "name is required (a non-empty string)",
        },
        {
            "field": "outputs.0.facets.schema.fields.1",
            "rule": "object",
            "detail": "a column must be an object",
        },
    ]
    assert process().by_state == {"processed": 1}
    assert LineageRun.objects.get().state == "complete"
    assert shop.usages.get().direction == "write"
    assert not SchemaObservation.objects.exists()


def test_a_schema_facet_with_duplicate_columns_is_flagged_and_left_unused(receive, process, shop):
    twice = ev.dataset(*ORDERS, facets={"schema": schema_facet([{"name": "a"}, {"name": "a"}])})
    result = receive(complete(RUN_1, "2026-11-28T06:00:00Z", outputs=[twice]))
    assert [(p["field"], p["rule"]) for p in result.event.problems] == [
        ("outputs.0.facets.schema.fields.1.name", "unique")
    ]
    assert process().by_state == {"processed": 1}
    assert not SchemaObservation.objects.exists()


def test_only_the_owners_events_record_a_schema_not_a_verified_reader(receive, process):
    owner = TeamFactory(slug="shop")
    DatasetFactory(owner=owner, namespace=ORDERS[0], name=ORDERS[1])
    stranger = TeamFactory(slug="stranger")  # claims no job namespace: unverified
    receive(complete(RUN_1, "2026-11-27T06:00:00Z", inputs=[with_schema(V1)]), team=stranger)
    process()
    assert not SchemaObservation.objects.exists()

    # team-a claims its job namespace (verified), but a verified event proves nothing
    # about the datasets its job reads: its input facet must not write shop's history.
    receive(complete(RUN_2, "2026-11-28T06:00:00Z", inputs=[with_schema(V1)]))
    process()
    assert not SchemaObservation.objects.exists()

    receive(complete(RUN_3, "2026-11-29T06:00:00Z", inputs=[with_schema(V1)]), team=owner)
    process()
    assert SchemaObservation.objects.get().team == owner


def test_a_dataset_event_from_the_owner_records_its_schema(receive, process, shop):
    receive(
        {
            "eventTime": "2026-11-28T06:00:00Z",
            "dataset": with_schema(V1),
            "producer": ev.PRODUCER,
            "schemaURL": ev.SCHEMA_URL,
        }
    )
    process()
    assert SchemaObservation.objects.get().job_namespace == ""


def _statements(receive, payload) -> list[str]:
    receive(payload)
    [claim] = processing.lineage_event_claim_due(limit=10, lease_seconds=60)
    with CaptureQueriesContext(connection) as captured:
        assert processing.lineage_event_process(claim=claim, now=NOW) == "processed"
    return [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]


def test_schemas_cost_nothing_without_the_facet_and_one_statement_when_unchanged(receive, shop):
    plain = _statements(
        receive, complete(RUN_1, "2026-11-27T06:00:00Z", outputs=[ev.dataset(*ORDERS)])
    )
    assert not [sql for sql in plain if "schemaobservation" in sql]

    first = _statements(receive, complete(RUN_2, "2026-11-27T07:00:00Z", outputs=[with_schema(V1)]))
    assert len(first) > len(plain)  # a new schema: lookup, lock, neighbours, insert
    again = _statements(
        receive,
        complete(
            "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a63",
            "2026-11-27T08:00:00Z",
            outputs=[with_schema(V1)],
        ),
    )
    # The same schema, seen later: one lookup and one widening of last_seen_at.
    assert len(again) == len(plain) + 2
    assert SchemaObservation.objects.get().last_seen_at == datetime(2026, 11, 27, 8, tzinfo=UTC)


def test_an_unchanged_schema_within_the_hour_costs_one_lookup_only(receive, shop):
    first = complete(RUN_1, "2026-11-27T07:00:00Z", outputs=[with_schema(V1)])
    _statements(receive, first)
    plain = _statements(
        receive,
        complete(RUN_2, "2026-11-27T07:10:00Z", outputs=[ev.dataset(*ORDERS)]),
    )
    soon = _statements(
        receive,
        complete(
            "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a64",
            "2026-11-27T07:20:00Z",
            outputs=[with_schema(V1)],
        ),
    )
    assert len(soon) == len(plain) + 1
    # last_seen_at moves by steps of an hour at least.
    assert SchemaObservation.objects.get().last_seen_at == datetime(2026, 11, 27, 7, tzinfo=UTC)
