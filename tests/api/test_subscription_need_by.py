"""Need-by times on subscriptions through the API: set on POST and PATCH, shown on GET,
validated as an SLA cron is (the same problems and warnings), and the
``need_by_before_sla`` warning when the consumer needs a partition before the producer
promises it."""

from datetime import UTC, datetime

import pytest
import time_machine

from catalog.models import Dataset, Subscription
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/subscriptions"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def dataset():
    # Daily partitions; the producer promises each one by 09:00 UTC the next day.
    return DatasetFactory(
        owner=TeamFactory(slug="producers"),
        namespace="s3://lake",
        name="raw/orders",
        sla_cron="0 9 * * *",
        sla_timezone="UTC",
    )


def _codes(body):
    return [w["code"] for w in body["warnings"]]


def test_a_need_by_is_set_on_post_and_shown_on_get(client_for, team, dataset):
    client = client_for(team)
    created = client.post(
        URL,
        {
            "dataset_id": dataset.id,
            "need_by_cron": "0 7 * * *",
            "need_by_timezone": "Europe/Berlin",
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["need_by_cron"] == "0 7 * * *"
    assert body["need_by_timezone"] == "Europe/Berlin"
    # 07:00 Berlin is 06:00 UTC in winter: the first need-by after noon on 1 December.
    assert body["need_by_next_at"] == "2026-12-02T06:00:00Z"
    listed = client.get(URL).json()["results"][0]
    assert listed["need_by_cron"] == "0 7 * * *"
    assert listed["need_by_next_at"] == "2026-12-02T06:00:00Z"


def test_a_need_by_before_the_sla_is_warned_on_post_and_patch(client_for, team, dataset):
    client = client_for(team)
    created = client.post(
        URL, {"dataset_id": dataset.id, "need_by_cron": "0 6 * * *"}, format="json"
    ).json()
    assert _codes(created) == ["need_by_before_sla"]
    warning = created["warnings"][0]
    assert warning["field"] == "need_by_cron"
    assert "180 min before the SLA deadline 2026-12-02T09:00:00Z" in warning["detail"]
    later = client.patch(f"{URL}/{created['id']}", {"need_by_cron": "0 10 * * *"}, format="json")
    assert later.status_code == 200, later.json()
    assert later.json()["warnings"] == []
    assert later.json()["need_by_next_at"] == "2026-12-02T10:00:00Z"
    earlier = client.patch(f"{URL}/{created['id']}", {"need_by_cron": "30 8 * * *"}, format="json")
    assert _codes(earlier.json()) == ["need_by_before_sla"]


def test_no_warning_without_an_sla_or_without_a_need_by(client_for, team, dataset):
    client = client_for(team)
    plain = client.post(URL, {"dataset_id": dataset.id}, format="json").json()
    assert plain["warnings"] == [] and plain["need_by_next_at"] is None
    Dataset.objects.filter(pk=dataset.pk).update(sla_cron="")
    again = client.post(
        URL, {"dataset_id": dataset.id, "need_by_cron": "0 6 * * *"}, format="json"
    ).json()
    assert again["warnings"] == []
    assert again["need_by_next_at"] == "2026-12-02T06:00:00Z"


def test_a_need_by_cron_gets_the_sla_crons_warnings(client_for, team, dataset):
    body = (
        client_for(team)
        .post(URL, {"dataset_id": dataset.id, "need_by_cron": "* 10 * * *"}, format="json")
        .json()
    )
    assert body["warnings"][0]["code"] == "every_minute_of_fixed_hour"
    assert body["warnings"][0]["field"] == "need_by_cron"
    # Read as every warning of the API is: {code, field, message}.
    assert body["warnings"][0]["message"] == body["warnings"][0]["detail"] != ""


@pytest.mark.parametrize(
    ("payload", "field", "rule"),
    [
        ({"need_by_cron": "75 6 * * *"}, "need_by_cron", "cron_expression"),
        ({"need_by_cron": "0 0 30 2 *"}, "need_by_cron", "cron_never_fires"),
        ({"need_by_cron": "0 6 * * *", "need_by_timezone": "Mars/Base"}, "need_by_timezone", None),
    ],
)
def test_a_bad_need_by_is_a_400_problem_as_a_bad_sla_is(
    client_for, team, dataset, payload, field, rule
):
    client = client_for(team)
    response = client.post(URL, {"dataset_id": dataset.id, **payload}, format="json")
    assert response.status_code == 400, response.json()
    assert response["Content-Type"].startswith("application/problem+json")
    error = response.json()["errors"][0]
    assert error["field"] == field
    assert error["rule"] == (rule or "iana_time_zone")
    assert not Subscription.objects.exists()
    created = client.post(URL, {"dataset_id": dataset.id}, format="json").json()
    patched = client.patch(f"{URL}/{created['id']}", payload, format="json")
    assert patched.status_code == 400
    assert patched.json()["errors"][0]["field"] == field
    assert Subscription.objects.get().need_by_cron == ""


def test_a_need_by_on_an_unpartitioned_dataset_is_refused(client_for, team):
    dataset = DatasetFactory(partitioning=Dataset.Partitioning.NONE)
    response = client_for(team).post(
        URL, {"dataset_id": dataset.id, "need_by_cron": "0 6 * * *"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["rule"] == "partitioned_dataset"


def test_removing_a_need_by_stops_its_judging(client_for, team, dataset):
    client = client_for(team)
    created = client.post(
        URL, {"dataset_id": dataset.id, "need_by_cron": "0 6 * * *"}, format="json"
    ).json()
    removed = client.patch(f"{URL}/{created['id']}", {"need_by_cron": ""}, format="json").json()
    assert removed["need_by_cron"] == "" and removed["need_by_next_at"] is None
