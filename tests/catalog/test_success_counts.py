"""Each endpoint's successes per hour (``catalog.success_counts``), kept on every path that
makes a delivery succeeded, on real PostgreSQL: a batch of plain successes
(``success_batches``), one by one (``delivery_record``), a whole delivery pass; a claim
lost is never counted."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from werkzeug import Response

import outbound
from catalog import delivery, success_batches, success_counts
from catalog.actors import Actor
from catalog.models import Delivery, EndpointSuccessHour
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, EndpointFactory, TeamFactory

pytestmark = pytest.mark.django_db

AT = datetime(2026, 11, 28, 12, 40, 5, tzinfo=UTC)


def counters() -> dict[tuple[int, datetime], int]:
    return {(row.endpoint_id, row.hour): row.succeeded for row in EndpointSuccessHour.objects.all()}


def world(urls: list[str], partitions: int):
    """A dataset with one subscriber per url, ``partitions`` published: returns the
    endpoints (in ``urls`` order)."""
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    endpoints = [
        subscription_create(
            actor=Actor(team=TeamFactory(slug=f"consumer-{n}")), dataset=dataset, endpoint_url=url
        ).subscription.endpoint
        for n, url in enumerate(urls)
    ]
    for day in range(1, partitions + 1):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=f"2026-11-{day:02d}",
            now=timezone.now(),
        )
    return endpoints


@pytest.fixture
def two_endpoints():
    """Two endpoints, three deliveries each, all claimed (nothing is sent)."""
    endpoints = world(["https://hooks.example.com/a", "https://hooks.example.com/b"], 3)
    claims = delivery.delivery_claim_due(limit=100, lease_seconds=60, now=timezone.now())
    assert len(claims) == 6
    return endpoints, claims


def ok(ms: int = 5) -> outbound.AttemptResult:
    return outbound.AttemptResult(status_code=204, duration_ms=ms)


def test_hour_of_is_the_start_of_the_utc_hour():
    assert success_counts.hour_of(AT) == datetime(2026, 11, 28, 12, tzinfo=UTC)
    india = AT.astimezone(timezone.get_fixed_timezone(330))  # 18:10 there, on a half hour
    assert success_counts.hour_of(india) == datetime(2026, 11, 28, 12, tzinfo=UTC)


def test_a_batch_of_plain_successes_is_counted_per_endpoint_in_the_same_statement(
    two_endpoints,
):
    (a, b), claims = two_endpoints
    sent = [(c, AT, ok()) for c in claims if c.endpoint_id == a.pk][:2] + [
        (c, AT, ok()) for c in claims if c.endpoint_id == b.pk
    ][:1]
    with CaptureQueriesContext(connection) as queries:
        recorded = success_batches.successes_record(sent, now=AT)
    assert len(recorded) == 3
    assert len(queries) == 1  # the counters ride the batch's one statement
    hour = datetime(2026, 11, 28, 12, tzinfo=UTC)
    assert counters() == {(a.pk, hour): 2, (b.pk, hour): 1}

    rest = [(c, AT, ok()) for c in claims if c.delivery_id not in recorded]
    success_batches.successes_record(rest, now=AT + timedelta(minutes=10))  # same hour
    assert counters() == {(a.pk, hour): 3, (b.pk, hour): 3}


def test_a_batch_counts_in_the_hour_its_deliveries_finished(two_endpoints):
    (a, _), claims = two_endpoints
    mine = [c for c in claims if c.endpoint_id == a.pk]
    success_batches.successes_record([(mine[0], AT, ok())], now=AT)
    success_batches.successes_record([(mine[1], AT, ok())], now=AT + timedelta(hours=1))
    assert counters() == {
        (a.pk, datetime(2026, 11, 28, 12, tzinfo=UTC)): 1,
        (a.pk, datetime(2026, 11, 28, 13, tzinfo=UTC)): 1,
    }
    finished = Delivery.objects.filter(state="succeeded").values_list("finished_at", flat=True)
    assert sorted(finished) == [AT, AT + timedelta(hours=1)]


def test_a_claim_lost_is_not_counted_in_a_batch(two_endpoints):
    (a, b), claims = two_endpoints
    lost = next(c for c in claims if c.endpoint_id == a.pk)
    kept = next(c for c in claims if c.endpoint_id == b.pk)
    Delivery.objects.filter(pk=lost.delivery_id).update(claim_token=uuid.uuid4())
    recorded = success_batches.successes_record([(lost, AT, ok()), (kept, AT, ok())], now=AT)
    assert recorded == {kept.delivery_id}
    assert counters() == {(b.pk, datetime(2026, 11, 28, 12, tzinfo=UTC)): 1}


def test_a_batch_whose_every_claim_was_lost_counts_nothing(two_endpoints):
    _, claims = two_endpoints
    Delivery.objects.update(claim_token=uuid.uuid4())
    assert success_batches.successes_record([(c, AT, ok()) for c in claims], now=AT) == set()
    assert counters() == {}


def test_one_by_one_a_success_is_counted_a_failure_or_a_lost_claim_is_not(two_endpoints):
    (a, b), claims = two_endpoints
    first, second, third = [c for c in claims if c.endpoint_id == a.pk]
    hour = datetime(2026, 11, 28, 12, tzinfo=UTC)
    assert delivery.delivery_record(claim=first, result=ok(), started_at=AT, now=AT) == "succeeded"
    assert counters() == {(a.pk, hour): 1}
    # A success that ends a failing streak goes this way on PostgreSQL too.
    failing = delivery.Claim(**{**second.__dict__, "endpoint_failing": True})
    assert not success_batches.plain_success(failing, ok())
    delivery.delivery_record(claim=failing, result=ok(), started_at=AT, now=AT)
    assert counters() == {(a.pk, hour): 2}

    boom = outbound.AttemptResult(status_code=500, duration_ms=3)
    assert delivery.delivery_record(claim=third, result=boom, started_at=AT, now=AT) == "retrying"
    lost = next(c for c in claims if c.endpoint_id == b.pk)
    Delivery.objects.filter(pk=lost.delivery_id).update(claim_token=uuid.uuid4())
    assert delivery.delivery_record(claim=lost, result=ok(), started_at=AT, now=AT) is None
    assert counters() == {(a.pk, hour): 2}


def test_a_delivery_pass_counts_what_it_sent(httpserver, sender):
    """A real pass: plain successes recorded in batches, a failing endpoint's retries one
    by one; the counters hold exactly the deliveries that succeeded."""
    httpserver.expect_request("/ok").respond_with_data("ok")
    httpserver.expect_request("/down").respond_with_response(Response("boom", status=503))
    ok_endpoint, _ = world([httpserver.url_for("/ok"), httpserver.url_for("/down")], 4)
    began = timezone.now()
    summary = delivery.deliver_due(sender=sender)
    # Full jitter may make a retry to /down due within the same pass: count deliveries.
    assert (summary.by_state["succeeded"], summary.by_state["retrying"] >= 4) == (4, True)
    states = sorted(Delivery.objects.values_list("state", flat=True))
    assert states == ["retrying"] * 4 + ["succeeded"] * 4
    hours = {success_counts.hour_of(began), success_counts.hour_of(timezone.now())}
    assert sum(counters().values()) == 4
    assert {endpoint_id for endpoint_id, _ in counters()} == {ok_endpoint.pk}
    assert {hour for _, hour in counters()} <= hours


def test_successes_add_adds_to_what_is_there_and_skips_nothing_to_add():
    one, two = EndpointFactory(), EndpointFactory()
    hour = datetime(2026, 11, 28, 12, tzinfo=UTC)
    success_counts.successes_add({(one.pk, hour): 2, (two.pk, hour): 0})
    success_counts.successes_add({(one.pk, hour): 3, (one.pk, hour + timedelta(hours=1)): 1})
    success_counts.successes_add({})
    assert counters() == {(one.pk, hour): 5, (one.pk, hour + timedelta(hours=1)): 1}
