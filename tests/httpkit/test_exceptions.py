"""Validation problems name the value sent at each refused field, on real endpoints of the
catalog's API and the watchdog's (``httpkit.exceptions.problem_exception_handler``): a
body field, a nested one, a list item by its index, a query filter; never a secret's value,
and no value for a field that was not sent."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.catalog.factories import DatasetFactory

PROBLEM = "application/problem+json"


def _problem(response, *, joined: bool = True) -> dict:
    """The validation problem answered; its detail, for DRF's errors (``joined``), is each
    error's field and detail."""
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    body = response.json()
    assert body["code"] == "validation_error"
    if joined:
        listed = "; ".join(f"{e['field']}: {e['detail']}" for e in body["errors"])
        assert body["detail"] == listed
    return body


# --- the catalog's API ---------------------------------------------------------------------


@pytest.mark.django_db
def test_a_bad_url_is_named_in_its_error_and_the_problems_detail(client_for, team):
    dataset = DatasetFactory(owner=team)
    response = client_for(team).post(
        "/api/v1/subscriptions",
        {"dataset_id": dataset.pk, "endpoint_url": "htp:/x"},
        format="json",
    )
    body = _problem(response)
    assert body["errors"] == [
        {
            "field": "endpoint_url",
            "rule": "invalid",
            "detail": "Enter a valid URL (got 'htp:/x').",
            "value": "htp:/x",
        }
    ]
    assert body["detail"] == "endpoint_url: Enter a valid URL (got 'htp:/x')."


@pytest.mark.django_db
def test_dataset_fields_below_their_minimum_name_each_value(client_for, team):
    response = client_for(team).post(
        "/api/v1/datasets",
        {
            "namespace": "s3://lake",
            "name": "raw/orders",
            "sla_grace_seconds": -5,
            "change_notice_days": -1,
            "description": "d" * 10_001,
        },
        format="json",
    )
    errors = {e["field"]: e for e in _problem(response)["errors"]}
    assert errors["sla_grace_seconds"] == {
        "field": "sla_grace_seconds",
        "rule": "min_value",
        "detail": "Ensure this value is greater than or equal to 0 (got -5).",
        "value": -5,
    }
    assert errors["change_notice_days"]["value"] == -1
    assert errors["description"]["value"] == "d" * 100 + "..."  # cut as choice_detail cuts
    assert errors["description"]["detail"] == (
        f"Ensure this field has no more than 10000 characters (got {'d' * 100 + '...'!r})."
    )


@pytest.mark.django_db
def test_a_list_items_value_is_named_by_its_index_and_our_own_words_stay(client_for, team):
    dataset = DatasetFactory(owner=team)
    response = client_for(team).post(
        "/api/v1/subscriptions",
        {"dataset_id": dataset.pk, "event_types": ["partition.ready", "partition.exploded"]},
        format="json",
    )
    [error] = _problem(response)["errors"]
    assert error["field"] == "event_types.1"
    assert error["value"] == "partition.exploded"
    # choice_detail's sentence already names the value: it is left as it was.
    assert error["detail"].startswith('"partition.exploded" is not a valid choice for event_types;')
    assert "(got" not in error["detail"]


@pytest.mark.django_db
def test_a_nested_field_of_the_publish_view_is_named(client_for, team):
    dataset = DatasetFactory(owner=team)
    response = client_for(team).post(
        "/api/v1/readiness",
        {
            "namespace": dataset.namespace,
            "name": dataset.name,
            "partition": "2026-11-28",
            "manifest": {"expected_files": -1},
        },
        format="json",
    )
    assert _problem(response)["errors"] == [
        {
            "field": "manifest.expected_files",
            "rule": "min_value",
            "detail": "Ensure this value is greater than or equal to 0 (got -1).",
            "value": -1,
        }
    ]


@pytest.mark.django_db
def test_a_query_filters_value_is_named(client_for, team):
    client = client_for(team)
    filtered = _problem(client.get("/api/v1/deliveries", {"endpoint_id": "abc"}))
    assert filtered["errors"] == [
        {
            "field": "endpoint_id",
            "rule": "invalid",
            "detail": "A valid integer is required (got 'abc').",
            "value": "abc",
        }
    ]
    # The pagination's own problem (a ValidationProblem) names it too, in both details.
    dataset = DatasetFactory(owner=team)
    audit = f"/api/v1/datasets/{dataset.pk}/audit"
    paged = _problem(client.get(audit, {"page_size": "0"}), joined=False)
    assert paged["detail"] == "page_size must be an integer from 1 to 500 (got '0')"
    assert paged["errors"] == [
        {
            "field": "page_size",
            "rule": "range",
            "detail": "must be an integer from 1 to 500 (got '0')",
            "value": "0",
        }
    ]


@pytest.mark.django_db
def test_a_missing_field_has_no_value(client_for, team):
    body = _problem(client_for(team).post("/api/v1/datasets", {"name": None}, format="json"))
    errors = {e["field"]: e for e in body["errors"]}
    assert errors["namespace"] == {
        "field": "namespace",
        "rule": "required",
        "detail": "This field is required.",
    }
    assert errors["name"] == {
        "field": "name",
        "rule": "null",
        "detail": "This field may not be null.",
        "value": None,
    }


# --- the watchdog's API ------------------------------------------------------------------------


@pytest.fixture
def watchdog_api(db):
    from watchdog import tokens

    _, value = tokens.create("test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {value}")
    return client


@pytest.mark.django_db(databases=["default", "watchdog"])
@pytest.mark.urls("config.urls_watchdog")
def test_the_watchdog_names_a_list_items_value(watchdog_api):
    response = watchdog_api.post(
        "/api/v1/monitors",
        {"name": "nightly", "period_seconds": 60, "channel_ids": [1, 0]},
        format="json",
    )
    assert _problem(response)["errors"] == [
        {
            "field": "channel_ids.1",
            "rule": "min_value",
            "detail": "Ensure this value is greater than or equal to 1 (got 0).",
            "value": 0,
        }
    ]


@pytest.mark.django_db(databases=["default", "watchdog"])
@pytest.mark.urls("config.urls_watchdog")
def test_the_watchdog_never_echoes_a_secret(watchdog_api):
    response = watchdog_api.post(
        "/api/v1/monitors/external/tidemark:dataset:9:data",
        {"name": "orders", "period_seconds": 60, "ping_key": "hunter2-not-a-uuid"},
        format="json",
    )
    assert _problem(response)["errors"] == [
        {"field": "ping_key", "rule": "invalid", "detail": "Must be a valid UUID."}
    ]
    assert b"hunter2" not in response.content
