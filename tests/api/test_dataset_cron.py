"""The dataset API and the declarations endpoint on SLA crons: warnings in the response,
400 problems naming the field, the value and the allowed range, refusals of crons that
never fire, and next deadlines in the SLA's zone and in UTC."""

from datetime import UTC, datetime

import pytest
import time_machine

from catalog.models import Dataset

pytestmark = pytest.mark.django_db

ORDERS = {"namespace": "s3://lake", "name": "raw/orders", "partitioning": "daily"}
PROBLEM = "application/problem+json"


def _problem(response) -> dict:
    assert response.status_code == 400, response.json()
    assert response["Content-Type"].startswith(PROBLEM)
    return response.json()


def test_register_with_a_suspicious_cron_is_201_with_warnings(client_for, team):
    response = client_for(team).post(
        "/api/v1/datasets", {**ORDERS, "sla_cron": "* 6 * * *"}, format="json"
    )
    assert response.status_code == 201, response.json()
    (warning,) = response.json()["warnings"]
    assert warning["code"] == "every_minute_of_fixed_hour"
    assert warning["field"] == "sla_cron"
    assert "'0 6 * * *'" in warning["message"]
    assert Dataset.objects.get().sla_cron == "* 6 * * *"


def test_patch_to_day_of_month_and_day_of_week_warns_and_saves(client_for, team):
    client = client_for(team)
    created = client.post("/api/v1/datasets", {**ORDERS, "sla_cron": "0 6 * * *"}, format="json")
    assert created.json()["warnings"] == []
    response = client.patch(
        f"/api/v1/datasets/{created.json()['id']}", {"sla_cron": "0 6 1-7 * MON"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert [w["code"] for w in response.json()["warnings"]] == ["day_of_month_or_day_of_week"]
    assert "MON#1" in response.json()["warnings"][0]["message"]
    assert Dataset.objects.get().sla_cron == "0 6 1-7 * MON"


@pytest.mark.parametrize(
    ("cron", "detail", "rule"),
    [
        ("75 6 * * *", "sla_cron: minute field '75' is out of range 0-59", "cron_expression"),
        ("0 6 * * 1-9", "sla_cron: day-of-week field '1-9': '9' is out of range 0-7", None),
        ("0 25 * * *", "sla_cron: hour field '25' is out of range 0-23", "cron_expression"),
        (
            "0 0 30 2 *",
            "sla_cron: never fires: day-of-month '30' never falls in month February: "
            "at most 29 days",
            "cron_never_fires",
        ),
        ("0 0 31 4,6,9,11 *", "at most 30 days", "cron_never_fires"),
    ],
)
def test_a_bad_cron_is_a_400_problem_naming_field_value_and_range(
    client_for, team, cron, detail, rule
):
    response = client_for(team).post(
        "/api/v1/datasets", {**ORDERS, "sla_cron": cron}, format="json"
    )
    body = _problem(response)
    assert body["code"] == "validation_error"
    assert detail in body["detail"]
    (error,) = body["errors"]
    assert error["field"] == "sla_cron"
    assert detail.removeprefix("sla_cron: ") in error["detail"]
    assert error["rule"] == (rule or "cron_expression")
    assert "Bad " not in error["detail"]
    assert not Dataset.objects.exists()


@time_machine.travel(datetime(2026, 3, 27, 12, tzinfo=UTC), tick=False)
def test_next_deadlines_are_shown_in_the_sla_zone_and_in_utc_across_dst(client_for, team):
    client = client_for(team)
    created = client.post(
        "/api/v1/datasets",
        {**ORDERS, "sla_cron": "30 2 * * *", "sla_timezone": "Europe/Berlin"},
        format="json",
    )
    expected = [
        {"local": "2026-03-28T02:30:00+01:00", "utc": "2026-03-28T01:30:00Z"},
        # 02:30 does not occur on 29 March in Berlin: the deadline is the end of the gap.
        {"local": "2026-03-29T03:00:00+02:00", "utc": "2026-03-29T01:00:00Z"},
        {"local": "2026-03-30T02:30:00+02:00", "utc": "2026-03-30T00:30:00Z"},
    ]
    assert created.json()["next_deadlines"] == expected
    shown = client.get(f"/api/v1/datasets/{created.json()['id']}").json()
    assert shown["next_deadlines"] == expected
    assert shown["warnings"] == []


def test_a_dataset_without_an_sla_has_no_next_deadlines(client_for, team):
    created = client_for(team).post("/api/v1/datasets", ORDERS, format="json")
    assert created.json()["next_deadlines"] == []


YAML = b"""
team: orders
datasets:
  - namespace: s3://lake
    name: raw/orders
    partitioning: daily
    sla_cron: "0 6 1 * MON"
  - namespace: s3://lake
    name: raw/refunds
    sla_cron: "0 6 * * *"
"""


@pytest.mark.parametrize("dry_run", [True, False])
def test_catalog_apply_lists_each_datasets_warnings(client_for, team, dry_run):
    url = f"/api/v1/catalog/apply?dry_run={'true' if dry_run else 'false'}"
    response = client_for(team).post(url, YAML, content_type="application/yaml")
    assert response.status_code == 200, response.json()
    orders, refunds = response.json()["datasets"]
    assert [(w["code"], w["field"]) for w in orders["warnings"]] == [
        ("day_of_month_or_day_of_week", "sla_cron")
    ]
    assert refunds["warnings"] == []
    assert Dataset.objects.filter(name="raw/orders").exists() is not dry_run


def test_catalog_apply_dry_run_refuses_a_cron_that_never_fires(client_for, team):
    body = YAML.replace(b"0 6 1 * MON", b"0 6 31 4 *")
    response = client_for(team).post(
        "/api/v1/catalog/apply?dry_run=true", body, content_type="application/yaml"
    )
    problem = _problem(response)
    (error,) = problem["errors"]
    assert error["field"] == "datasets[0].sla_cron"
    assert error["rule"] == "cron_never_fires"
    assert "day-of-month '31' never falls in month April" in error["detail"]
