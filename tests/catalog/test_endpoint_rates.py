"""Per-endpoint rate limits and Retry-After throttles, against real loopback receivers on
PostgreSQL (catalog.endpoint_rates, catalog.delivery)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from werkzeug import Response

from catalog import delivery, endpoint_rates
from catalog.actors import Actor
from catalog.models import Delivery, Endpoint
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def slow_retries(settings):
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "backoff_base_seconds": 30,
        "backoff_cap_seconds": 60,
        "read_timeout": 0.5,
        "total_deadline": 2.0,
    }


@pytest.fixture
def world(httpserver):
    """Two consumer teams subscribed to one dataset, with webhooks /a and /b on the test
    receiver; ``publish(n)`` makes n partitions ready (one delivery each per endpoint)."""
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    endpoints = {}
    for path in ("a", "b"):
        result = subscription_create(
            actor=Actor(team=TeamFactory(slug=f"team-{path}")),
            dataset=dataset,
            endpoint_url=httpserver.url_for(f"/{path}"),
        )
        endpoints[path] = result.subscription.endpoint
    day = iter(range(1, 29))

    def publish(n=1):
        for _ in range(n):
            readiness_publish(
                actor=Actor(team=owner),
                namespace="s3://lake",
                name="raw/orders",
                partition=f"2026-11-{next(day):02d}",
                now=timezone.now(),
            )

    return endpoints, publish


def hits(httpserver, path):
    return sum(1 for request, _ in httpserver.log if request.path == path)


def answer_429_first(seconds="30"):
    answers = iter([Response("slow down", status=429, headers={"Retry-After": seconds})])
    return lambda request: next(answers, Response("ok"))


# --- the token bucket -----------------------------------------------------------------


def test_an_idle_endpoint_gets_one_seconds_worth_and_then_one_per_interval():
    assert endpoint_rates.allowance(rate=2, credit_from=None, now=1000.0) == 2
    credit = endpoint_rates.credit_after(rate=2, credit_from=None, now=1000.0, claimed=2)
    assert endpoint_rates.allowance(rate=2, credit_from=credit, now=1000.0) == 0
    assert endpoint_rates.allowance(rate=2, credit_from=credit, now=1000.49) == 0
    assert endpoint_rates.allowance(rate=2, credit_from=credit, now=1000.5) == 1
    # An hour idle still earns one second's worth, not an hour's.
    assert endpoint_rates.allowance(rate=2, credit_from=credit, now=4600.0) == 2


def test_claims_in_any_window_never_exceed_a_burst_plus_the_rate():
    rate, credit, claimed_at = 5, None, []
    for step in range(2000):  # a claim every 7 ms, for 14 s
        now = 1000.0 + step * 0.007
        n = endpoint_rates.allowance(rate=rate, credit_from=credit, now=now)
        if n:
            credit = endpoint_rates.credit_after(rate=rate, credit_from=credit, now=now, claimed=n)
            claimed_at += [now] * n
    for start in claimed_at:
        in_window = sum(1 for t in claimed_at if start <= t < start + 2.0)
        assert in_window <= endpoint_rates.burst(rate) + rate * 2.0
    assert len(claimed_at) >= rate * 14 - 1  # and the rate is really given


# --- Retry-After pauses the whole endpoint --------------------------------------------


def test_429_retry_after_pauses_that_endpoint_only_until_it_ends(httpserver, world, sender):
    endpoints, publish = world
    httpserver.expect_request("/a").respond_with_handler(answer_429_first("30"))
    httpserver.expect_request("/b").respond_with_data("ok")
    publish()
    delivery.deliver_due(sender=sender)
    assert (hits(httpserver, "/a"), hits(httpserver, "/b")) == (1, 1)
    throttled_until = Endpoint.objects.get(pk=endpoints["a"].pk).throttled_until
    assert timedelta(seconds=29) < throttled_until - timezone.now() <= timedelta(seconds=30)

    publish(3)  # due at once to both endpoints
    summary = delivery.deliver_due(sender=sender)
    assert (hits(httpserver, "/a"), hits(httpserver, "/b")) == (1, 4)
    assert summary.by_state == {"succeeded": 3}
    with time_machine.travel(timezone.now() + timedelta(seconds=29), tick=False):
        delivery.deliver_due(sender=sender)
    assert hits(httpserver, "/a") == 1  # still paused a second before the end

    with time_machine.travel(timezone.now() + timedelta(seconds=31), tick=False):
        summary = delivery.deliver_due(sender=sender)
    # The three waiting deliveries go; the 429'd one waits for its own next attempt.
    assert hits(httpserver, "/a") == 4
    assert summary.by_state == {"succeeded": 3}
    waiting = Delivery.objects.get(endpoint=endpoints["a"], state="retrying")
    assert waiting.attempts == 1


def test_claims_of_an_endpoint_throttled_mid_batch_go_back_unsent_and_uncounted(
    httpserver, world, sender
):
    endpoints, publish = world
    httpserver.expect_request("/a").respond_with_handler(answer_429_first("30"))
    httpserver.expect_request("/b").respond_with_data("ok")
    publish(3)  # one batch claims all six deliveries
    summary = delivery.deliver_due(sender=sender)
    assert (hits(httpserver, "/a"), hits(httpserver, "/b")) == (1, 3)
    assert summary.throttled == 2 and summary.by_state == {"retrying": 1, "succeeded": 3}
    unsent = Delivery.objects.filter(endpoint=endpoints["a"], state="pending")
    assert [(d.attempts, d.claim_token) for d in unsent] == [(0, None), (0, None)]


def test_a_503_retry_after_beyond_the_cap_pauses_the_endpoint_an_hour(httpserver, world, sender):
    endpoints, publish = world
    answers = iter([Response("down", status=503, headers={"Retry-After": "99999"})])
    httpserver.expect_request("/a").respond_with_handler(lambda r: next(answers, Response("ok")))
    httpserver.expect_request("/b").respond_with_data("ok")
    publish()
    delivery.deliver_due(sender=sender)
    pause = Endpoint.objects.get(pk=endpoints["a"].pk).throttled_until - timezone.now()
    assert timedelta(minutes=59) < pause <= timedelta(hours=1)


def test_a_retry_after_without_429_or_503_throttles_nothing(httpserver, world, sender):
    endpoints, publish = world
    httpserver.expect_request("/a").respond_with_data(
        "boom", status=500, headers={"Retry-After": "30"}
    )
    httpserver.expect_request("/b").respond_with_data("ok")
    publish()
    delivery.deliver_due(sender=sender)
    assert Endpoint.objects.get(pk=endpoints["a"].pk).throttled_until is None


# --- rate limits ----------------------------------------------------------------------


def test_a_rate_of_two_per_second_claims_two_of_twenty_then_two_a_second(
    httpserver, world, sender, settings
):
    settings.TIDEMARK_DELIVERY = {**settings.TIDEMARK_DELIVERY, "endpoint_rate_per_second": 10}
    endpoints, publish = world
    Endpoint.objects.filter(pk=endpoints["a"].pk).update(rate_limit_per_second=2)
    httpserver.expect_request("/a").respond_with_data("ok")
    httpserver.expect_request("/b").respond_with_data("ok")
    publish(20)
    now = timezone.now()  # the clock of rate credit
    claims = delivery.delivery_claim_due(limit=50, lease_seconds=60, now=now)
    per_endpoint = {
        path: sum(c.endpoint_id == ep.pk for c in claims) for path, ep in endpoints.items()
    }
    assert per_endpoint == {"a": 2, "b": 10}  # b: the default, here 10 a second
    assert delivery.delivery_claim_due(limit=50, lease_seconds=60, now=now) == []
    later = now + timedelta(seconds=0.5)
    claims += delivery.delivery_claim_due(limit=50, lease_seconds=60, now=later)
    assert sum(c.endpoint_id == endpoints["a"].pk for c in claims) == 3
    delivery.delivery_release(claims)
    Endpoint.objects.update(rate_credit_from=None)

    started = time.monotonic()
    summary = delivery.deliver_due(sender=sender, max_seconds=2.0)
    elapsed = time.monotonic() - started
    received = hits(httpserver, "/a")
    assert 2 + 2 * 1.5 <= received <= 2 + 2 * elapsed + 1, (received, elapsed)
    assert hits(httpserver, "/b") == 20
    assert summary.more_due  # what waits for credit rings for another pass


def test_an_endpoint_without_a_rate_takes_the_setting(httpserver, world, settings):
    settings.TIDEMARK_DELIVERY = {**settings.TIDEMARK_DELIVERY, "endpoint_rate_per_second": 3}
    endpoints, publish = world
    publish(10)
    claims = delivery.delivery_claim_due(limit=50, lease_seconds=60, now=timezone.now())
    assert sorted(c.endpoint_id for c in claims) == sorted(
        [endpoints["a"].pk] * 3 + [endpoints["b"].pk] * 3
    )


def test_the_claim_stays_a_handful_of_queries_however_many_endpoints(
    world, django_assert_max_num_queries
):
    _, publish = world
    owner_dataset = DatasetFactory(
        owner=TeamFactory(slug="more"), namespace="s3://lake", name="raw/x"
    )
    for i in range(30):
        subscription_create(
            actor=Actor(team=TeamFactory(slug=f"c{i}")),
            dataset=owner_dataset,
            endpoint_url=f"http://127.0.0.1:9/{i}",
        )
    readiness_publish(
        actor=Actor(team=owner_dataset.owner),
        namespace="s3://lake",
        name="raw/x",
        partition="2026-11-01",
        now=timezone.now(),
    )
    publish(2)
    with django_assert_max_num_queries(8):
        claims = delivery.delivery_claim_due(limit=100, lease_seconds=60, now=timezone.now())
    assert len(claims) == 34
