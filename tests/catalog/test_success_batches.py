"""Plain successes recorded together (``catalog.success_batches``) write exactly what
``delivery_record`` writes for one, and nothing for a claim another worker took over."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

import outbound
from catalog import delivery, success_batches
from catalog.actors import Actor
from catalog.models import Delivery, DeliveryAttempt
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

DELIVERY_FIELDS = (
    "state",
    "attempts",
    "claimed_until",
    "claim_token",
    "last_status_code",
    "last_error_kind",
    "last_error",
)
ATTEMPT_FIELDS = (
    "number",
    "duration_ms",
    "status_code",
    "decision",
    "error_kind",
    "error",
    "response_excerpt",
    "next_attempt_in_seconds",
)


@pytest.fixture
def claims():
    """Two claimed deliveries to one webhook endpoint (nothing is sent)."""
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    subscription_create(
        actor=Actor(team=TeamFactory(slug="analytics")),
        dataset=dataset,
        endpoint_url="https://hooks.example.com/tidemark",
    )
    for partition in ("2026-11-27", "2026-11-28"):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )
    return delivery.delivery_claim_due(limit=10, lease_seconds=60, now=timezone.now())


def _ok(ms: int) -> outbound.AttemptResult:
    return outbound.AttemptResult(status_code=204, duration_ms=ms, response_excerpt="thanks")


def test_successes_record_writes_what_delivery_record_writes(claims):
    one, other = claims
    started = timezone.now()
    assert success_batches.plain_success(one, _ok(7))
    assert delivery.delivery_record(claim=one, result=_ok(7), started_at=started, now=started)
    recorded = success_batches.successes_record([(other, started, _ok(7))], now=started)

    assert recorded == {other.delivery_id}
    rows = {d.pk: d for d in Delivery.objects.all()}
    fields = [[getattr(rows[c.delivery_id], f) for f in DELIVERY_FIELDS] for c in claims]
    assert fields[0] == fields[1] == ["succeeded", 1, None, None, 204, "", ""]
    assert rows[one.delivery_id].last_attempt_at == rows[other.delivery_id].last_attempt_at
    assert rows[other.delivery_id].finished_at == started
    attempts = {a.delivery_id: a for a in DeliveryAttempt.objects.all()}
    kept = [[getattr(attempts[c.delivery_id], f) for f in ATTEMPT_FIELDS] for c in claims]
    assert kept[0] == kept[1] == [1, 7, 204, "succeeded", "", "", "thanks", None]
    assert attempts[other.delivery_id].endpoint_id == other.endpoint_id
    assert attempts[other.delivery_id].started_at == started


def test_successes_record_leaves_a_claim_another_worker_took_over(claims):
    one, other = claims
    Delivery.objects.filter(pk=one.delivery_id).update(claim_token=uuid.uuid4())
    now = timezone.now()

    recorded = success_batches.successes_record([(one, now, _ok(3)), (other, now, _ok(4))], now=now)

    assert recorded == {other.delivery_id}
    assert Delivery.objects.get(pk=one.delivery_id).state == "pending"  # untouched
    assert list(DeliveryAttempt.objects.values_list("delivery_id", flat=True)) == [
        other.delivery_id
    ]


def test_a_failing_endpoint_or_a_non_2xx_is_not_a_plain_success(claims):
    one, _ = claims
    failing = delivery.Claim(**{**one.__dict__, "endpoint_failing": True})
    assert not success_batches.plain_success(failing, _ok(1))
    assert not success_batches.plain_success(one, outbound.AttemptResult(429, 1))
    assert not success_batches.plain_success(
        one, outbound.AttemptResult(None, 1, error_kind="timeout")
    )
