"""``GET /api/v1/datasets/{id}/freshness``: the freshness state with the dataset's learned
arrival profile, through real publishes over the API and a frozen clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)  # a Monday


@pytest.fixture
def owner(client_for, team):
    return client_for(team)


def register(owner, **fields):
    response = owner.post("/api/v1/datasets", {"namespace": "s3://lake", **fields}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def publish(owner, name, key, at):
    with time_machine.travel(at, tick=False):
        response = owner.post(
            "/api/v1/readiness",
            {"namespace": "s3://lake", "name": name, "partition": key, "state": "ready"},
            format="json",
        )
    assert response.status_code == 201, response.json()


def test_freshness_carries_the_arrival_profile(owner, settings):
    settings.TIDEMARK_ARRIVAL_PROFILE_PERIODS = 21
    with time_machine.travel(NOW - timedelta(days=30), tick=False):
        dataset_id = register(owner, name="raw/orders", partitioning="daily")
    # Three weeks of daily partitions up to Sunday 11-29, each ready at 05:00 + n minutes
    # after midnight; periods ending on a weekend land three hours later.
    first = datetime(2026, 11, 9, tzinfo=UTC)
    for n in range(21):
        end = first + timedelta(days=n + 1)
        extra = timedelta(hours=3) if end.weekday() >= 5 else timedelta()
        publish(
            owner,
            "raw/orders",
            f"{(first + timedelta(days=n)):%Y-%m-%d}",
            end + timedelta(hours=5, minutes=n) + extra,
        )

    with time_machine.travel(NOW, tick=False):
        body = owner.get(f"/api/v1/datasets/{dataset_id}/freshness").json()

    profile = body["arrival_profile"]
    assert profile["window_periods"] == 21 and profile["periods"] == 21
    assert profile["since"] == "2026-11-09T00:00:00Z" and profile["backfills"] == 0
    business, weekends = profile["business_days"], profile["weekends"]
    # Periods ending on a weekend: n = 4, 5, 11, 12, 18, 19; the other 15 are business days.
    assert (business["periods"], weekends["periods"]) == (15, 6)
    minutes = [0, 1, 2, 3, 6, 7, 8, 9, 10, 13, 14, 15, 16, 17, 20]
    assert business["p50_seconds"] == (5 * 60 + minutes[7]) * 60  # rank ceil(7.5) = 8
    assert business["p90_seconds"] == (5 * 60 + minutes[13]) * 60  # rank ceil(13.5) = 14
    assert business["p99_seconds"] == (5 * 60 + 20) * 60
    assert weekends["p50_seconds"] == (8 * 60 + 11) * 60  # 4, 5, 11 | 12, 18, 19
    assert weekends["p99_seconds"] == (8 * 60 + 19) * 60
    assert profile["all_days"]["periods"] == 21
    assert profile["weekdays"]["monday"]["periods"] == 3
    assert profile["weekdays"]["monday"]["p50_seconds"] is None  # 3 < 5
    assert body["state"] == "no_sla" and profile["sla_suggestion"] is None


def test_freshness_suggests_an_earlier_deadline_when_data_lands_hours_before_it(owner, settings):
    settings.TIDEMARK_SLA_SUGGESTION_MIN_PERIODS = 14
    with time_machine.travel(NOW - timedelta(days=30), tick=False):
        dataset_id = register(owner, name="raw/orders", sla_cron="0 9 * * *")
    first = datetime(2026, 11, 9, tzinfo=UTC)
    for n in range(21):
        end = first + timedelta(days=n + 1)
        publish(
            owner,
            "raw/orders",
            f"{(first + timedelta(days=n)):%Y-%m-%d}",
            end + timedelta(hours=5, minutes=n),
        )
    with time_machine.travel(NOW, tick=False):
        body = owner.get(f"/api/v1/datasets/{dataset_id}/freshness").json()
    suggestion = body["arrival_profile"]["sla_suggestion"]
    assert suggestion["direction"] == "earlier" and suggestion["periods"] == 21
    assert suggestion["ready_by_seconds"] == (5 * 60 + 19) * 60  # rank ceil(19.95) = 20
    assert suggestion["deadline_seconds"] == 9 * 3600 and suggestion["met_percent"] == 100
    assert suggestion["words"].startswith("Ready by 5 h 19 min after the period ends")


def test_an_unpartitioned_dataset_has_no_arrival_profile(owner):
    dataset_id = register(owner, name="dim/customers", partitioning="none")
    body = owner.get(f"/api/v1/datasets/{dataset_id}/freshness").json()
    assert body["arrival_profile"] is None
