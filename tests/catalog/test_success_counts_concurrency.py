"""Two workers recording success batches for the same endpoints at once, on two real
PostgreSQL connections: every success is counted once, and neither deadlocks on the
counters they share (each batch takes its counter rows in endpoint order)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

import outbound
from catalog import delivery, success_batches
from catalog.models import EndpointSuccessHour
from tests.catalog.test_success_counts import world
from tests.concurrency import race

pytestmark = pytest.mark.django_db(transaction=True)

AT = datetime(2026, 11, 28, 12, 40, tzinfo=UTC)
PARTITIONS = 20
OK = outbound.AttemptResult(status_code=204, duration_ms=5)


def test_two_workers_batches_for_the_same_endpoints_are_both_counted():
    a, b = world(["https://hooks.example.com/a", "https://hooks.example.com/b"], PARTITIONS)
    claims = delivery.delivery_claim_due(limit=100, lease_seconds=60, now=timezone.now())
    by_endpoint = {
        endpoint.pk: [c for c in claims if c.endpoint_id == endpoint.pk] for endpoint in (a, b)
    }
    # Worker one sends a's claims then b's, worker two b's then a's: both batches name
    # both endpoints, listed in opposite orders, batch after batch.
    first = list(zip(by_endpoint[a.pk][0::2], by_endpoint[b.pk][0::2], strict=True))
    second = list(zip(by_endpoint[b.pk][1::2], by_endpoint[a.pk][1::2], strict=True))
    recorded: list[set[int]] = []

    def work(pairs):
        def record():
            for pair in pairs:
                recorded.append(
                    success_batches.successes_record([(c, AT, OK) for c in pair], now=AT)
                )

        return record

    race([work(first), work(second)])

    assert sum(len(r) for r in recorded) == 2 * PARTITIONS
    hour = datetime(2026, 11, 28, 12, tzinfo=UTC)
    assert dict(EndpointSuccessHour.objects.values_list("endpoint_id", "succeeded")) == {
        a.pk: PARTITIONS,
        b.pk: PARTITIONS,
    }
    assert set(EndpointSuccessHour.objects.values_list("hour", flat=True)) == {hour}
