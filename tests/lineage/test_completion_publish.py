"""OpenLineage as a dataset's completion signal, through processing: a verified COMPLETE
of the owner's job publishes the partition ready, a FAIL failed, once, by the publish's
rules; anything else publishes nothing and says why on the event."""

from __future__ import annotations

import pytest

from catalog.models import Claim, Dataset, Notification, PartitionRevision, ReadinessEvent
from lineage.completion import PARTITION_FACET
from lineage.models import LineageEvent
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

LAKE = ("s3://lake", "marts/daily_orders")
RUN_1 = "0195f6d2-9c4a-7b1e-8a55-000000000001"
RUN_2 = "0195f6d2-9c4a-7b1e-8a55-000000000002"


@pytest.fixture
def orders(team_a):
    return DatasetFactory(
        owner=team_a,
        namespace=LAKE[0],
        name=LAKE[1],
        completion_signal=Dataset.CompletionSignal.OPENLINEAGE,
    )


def _output(key: str | None = "2026-11-27", identity=LAKE) -> dict:
    facets = {} if key is None else {PARTITION_FACET: {"_producer": ev.PRODUCER, "key": key}}
    return ev.dataset(*identity, outputFacets=facets)


def _revisions(dataset) -> list[tuple[str, str, str]]:
    return list(
        PartitionRevision.objects.filter(partition__dataset=dataset)
        .order_by("id")
        .values_list("partition__key", "version", "state")
    )


def _problems(result) -> list[tuple[str, str]]:
    event = LineageEvent.objects.get(pk=result.event.pk)
    return [(p["field"], p["rule"]) for p in event.problems]


def test_a_verified_complete_publishes_the_partition_ready_once(receive, process, orders):
    receive(ev.run_event("START", run_id=RUN_1, outputs=[_output()]))
    complete = ev.run_event("COMPLETE", run_id=RUN_1, outputs=[_output()])
    receive(complete)
    receive(complete)  # the same event again
    # and another COMPLETE of the same run, later: the same revision
    receive(
        ev.run_event(
            "COMPLETE", run_id=RUN_1, event_time="2026-11-28T06:05:00Z", outputs=[_output()]
        )
    )
    process()

    assert _revisions(orders) == [("2026-11-27", RUN_1, "ready")]
    [event] = ReadinessEvent.objects.filter(dataset=orders)
    assert event.published_by_id == orders.owner_id
    assert event.source == ReadinessEvent.Source.LINEAGE
    assert event.payload["metadata"]["openlineage"]["run_id"] == RUN_1
    assert Notification.objects.filter(dataset=orders).count() == 1


def test_a_fail_publishes_it_failed_and_a_later_run_ready(receive, process, orders):
    receive(ev.run_event("FAIL", run_id=RUN_1, outputs=[_output()]))
    process()
    assert _revisions(orders) == [("2026-11-27", RUN_1, "failed")]
    receive(ev.run_event("COMPLETE", run_id=RUN_2, outputs=[_output()]))
    process()
    assert _revisions(orders) == [("2026-11-27", RUN_1, "failed"), ("2026-11-27", RUN_2, "ready")]
    assert orders.partitions.get().current_revision.version == RUN_2


def test_the_nominal_time_of_the_run_names_the_partition(receive, process, orders):
    nominal = {
        "nominalTime": {
            "_producer": ev.PRODUCER,
            "nominalStartTime": "2026-11-27T00:00:00Z",
            "nominalEndTime": "2026-11-28T00:00:00Z",
        }
    }
    receive(ev.run_event("COMPLETE", run_id=RUN_1, run_facets=nominal, outputs=[_output(None)]))
    process()
    assert _revisions(orders) == [("2026-11-27", RUN_1, "ready")]


def test_an_output_under_another_spelling_is_the_dataset(receive, process, orders):
    receive(
        ev.run_event(
            "COMPLETE",
            run_id=RUN_1,
            outputs=[_output(identity=("s3a://lake", "/marts/daily_orders/"))],
        )
    )
    process()
    assert _revisions(orders) == [("2026-11-27", RUN_1, "ready")]


def test_events_that_may_not_publish_publish_nothing_and_say_why(receive, process, orders):
    # another team, verified for its own job namespace, naming the dataset as its output
    other = TeamFactory(slug="team-b")
    Claim.objects.create(team=other, kind=Claim.Kind.JOB_NAMESPACE, pattern="airflow://team-b")
    not_owner = receive(
        ev.run_event("COMPLETE", run_id=RUN_1, job=("airflow://team-b", "x"), outputs=[_output()]),
        team=other,
    )
    # the owner, from a job namespace it does not claim: unverified
    unverified = receive(
        ev.run_event(
            "COMPLETE", run_id=RUN_2, job=("airflow://elsewhere", "x"), outputs=[_output()]
        )
    )
    process()

    assert _revisions(orders) == []
    assert _problems(not_owner) == [("outputs.0", "completion_not_owner")]
    assert _problems(unverified) == [("outputs.0", "completion_unverified")]
    assert LineageEvent.objects.filter(state="processed").count() == 2


def test_the_publish_rules_still_hold(receive, process, orders):
    future = receive(ev.run_event("COMPLETE", run_id=RUN_1, outputs=[_output("2027-01-01")]))
    no_partition = receive(ev.run_event("COMPLETE", run_id=RUN_2, outputs=[_output(None)]))
    process()
    assert _revisions(orders) == []
    assert _problems(future) == [("outputs.0", "completion_refused")]
    assert _problems(no_partition) == [("outputs.0", "no_partition")]
    # the events were processed all the same: their usage is recorded
    assert LineageEvent.objects.filter(state="processed").count() == 2
    assert orders.usages.count() == 1


@pytest.mark.parametrize("signal", ["event", "success_marker"])
def test_a_dataset_with_another_completion_signal_is_not_published(
    receive, process, team_a, signal
):
    dataset = DatasetFactory(
        owner=team_a, namespace=LAKE[0], name=LAKE[1], completion_signal=signal,
        storage_source="lake", location_template="marts/{partition}",
    )  # fmt: skip
    result = receive(ev.run_event("COMPLETE", run_id=RUN_1, outputs=[_output()]))
    process()
    assert _revisions(dataset) == []
    assert _problems(result) == []
