"""``selectors.dataset_arrival_profile`` on real PostgreSQL: what counts as an arrival
(published or found by the poll; not a new version, a restatement or a backfill), the
window of periods, and one query."""

from datetime import UTC, datetime, timedelta

import pytest

from catalog import restatements, selectors
from catalog.actors import Actor
from catalog.services.datasets import dataset_register
from catalog.services.publishing import readiness_found, readiness_publish
from tests.catalog.factories import TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 10, 12, 12, tzinfo=UTC)  # a Monday


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def actor():
    return Actor(team=TeamFactory(slug="orders"), username="t")


@pytest.fixture
def dataset(actor):
    return dataset_register(
        actor=actor, namespace="s3://lake", name="raw/orders", partitioning="daily"
    )


def publish(actor, key, at, **fields):
    result = readiness_publish(
        actor=actor, namespace="s3://lake", name="raw/orders", partition=key, now=at, **fields
    )
    assert result.status_code in (200, 201)


def end_of(key: str) -> datetime:
    return datetime.fromisoformat(key).replace(tzinfo=UTC) + timedelta(days=1)


def test_profile_reads_first_arrivals_only(actor, dataset, settings):
    settings.TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS = 3
    # 2026-10-01 .. 10-10 land at 05:00 + n minutes after their period ends.
    for n in range(1, 11):
        key = f"2026-10-{n:02d}"
        publish(actor, key, end_of(key) + timedelta(hours=5, minutes=n))
    # 10-11 is found by the poll at 06:00.
    assert readiness_found(
        dataset=dataset,
        partition="2026-10-11",
        manifest=None,
        found={"reason": "marker"},
        missed_event=True,
        now=end_of("2026-10-11") + timedelta(hours=6),
    )
    # A new version of 10-05 two days later, and a promoted restatement of 10-02..10-03:
    # neither moves when those partitions first arrived.
    publish(actor, "2026-10-05", NOW - timedelta(hours=2), version="v2")
    restatement = restatements.restatement_open(
        actor=actor,
        dataset=dataset,
        version="r1",
        first_partition="2026-10-02",
        last_partition="2026-10-03",
        now=NOW - timedelta(hours=1),
    )
    for key in ("2026-10-02", "2026-10-03"):
        publish(actor, key, NOW - timedelta(hours=1), restatement=restatement.pk)
    restatements.restatement_promote(actor=actor, restatement=restatement, now=NOW)
    # 09-29 filled in after everything newer: a backfill.
    publish(actor, "2026-09-29", NOW - timedelta(minutes=30))

    profile = selectors.dataset_arrival_profile(dataset=dataset, now=NOW, periods=14)

    assert profile.periods == 11 and profile.backfills == 1
    minutes = sorted([5 * 60 + n for n in range(1, 11)] + [6 * 60])
    assert profile.all_days.p50_seconds == minutes[5] * 60  # rank ceil(5.5) = 6
    assert profile.all_days.p90_seconds == minutes[9] * 60  # rank ceil(9.9) = 10
    assert profile.all_days.p99_seconds == 6 * 3600
    # Periods ending Saturday 10-03, Sunday 10-04 and 10-10, 10-11: four weekend arrivals.
    assert profile.weekends.periods == 4 and profile.business_days.periods == 7
    assert profile.weekdays["sunday"].periods == 2
    assert profile.weekdays["sunday"].p50_seconds is None  # 2 < 3


def test_window_is_the_last_periods_before_now(actor, dataset):
    for n in range(1, 11):
        key = f"2026-10-{n:02d}"
        publish(actor, key, end_of(key) + timedelta(hours=n))
    # The last 3 closed periods before NOW are 10-09, 10-10, 10-11 (10-11 is missing).
    profile = selectors.dataset_arrival_profile(dataset=dataset, now=NOW, periods=3)
    assert profile.periods == 2
    assert profile.all_days.p50_seconds is None  # 2 < the default 5


def test_an_unpartitioned_dataset_has_no_profile(actor):
    dataset = dataset_register(actor=actor, namespace="s3://lake", name="dim", partitioning="none")
    assert selectors.dataset_arrival_profile(dataset=dataset, now=NOW) is None


def test_profile_is_one_query(actor, dataset, django_assert_num_queries):
    for n in range(1, 11):
        key = f"2026-10-{n:02d}"
        publish(actor, key, end_of(key) + timedelta(hours=n))
    with django_assert_num_queries(1):
        profile = selectors.dataset_arrival_profile(dataset=dataset, now=NOW)
    assert profile.periods == 10
