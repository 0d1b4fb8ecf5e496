"""Root causes on real PostgreSQL: a chain raw -> staged -> mart in verified lineage (a job
reading each and writing the next), each with an SLA at 08:00 and 30 minutes' grace. When
the freshness evaluation finds a partition late, ``dataset.late`` carries the upstream
partition furthest up that is late or failed for the period it needs, the late row keeps
it, and the freshness API and the dataset page show it with the root's blast radius."""

from datetime import UTC, datetime

import pytest
import time_machine

from catalog import freshness, notices, root_causes, selectors
from catalog.actors import Actor
from catalog.models import LatePartition, Notification, PartitionRevision
from catalog.services.datasets import dataset_register
from catalog.services.publishing import readiness_publish
from tests.catalog import lineage_helpers
from tests.catalog.factories import SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

REGISTERED = datetime(2026, 11, 28, 12, tzinfo=UTC)
KEY = "2026-11-28"  # due at 2026-11-29 08:00, late at 08:30


def at(hour, minute=0):
    return datetime(2026, 11, 29, hour, minute, tzinfo=UTC)


@pytest.fixture
def owner():
    return TeamFactory(slug="orders")


def job_between(owner, name, source, target):
    """A job reading ``source`` and writing ``target``, both verified."""
    return lineage_helpers.job_between(owner, name, source, target, seen_at=REGISTERED)


@pytest.fixture
def chain(owner):
    """raw/orders -> staged/orders -> mart/orders, daily, SLA 08:00 + 30 min each."""
    actor = Actor(team=owner, username="t")
    with time_machine.travel(REGISTERED, tick=False):
        raw, staged, mart = (
            dataset_register(
                actor=actor,
                namespace="s3://lake",
                name=name,
                partitioning="daily",
                sla_cron="0 8 * * *",
                sla_grace_seconds=1800,
            )
            for name in ("raw/orders", "staged/orders", "mart/orders")
        )
    job_between(owner, "stage", raw, staged)
    job_between(owner, "build_mart", staged, mart)
    return raw, staged, mart


def publish(owner, dataset, when, state=PartitionRevision.State.READY):
    with time_machine.travel(when, tick=False):
        result = readiness_publish(
            actor=Actor(team=owner),
            namespace=dataset.namespace,
            name=dataset.name,
            partition=KEY,
            state=state,
            now=when,
        )
    assert result.status_code in (200, 201)


def late_payloads():
    """``{dataset name: dataset.late data}`` of the notices sent."""
    return {
        n.payload["data"]["dataset"]["name"]: n.payload["data"]
        for n in Notification.objects.filter(type=Notification.Type.DATASET_LATE)
    }


def test_late_root_is_the_cause_of_every_late_partition_downstream(chain):
    raw, staged, mart = chain
    reports = freshness.evaluate_due(now=at(8, 31))
    assert {r.dataset for r in reports} == {str(raw), str(staged), str(mart)}

    told = late_payloads()
    assert told["raw/orders"]["caused_by"] is None
    root = {
        "namespace": "s3://lake",
        "name": "raw/orders",
        "partition": KEY,
        "since": "2026-11-29T08:30:00Z",
        "state": "late",
    }
    assert told["staged/orders"]["caused_by"] == root
    assert told["mart/orders"]["caused_by"] == root  # the root, not the direct upstream
    row = LatePartition.objects.get(dataset=mart)
    assert (row.caused_by_dataset, row.caused_by_partition_key) == (raw, KEY)
    assert (row.caused_by_state, row.caused_by_since) == ("late", at(8, 30))


def test_owner_notice_names_the_upstream_and_who_is_paged(chain):
    freshness.evaluate_due(now=at(8, 31))
    notices_by_name = {
        n.payload["data"]["dataset"]["name"]: n.payload
        for n in Notification.objects.filter(type=Notification.Type.DATASET_LATE)
    }
    subject, text = notices.render_text(notices_by_name["mart/orders"])
    assert subject == f"Tidemark: s3://lake/mart/orders partition {KEY} is late, caused upstream"
    assert (
        f"It is caused upstream: s3://lake/raw/orders partition {KEY} is late since "
        "2026-11-29T08:30:00Z." in text
    )
    assert "this dataset's page is held under the upstream's incident" in text
    # The root's own notice says nothing of a cause.
    subject, _ = notices.render_text(notices_by_name["raw/orders"])
    assert "caused upstream" not in subject


def test_failed_upstream_is_the_cause_with_state_failed(chain, owner):
    raw, _staged, _mart = chain
    publish(owner, raw, at(3), state=PartitionRevision.State.FAILED)
    freshness.evaluate_due(now=at(8, 31))

    told = late_payloads()
    assert told["raw/orders"]["caused_by"] is None
    for name in ("staged/orders", "mart/orders"):
        caused_by = told[name]["caused_by"]
        assert caused_by["name"] == "raw/orders"
        assert (caused_by["state"], caused_by["since"]) == ("failed", "2026-11-29T03:00:00Z")


def test_upstream_on_time_is_no_cause(chain, owner):
    raw, _staged, _mart = chain
    publish(owner, raw, at(2))
    freshness.evaluate_due(now=at(8, 31))

    told = late_payloads()
    assert "raw/orders" not in told
    assert told["staged/orders"]["caused_by"] is None
    assert told["mart/orders"]["caused_by"]["name"] == "staged/orders"


def test_upstream_merely_awaited_is_no_cause(owner, chain):
    """An upstream without an SLA that has not arrived is neither late nor failed."""
    _raw, staged, _mart = chain
    actor = Actor(team=owner, username="t")
    with time_machine.travel(REGISTERED, tick=False):
        other = dataset_register(
            actor=actor, namespace="s3://lake", name="raw/refunds", partitioning="daily"
        )
    job_between(owner, "stage_refunds", other, staged)
    publish(owner, _raw, at(2))
    freshness.evaluate_due(now=at(8, 31))

    told = late_payloads()
    assert told["staged/orders"]["caused_by"] is None
    assert told["mart/orders"]["caused_by"]["name"] == "staged/orders"


def test_cycle_in_lineage_ends(chain, owner):
    raw, _staged, mart = chain
    job_between(owner, "feedback", mart, raw)  # raw <- mart: a cycle of three
    freshness.evaluate_due(now=at(8, 31))

    told = late_payloads()
    assert len(told) == 3
    # Each names a partition of the cycle other than its own, found in at most 3 steps.
    for name, data in told.items():
        assert data["caused_by"]["name"] != name
        assert data["caused_by"]["state"] == "late"


def test_unparseable_key_has_no_cause(chain):
    _raw, staged, _mart = chain
    assert root_causes.root_cause(staged, "not-a-day") is None


def test_freshness_api_shows_the_cause_and_the_blast_radius(chain, client_for, owner):
    raw, staged, mart = chain
    SubscriptionFactory(dataset=staged, team=TeamFactory(slug="finance"))
    SubscriptionFactory(dataset=mart, team=TeamFactory(slug="analytics"))
    SubscriptionFactory(dataset=raw, team=TeamFactory(slug="audit"))  # raw's own consumer
    freshness.evaluate_due(now=at(8, 31))
    client = client_for(owner)

    with time_machine.travel(at(9), tick=False):
        down = client.get(f"/api/v1/datasets/{mart.pk}/freshness").json()
        root = client.get(f"/api/v1/datasets/{raw.pk}/freshness").json()

    assert down["state"] == "late" and down["partition_due"] == KEY
    assert down["caused_by"] == {
        "namespace": "s3://lake",
        "name": "raw/orders",
        "partition": KEY,
        "since": "2026-11-29T08:30:00Z",
        "state": "late",
    }
    assert down["blast_radius"]["partitions_count"] == 0
    assert root["caused_by"] is None
    assert root["blast_radius"] == {
        "partitions_count": 2,
        "datasets_count": 2,
        "datasets": [
            {"namespace": "s3://lake", "name": "mart/orders"},
            {"namespace": "s3://lake", "name": "staged/orders"},
        ],
        "teams_count": 2,
        "teams": ["analytics", "finance"],
    }


def test_blast_radius_ends_when_the_downstream_recovers(chain, owner):
    raw, staged, mart = chain
    freshness.evaluate_due(now=at(8, 31))
    publish(owner, staged, at(9))
    publish(owner, mart, at(9, 5))
    assert selectors.blast_radius(dataset=raw)["partitions_count"] == 0


def test_root_cause_costs_a_few_queries_per_step(chain, django_assert_max_num_queries):
    _raw, _staged, mart = chain
    freshness.evaluate_due(now=at(8, 31))
    # Three steps (mart -> staged -> raw -> none): the upstreams, their failed partitions
    # and their open late rows for each of the first two (3 + 3), the upstreams of raw (1).
    with django_assert_max_num_queries(7) as captured:
        assert root_causes.root_cause(mart, KEY).dataset.name == "raw/orders"
    print(f"\nroot cause of a 3-long chain: {len(captured)} queries")


def test_batch_without_lineage_costs_one_query(owner, django_assert_num_queries):
    actor = Actor(team=owner, username="t")
    with time_machine.travel(REGISTERED, tick=False):
        for n in range(20):
            dataset_register(
                actor=actor,
                namespace="s3://lake",
                name=f"alone/{n}",
                partitioning="daily",
                sla_cron="0 8 * * *",
            )
    freshness.evaluate_due(now=at(8, 31))
    incidents = list(LatePartition.objects.select_related("dataset"))
    assert len(incidents) == 20
    with django_assert_num_queries(1):
        assert root_causes.root_causes(incidents) == [None] * 20
