"""A verified JobEvent's inputs declare what its job reads: subscriptions of the job's
team naming the job, with no endpoint."""

from __future__ import annotations

import pytest

from catalog.models import Subscription
from tests.catalog.factories import DatasetFactory, EndpointFactory, TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

ORDERS = ev.dataset("postgres://warehouse:5432", "shop.public.orders")
CUSTOMERS = ev.dataset("postgres://warehouse:5432", "shop.public.customers")
UNKNOWN = ev.dataset("s3://lake", "raw/unregistered")


def job_event(*, job=ev.JOB, inputs=(ORDERS,), outputs=()) -> dict:
    """A JobEvent (no ``run``)."""
    return {
        "eventTime": "2026-11-28T06:00:00Z",
        "job": {"namespace": job[0], "name": job[1]},
        "inputs": list(inputs),
        "outputs": list(outputs),
        "producer": ev.PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
    }


@pytest.fixture
def shop(db):
    """Team ``shop`` owns the catalog datasets orders and customers."""
    team = TeamFactory(slug="shop")
    for ref in (ORDERS, CUSTOMERS):
        DatasetFactory(owner=team, namespace=ref["namespace"], name=ref["name"])
    return team


def declared() -> list[tuple[str, str, str, str, int | None]]:
    return sorted(
        Subscription.objects.values_list(
            "team__slug", "dataset__name", "job_namespace", "job_name", "endpoint_id"
        )
    )


def test_a_verified_job_event_declares_its_catalogued_inputs(receive, process, shop, team_a):
    output = ev.dataset("s3://lake", "marts/out")
    DatasetFactory(owner=shop, namespace=output["namespace"], name=output["name"])
    receive(job_event(inputs=[ORDERS, CUSTOMERS, UNKNOWN], outputs=[output]))
    assert process().by_state == {"processed": 1}
    # Catalog inputs only: not the unknown identity, not the output.
    assert declared() == [
        ("team-a", CUSTOMERS["name"], ev.JOB[0], ev.JOB[1], None),
        ("team-a", ORDERS["name"], ev.JOB[0], ev.JOB[1], None),
    ]


def test_declaring_again_confirms_and_leaves_an_existing_subscription_as_it_is(
    receive, process, shop, team_a
):
    endpoint = EndpointFactory(team=team_a)
    orders = shop.datasets.get(name=ORDERS["name"])
    existing = Subscription.objects.create(
        team=team_a,
        dataset=orders,
        job_namespace=ev.JOB[0],
        job_name=ev.JOB[1],
        endpoint=endpoint,
        event_types=["partition.ready"],
    )
    receive(job_event())
    receive(job_event() | {"eventTime": "2026-11-28T07:00:00Z"})
    assert process().by_state == {"processed": 2}
    [kept] = Subscription.objects.all()
    assert (kept.pk, kept.endpoint_id, kept.event_types) == (
        existing.pk,
        endpoint.pk,
        ["partition.ready"],
    )


def test_a_job_event_names_its_job_beside_other_declarations(receive, process, shop, team_a):
    # A team-wide subscription (no job) does not stand for the job's own declaration.
    Subscription.objects.create(team=team_a, dataset=shop.datasets.get(name=ORDERS["name"]))
    receive(job_event())
    receive(job_event(job=(ev.JOB[0], "other.job")))
    process()
    assert [(row[2], row[3]) for row in declared()] == [
        ("", ""),
        (ev.JOB[0], ev.JOB[1]),
        (ev.JOB[0], "other.job"),
    ]


def test_an_unverified_job_event_declares_nothing(receive, process, shop, team_a):
    intruder = TeamFactory(slug="team-b")
    receive(job_event(), team=intruder)  # team-a claims the job namespace, not team-b
    receive(job_event(job=("unclaimed://ns", "job")), team=team_a)
    assert process().by_state == {"processed": 2}
    assert declared() == []


def test_run_events_inputs_are_usage_not_declarations(receive, process, shop, team_a):
    receive(ev.run_event("COMPLETE", inputs=[ORDERS]))
    process()
    assert declared() == []
