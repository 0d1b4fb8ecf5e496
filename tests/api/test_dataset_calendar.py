"""The dataset API and declarations on SLA calendars: the fields round-trip on create,
PATCH and GET; next deadlines honour weekends and holidays; unknown holiday codes and
crons that never fire on a business day are 400 problems naming the field and value."""

from datetime import UTC, datetime

import pytest
import time_machine

from catalog.models import AuditEntry, Dataset

pytestmark = pytest.mark.django_db

ORDERS = {
    "namespace": "s3://lake",
    "name": "raw/orders",
    "partitioning": "daily",
    "partition_timezone": "Europe/Berlin",
    "sla_cron": "30 6 * * *",
    "sla_timezone": "Europe/Berlin",
}
BAVARIA = {
    "sla_calendar": "business_days",
    "sla_holidays_country": "DE",
    "sla_holidays_subdivision": "BY",
}
PROBLEM = "application/problem+json"


def _problem(response) -> dict:
    assert response.status_code == 400, response.json()
    assert response["Content-Type"].startswith(PROBLEM)
    return response.json()


@time_machine.travel(datetime(2026, 12, 23, 12, tzinfo=UTC), tick=False)
def test_next_deadlines_skip_christmas_and_the_weekend(client_for, team):
    client = client_for(team)
    created = client.post("/api/v1/datasets", {**ORDERS, **BAVARIA}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert {k: body[k] for k in BAVARIA} == BAVARIA
    assert body["sla_non_business_day"] == "next_business_day"
    # Thursday 24th is worked; Friday 25th and Saturday 26th are holidays, then Sunday.
    expected = [
        {"local": "2026-12-24T06:30:00+01:00", "utc": "2026-12-24T05:30:00Z"},
        {"local": "2026-12-28T06:30:00+01:00", "utc": "2026-12-28T05:30:00Z"},
        {"local": "2026-12-29T06:30:00+01:00", "utc": "2026-12-29T05:30:00Z"},
    ]
    assert body["next_deadlines"] == expected
    assert body["next_deadline_at"] == "2026-12-24T05:30:00Z"
    shown = client.get(f"/api/v1/datasets/{body['id']}").json()
    assert shown["next_deadlines"] == expected


@time_machine.travel(datetime(2026, 12, 23, 12, tzinfo=UTC), tick=False)
def test_patch_a_calendar_replans_and_is_audited(client_for, team):
    client = client_for(team)
    created = client.post("/api/v1/datasets", ORDERS, format="json").json()
    assert created["sla_calendar"] == "none"
    assert created["next_deadlines"][1]["utc"] == "2026-12-25T05:30:00Z"
    response = client.patch(
        f"/api/v1/datasets/{created['id']}",
        {**BAVARIA, "sla_non_business_day": "skip"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["sla_non_business_day"] == "skip"
    assert [d["utc"] for d in response.json()["next_deadlines"]] == [
        "2026-12-24T05:30:00Z",
        "2026-12-28T05:30:00Z",
        "2026-12-29T05:30:00Z",
    ]
    audit = AuditEntry.objects.filter(action="dataset.updated").get()
    assert audit.changes["sla_calendar"] == ["none", "business_days"]
    assert audit.changes["sla_holidays_country"] == ["", "DE"]
    # Back to every day: the stored country stays, and no longer applies.
    again = client.patch(
        f"/api/v1/datasets/{created['id']}", {"sla_calendar": "none"}, format="json"
    ).json()
    assert again["next_deadlines"][1]["utc"] == "2026-12-25T05:30:00Z"


@pytest.mark.parametrize(
    ("fields", "field", "value", "hint"),
    [
        ({"sla_holidays_country": "XX"}, "sla_holidays_country", "'XX'", "ISO 3166-1 alpha-2"),
        ({"sla_holidays_country": "de"}, "sla_holidays_country", "'de'", "(e.g. DE)"),
        (
            {"sla_holidays_country": "DE", "sla_holidays_subdivision": "CA"},
            "sla_holidays_subdivision",
            "'CA'",
            "BW, BY",
        ),
        ({"sla_holidays_subdivision": "BY"}, "sla_holidays_subdivision", "'BY'", "country"),
    ],
)
def test_unknown_holiday_codes_are_a_400_naming_field_value_and_where_codes_are(
    client_for, team, fields, field, value, hint
):
    response = client_for(team).post(
        "/api/v1/datasets",
        {**ORDERS, "sla_calendar": "business_days", **fields},
        format="json",
    )
    body = _problem(response)
    assert body["code"] == "validation_error"
    (error,) = body["errors"]
    assert error["field"] == field
    assert f"{field} {value}" in error["detail"]
    assert hint in error["detail"]
    assert field in body["detail"]
    assert not Dataset.objects.exists()


def test_unknown_country_names_where_the_codes_are_listed(client_for, team):
    response = client_for(team).post(
        "/api/v1/datasets", {**ORDERS, "sla_holidays_country": "ZZ"}, format="json"
    )
    (error,) = _problem(response)["errors"]
    assert "https://holidays.readthedocs.io/" in error["detail"]


def test_a_cron_that_never_fires_on_a_business_day_is_a_400(client_for, team):
    client = client_for(team)
    created = client.post(
        "/api/v1/datasets", {**ORDERS, "sla_cron": "0 6 * * 6"}, format="json"
    ).json()
    response = client.patch(
        f"/api/v1/datasets/{created['id']}", {"sla_calendar": "business_days"}, format="json"
    )
    (error,) = _problem(response)["errors"]
    assert error["field"] == "sla_cron"
    assert "never fires on a business day" in error["detail"]
    assert Dataset.objects.get().sla_calendar == "none"


def test_an_unknown_non_business_day_rule_lists_the_choices(client_for, team):
    response = client_for(team).post(
        "/api/v1/datasets", {**ORDERS, "sla_non_business_day": "previous"}, format="json"
    )
    (error,) = _problem(response)["errors"]
    assert error["field"] == "sla_non_business_day"
    assert "next_business_day" in error["detail"] and "skip" in error["detail"]


YAML = b"""
team: orders
datasets:
  - namespace: s3://lake
    name: raw/orders
    partitioning: daily
    sla_cron: "30 6 * * *"
    sla_calendar: business_days
    sla_holidays_country: DE
    sla_holidays_subdivision: BY
    sla_non_business_day: skip
"""


def test_declarations_set_a_calendar(client_for, team):
    response = client_for(team).post(
        "/api/v1/catalog/apply?dry_run=false", YAML, content_type="application/yaml"
    )
    assert response.status_code == 200, response.json()
    dataset = Dataset.objects.get()
    assert (
        dataset.sla_calendar,
        dataset.sla_holidays_country,
        dataset.sla_holidays_subdivision,
        dataset.sla_non_business_day,
    ) == ("business_days", "DE", "BY", "skip")
    again = client_for(team).post(
        "/api/v1/catalog/apply?dry_run=true", YAML, content_type="application/yaml"
    )
    assert again.json()["datasets"][0]["action"] == "unchanged"


def test_declarations_dry_run_refuses_an_unknown_subdivision(client_for, team):
    response = client_for(team).post(
        "/api/v1/catalog/apply?dry_run=true",
        YAML.replace(b"subdivision: BY", b"subdivision: XX"),
        content_type="application/yaml",
    )
    (error,) = _problem(response)["errors"]
    assert error["field"] == "datasets[0].sla_holidays_subdivision"
    assert "'XX'" in error["detail"]
