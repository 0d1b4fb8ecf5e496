"""Partitions from the future through the API: a publish of a period that has not started is
a 422 problem unless the dataset accepts future partitions, and ``/partitions/latest`` and
``/freshness`` never report a period that has not started. The clock is frozen with
time-machine: the views read ``timezone.now()``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from catalog import freshness
from catalog.models import AuditEntry, Dataset, LatePartition, Partition, ReadinessEvent
from tests.catalog.factories import TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


@pytest.fixture
def clock():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def owner(client_for, team):
    return client_for(team)


@pytest.fixture
def dataset(owner, clock):
    """A daily dataset (UTC) with a 06:00 UTC deadline, registered a day before NOW."""
    clock.move_to(NOW - timedelta(days=1))
    response = owner.post(
        "/api/v1/datasets",
        {"namespace": "s3://lake", "name": "raw/orders", "sla_cron": "0 6 * * *"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    clock.move_to(NOW)
    return Dataset.objects.get(pk=response.json()["id"])


def publish(client, partition, headers=None, **extra):
    body = {"namespace": "s3://lake", "name": "raw/orders", "partition": partition, **extra}
    return client.post("/api/v1/readiness", body, format="json", headers=headers or {})


def allow_future(client, dataset, allowed: bool):
    response = client.patch(
        f"/api/v1/datasets/{dataset.pk}", {"accepts_future_partitions": allowed}, format="json"
    )
    assert response.status_code == 200, response.json()
    return response


def latest(client, dataset):
    return client.get(f"/api/v1/datasets/{dataset.pk}/partitions/latest")


def freshness_of(client, dataset):
    return client.get(f"/api/v1/datasets/{dataset.pk}/freshness").json()


@pytest.mark.parametrize(
    "headers",
    [
        {},  # the publish fast path (and, on PostgreSQL, the one-statement writer)
        {"Accept": "application/json; indent=2"},  # DRF's view
        {"Idempotency-Key": "future-1"},  # the transactional path
    ],
    ids=["direct", "drf", "idempotent"],
)
def test_a_partition_from_the_future_is_refused_and_never_becomes_latest(owner, dataset, headers):
    """The bug: a mistyped year (2027 for 2026) was 201 and became the latest partition,
    and the dataset fresh, hiding every real gap."""
    assert publish(owner, "2026-11-27").status_code == 201

    response = publish(owner, "2027-06-01", headers=headers)

    assert response.status_code == 422, response.json()
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "partition_in_future"
    assert problem["rule"] == "partition_started"
    assert problem["partition"] == "2027-06-01"
    assert problem["starts_at"] == "2027-06-01T00:00:00Z"
    assert problem["newest_accepted_partition"] == "2026-11-29"
    assert problem["clock_skew_seconds"] == 300
    assert [(e["field"], e["rule"]) for e in problem["errors"]] == [
        ("partition", "partition_started")
    ]
    assert "2027-06-01" in problem["detail"] and "accepts_future_partitions" in problem["detail"]
    assert not Partition.objects.filter(key="2027-06-01").exists()
    assert ReadinessEvent.objects.count() == 1
    assert latest(owner, dataset).json()["key"] == "2026-11-27"
    freshness.evaluate_due(now=NOW)
    state = freshness_of(owner, dataset)
    assert (state["state"], state["latest_ready"], state["partition_due"]) == (
        "late",
        "2026-11-27",
        "2026-11-28",
    )


def test_the_current_period_and_the_next_within_the_clock_skew_allowance_are_accepted(
    owner, dataset, clock, settings
):
    assert publish(owner, "2026-11-29").status_code == 201  # started at 00:00, now 08:00
    clock.move_to(datetime(2026, 11, 29, 23, 55, 1, tzinfo=UTC))  # 299 s before 11-30
    assert publish(owner, "2026-11-30").status_code == 201
    clock.move_to(datetime(2026, 11, 30, 23, 54, 59, tzinfo=UTC))  # 301 s before 12-01
    refused = publish(owner, "2026-12-01")
    assert refused.status_code == 422
    assert refused.json()["newest_accepted_partition"] == "2026-11-30"

    settings.TIDEMARK_PARTITION_CLOCK_SKEW_SECONDS = 0
    clock.move_to(datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC))
    assert publish(owner, "2026-12-01").status_code == 422
    clock.move_to(datetime(2026, 12, 1, tzinfo=UTC))
    assert publish(owner, "2026-12-01").status_code == 201


def test_hourly_partitions_in_a_zone_name_the_newest_local_hour(owner, team, clock):
    response = owner.post(
        "/api/v1/datasets",
        {
            "namespace": "s3://lake",
            "name": "raw/orders",
            "partitioning": "hourly",
            "partition_timezone": "Asia/Kolkata",  # UTC+05:30: 08:00 UTC is 13:30
        },
        format="json",
    )
    assert response.status_code == 201
    assert publish(owner, "2026-11-29T13").status_code == 201
    refused = publish(owner, "2026-11-29T14")  # starts at 08:30 UTC
    assert refused.status_code == 422
    assert refused.json()["newest_accepted_partition"] == "2026-11-29T13"
    assert refused.json()["starts_at"] == "2026-11-29T08:30:00Z"


def test_an_unpartitioned_dataset_has_no_future(owner, team):
    response = owner.post(
        "/api/v1/datasets",
        {"namespace": "s3://lake", "name": "raw/orders", "partitioning": "none"},
        format="json",
    )
    assert response.status_code == 201
    assert publish(owner, "", version="v1").status_code == 201


def test_a_dataset_with_future_partitions_opts_in_and_latest_still_judges_started_periods(
    owner, dataset, clock
):
    response = allow_future(owner, dataset, True)
    assert response.json()["accepts_future_partitions"] is True
    audit = AuditEntry.objects.filter(dataset=dataset, action="dataset.updated").get()
    assert audit.changes == {"accepts_future_partitions": [False, True]}

    assert publish(owner, "2026-12-05").status_code == 201  # a forecast
    assert latest(owner, dataset).status_code == 404
    assert publish(owner, "2026-11-28").status_code == 201
    assert latest(owner, dataset).json()["key"] == "2026-11-28"
    assert freshness_of(owner, dataset)["latest_ready"] == "2026-11-28"

    clock.move_to(datetime(2026, 12, 4, 23, 59, 59, tzinfo=UTC))
    assert latest(owner, dataset).json()["key"] == "2026-11-28"
    clock.move_to(datetime(2026, 12, 5, tzinfo=UTC))  # the forecast's day has started
    assert latest(owner, dataset).json()["key"] == "2026-12-05"
    assert freshness_of(owner, dataset)["latest_ready"] == "2026-12-05"


def test_future_partitions_allowed_never_make_a_missing_started_one_look_fresh(
    owner, dataset, clock
):
    allow_future(owner, dataset, True)
    assert publish(owner, "2026-11-30").status_code == 201
    assert publish(owner, "2026-12-01").status_code == 201

    assert freshness.evaluate_due(now=NOW)[0].partition == "2026-11-28"
    state = freshness_of(owner, dataset)
    assert (state["state"], state["partition_due"], state["latest_ready"]) == (
        "late",
        "2026-11-28",
        None,
    )
    assert LatePartition.objects.get().partition_key == "2026-11-28"


def test_the_setting_is_registered_shown_and_checked(owner, team):
    response = owner.post(
        "/api/v1/datasets",
        {"namespace": "s3://lake", "name": "forecast/demand", "accepts_future_partitions": True},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["accepts_future_partitions"] is True
    default = owner.post(
        "/api/v1/datasets", {"namespace": "s3://lake", "name": "raw/orders"}, format="json"
    )
    assert default.json()["accepts_future_partitions"] is False
    bad = owner.patch(
        f"/api/v1/datasets/{default.json()['id']}",
        {"accepts_future_partitions": "perhaps"},
        format="json",
    )
    assert bad.status_code == 400
    assert [e["field"] for e in bad.json()["errors"]] == ["accepts_future_partitions"]


def test_restatements_apply_the_same_rule(owner, dataset, team):
    allow_future(owner, dataset, True)
    for key in ("2026-11-28", "2026-12-05"):
        assert publish(owner, key, version="v1").status_code == 201
    url = f"/api/v1/datasets/{dataset.pk}/restatements"
    opened = owner.post(
        url,
        {"version": "v2", "first_partition": "2026-12-05", "last_partition": "2026-12-05"},
        format="json",
    )
    assert opened.status_code == 201, opened.json()
    allow_future(owner, dataset, False)

    staged = publish(owner, "2026-12-05", version="v2", restatement=opened.json()["id"])
    assert staged.status_code == 422
    assert staged.json()["errors"][0]["field"] == "partition"
    refused = owner.post(
        url,
        {"version": "v3", "first_partition": "2026-11-28", "last_partition": "2026-12-05"},
        format="json",
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "partition_in_future"
    assert [(e["field"], e["rule"]) for e in refused.json()["errors"]] == [
        ("last_partition", "partition_started")
    ]


def test_another_teams_key_learns_nothing_from_a_future_key(client_for, dataset):
    """Permission first: a key that may not publish gets 403, not the dataset's rules."""
    response = publish(client_for(TeamFactory(slug="billing")), "2027-06-01")
    assert response.status_code == 403
