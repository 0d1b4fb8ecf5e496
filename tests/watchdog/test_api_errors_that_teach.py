"""Errors that teach on the watchdog's own API: an invalid choice lists every choice; a
missing field is ``required`` ("This field is required..."); a body that is not JSON is a
415 saying to send ``Content-Type: application/json``, in the catalog's words."""

from __future__ import annotations

import pytest

from watchdog.models import Monitor

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

PROBLEM = "application/problem+json"
DAILY = {"name": "orders daily", "kind": "deadline", "cron": "30 6 * * *"}


def _error_of(response, status: int, field: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    named = [e for e in response.json().get("errors", []) if e["field"] == field]
    assert named, response.json()
    return named[0]


CHOICES = [
    pytest.param(
        "/api/v1/monitors",
        {"name": "m", "kind": "hourly", "period_seconds": 60},
        "kind",
        '"hourly" is not a valid choice for kind; choose one of: period, deadline',
        id="monitor kind",
    ),
    pytest.param(
        "/api/v1/monitors",
        {**DAILY, "partitioning": "weekly"},
        "partitioning",
        '"weekly" is not a valid choice for partitioning; '
        'choose one of: "", hourly, daily, monthly',
        id="monitor partitioning",
    ),
    pytest.param(
        "/api/v1/channels",
        {"name": "c", "kind": "pigeon", "target": "roof"},
        "kind",
        '"pigeon" is not a valid choice for kind; choose one of: pagerduty, slack, webhook, email',
        id="channel kind",
    ),
    pytest.param(
        "/api/v1/monitors/external/dataset-7",
        {**DAILY, "channels": [{"kind": "pigeon", "target": "roof"}]},
        "channels.0.kind",
        '"pigeon" is not a valid choice for kind; choose one of: pagerduty, slack, webhook, email',
        id="external monitor channel kind",
    ),
    pytest.param(
        "/api/v1/monitors",
        {**DAILY, "partitioning": "daily", "storage_source": "lak", "storage_template": "d/"},
        "storage_source",
        '"lak" is not a valid choice for storage_source; choose one of: lake',
        id="monitor storage source",
    ),
]


@pytest.mark.parametrize(("url", "body", "field", "detail"), CHOICES)
def test_an_invalid_choice_lists_the_choices(api, settings, url, body, field, detail):
    settings.WATCHDOG_STORAGE_SOURCES = {"lake": {"url": "file:///nonexistent"}}
    response = api.post(url, body, format="json")
    assert _error_of(response, 400, field) == {
        "field": field,
        "rule": "invalid_choice",
        "detail": detail,
        "value": detail.split('"')[1],  # the value sent, which the sentence quotes first
    }
    assert detail in response.json()["detail"]
    assert not Monitor.objects.exists()


REQUIRED = [
    pytest.param({"name": "m", "kind": "period"}, "period_seconds", id="period of a period"),
    pytest.param(
        {**DAILY, "partitioning": "daily", "storage_template": "dt={partition}/"},
        "storage_source",
        id="storage source of a storage check",
    ),
    pytest.param(
        {**DAILY, "partitioning": "daily", "storage_source": "lake"},
        "storage_template",
        id="storage template of a storage check",
    ),
]


@pytest.mark.parametrize(("body", "field"), REQUIRED)
def test_a_missing_field_is_required(api, settings, body, field):
    settings.WATCHDOG_STORAGE_SOURCES = {"lake": {"url": "file:///nonexistent"}}
    response = api.post("/api/v1/monitors", body, format="json")
    error = _error_of(response, 400, field)
    assert error["rule"] == "required"
    assert error["detail"].startswith("This field is required")
    assert f"{field}: This field is required" in response.json()["detail"]


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/v1/monitors"),
        ("post", "/api/v1/channels"),
        ("post", "/api/v1/monitors/external/dataset-7"),
    ],
)
def test_a_form_encoded_body_is_415_saying_to_send_json(api, method, url):
    response = getattr(api, method)(
        url, "name=m&kind=period", content_type="application/x-www-form-urlencoded"
    )
    error = _error_of(response, 415, "Content-Type")
    body = response.json()
    assert (body["type"], body["code"]) == (
        "/problems/unsupported-media-type",
        "unsupported_media_type",
    )
    assert body["detail"] == (
        "Content-Type 'application/x-www-form-urlencoded' is not accepted: send the body as "
        "JSON with 'Content-Type: application/json'"
    )
    assert error == {"field": "Content-Type", "rule": "media_type", "detail": body["detail"]}
    assert body["accepted_media_types"] == ["application/json"]
