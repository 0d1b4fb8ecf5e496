"""The dataset page says why a partition is late when the cause is upstream, and on the
upstream, the lateness it causes downstream (its blast radius)."""

import pytest
import time_machine

from catalog import freshness
from tests.catalog.factories import SubscriptionFactory, TeamFactory
from tests.catalog.test_root_causes import KEY, at, chain, owner  # noqa: F401

pytestmark = pytest.mark.django_db


def test_dataset_page_says_why_and_what_it_holds_up(chain, owner, make_person, client_as):  # noqa: F811
    raw, _staged, mart = chain
    SubscriptionFactory(dataset=mart, team=TeamFactory(slug="analytics"))
    freshness.evaluate_due(now=at(8, 31))
    client = client_as(make_person("olga", owner))

    with time_machine.travel(at(9), tick=False):
        down = client.get(f"/datasets/{mart.pk}/").content.decode()
        root = client.get(f"/datasets/{raw.pk}/").content.decode()

    assert (
        f"<strong>{KEY}</strong> is late because s3://lake/raw/orders <strong>{KEY}</strong> "
        "is late since 2026-11-29 08:30 UTC" in down
    )
    assert 'id="blast-radius"' not in down
    assert 'id="root-cause"' not in root
    assert "2 late partitions downstream in 2 datasets" in root
    assert "s3://lake/mart/orders, s3://lake/staged/orders" in root
    assert "affecting 1 consumer team (analytics)" in root
