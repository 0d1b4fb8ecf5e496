"""Errors that teach, endpoint by endpoint: an invalid choice lists every choice; a missing
field is ``required`` ("This field is required."); an unknown dataset names the field that
is wrong (``namespace`` or ``name``) and suggests the closest registered identity; a body
that is not JSON is a 415 saying to send ``Content-Type: application/json``."""

from __future__ import annotations

import pytest

from catalog.models import Dataset
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
DEMO = "s3://tidemark-demo"


@pytest.fixture
def orders(team):
    """The team's daily dataset ``s3://tidemark-demo/orders/daily``."""
    return DatasetFactory(owner=team, namespace=DEMO, name="orders/daily")


def _errors(response, status: int) -> list[dict]:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    body = response.json()
    assert {"type", "title", "status", "detail", "code"} <= set(body)
    return body.get("errors", [])


def _error_of(response, status: int, field: str) -> dict:
    errors = _errors(response, status)
    named = [e for e in errors if e["field"] == field]
    assert named, errors
    return named[0]


# --- invalid choices list the choices ---------------------------------------------------

CHOICES = [
    pytest.param(
        "post",
        "/api/v1/datasets",
        {"namespace": DEMO, "name": "x", "partitioning": "weekly"},
        "partitioning",
        '"weekly" is not a valid choice for partitioning; '
        "choose one of: none, hourly, daily, monthly",
        id="dataset register partitioning",
    ),
    pytest.param(
        "post",
        "/api/v1/datasets",
        {"namespace": DEMO, "name": "x", "criticality": "urgent"},
        "criticality",
        '"urgent" is not a valid choice for criticality; '
        "choose one of: low, medium, high, critical",
        id="dataset register criticality",
    ),
    pytest.param(
        "get",
        "/api/v1/datasets",
        {"lifecycle": "gone"},
        "lifecycle",
        '"gone" is not a valid choice for lifecycle; choose one of: active, deprecated, retired',
        id="dataset list filter",
    ),
    pytest.param(
        "post",
        "/api/v1/readiness",
        {"namespace": DEMO, "name": "orders/daily", "partition": "2026-11-28", "state": "done"},
        "state",
        '"done" is not a valid choice for state; choose one of: ready, failed',
        id="readiness state",
    ),
    pytest.param(
        "post",
        "/api/v1/subscriptions",
        {"dataset_id": 1, "event_types": ["partition.exploded"]},
        "event_types.0",
        # The types a subscription can receive: owner notices and watchdog events are not.
        '"partition.exploded" is not a valid choice for event_types; choose one of: '
        "partition.ready, partition.restated, partition.failed, "
        "dataset.late, dataset.recovered, dataset.unusually_late, dataset.at_risk, "
        "change_notice.announced, change_notice.reminder, "
        "change_notice.effective, dataset.version_promoted",
        id="subscription event types",
    ),
    pytest.param(
        "post",
        "/api/v1/keys",
        {"name": "k", "scopes": ["root"]},
        "scopes.0",
        '"root" is not a valid choice for scopes; '
        "choose one of: publish, lineage, read, manage, governance",
        id="key scopes",
    ),
    pytest.param(
        "post",
        "/api/v1/claims",
        {"kind": "bucket", "pattern": "orders"},
        "kind",
        '"bucket" is not a valid choice for kind; '
        "choose one of: job_namespace, db_role, dataset_prefix",
        id="claim kind",
    ),
    pytest.param(
        "post",
        "/api/v1/catalog/apply",
        {"team": "orders", "datasets": [{"namespace": DEMO, "name": "x", "partitioning": "w"}]},
        "datasets[0].partitioning",
        '"w" is not a valid choice for datasets[0].partitioning; '
        "choose one of: none, hourly, daily, monthly",
        id="catalog apply",
    ),
    pytest.param(
        "get",
        "/api/v1/lineage/graph",
        {"namespace": DEMO, "name": "orders/daily", "direction": "sideways"},
        "direction",
        '"sideways" is not a valid choice for direction; choose one of: upstream, downstream, both',
        id="lineage graph direction",
    ),
]


@pytest.mark.parametrize(("method", "url", "body", "field", "detail"), CHOICES)
def test_an_invalid_choice_lists_the_choices(
    client_for, team, orders, method, url, body, field, detail
):
    client = client_for(team)
    send = client.get if method == "get" else lambda u, b: client.post(u, b, format="json")
    response = send(url, body)
    error = _error_of(response, 400, field)
    sent = detail.split('"')[1]  # the value sent, which the sentence quotes first
    assert error == {"field": field, "rule": "invalid_choice", "detail": detail, "value": sent}
    assert detail in response.json()["detail"]


def test_an_invalid_lineage_event_type_lists_the_choices(client_for, team):
    event = {
        "eventType": "FINISHED",
        "eventTime": "2026-11-28T06:00:00Z",
        "run": {"runId": "0190aa43-2b8b-7c43-8d0f-0a1b2c3d4e5f"},
        "job": {"namespace": "airflow", "name": "rollup"},
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    response = client_for(team).post("/api/v1/lineage", event, format="json")
    assert _error_of(response, 422, "eventType") == {
        "field": "eventType",
        "rule": "invalid_choice",
        "detail": '"FINISHED" is not a valid choice for eventType; '
        "choose one of: START, RUNNING, COMPLETE, ABORT, FAIL, OTHER",
    }


def test_an_unknown_storage_source_lists_the_configured_ones(client_for, team, settings):
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": {"url": "file:///x"}, "warm": {"url": "file:///y"}}
    response = client_for(team).post(
        "/api/v1/datasets", {"namespace": DEMO, "name": "x", "storage_source": "lak"}, format="json"
    )
    assert _error_of(response, 400, "storage_source") == {
        "field": "storage_source",
        "rule": "invalid_choice",
        "detail": '"lak" is not a valid choice for storage_source; choose one of: lake, warm',
        "value": "lak",
    }


# --- a missing field is required ----------------------------------------------------------

REQUIRED = [
    pytest.param(
        "/api/v1/readiness",
        {"namespace": DEMO, "name": "orders/daily"},
        "partition",
        id="readiness partition of a daily dataset",
    ),
    pytest.param(
        "/api/v1/readiness",
        {"namespace": DEMO, "name": "orders/daily", "partition": ""},
        "partition",
        id="readiness empty partition of a daily dataset",
    ),
    pytest.param("/api/v1/subscriptions", {"namespace": DEMO}, "name", id="subscription name"),
    pytest.param(
        "/api/v1/subscriptions", {"name": "orders/daily"}, "namespace", id="subscription ns"
    ),
    pytest.param("/api/v1/subscriptions", {}, "dataset_id", id="subscription nothing"),
    pytest.param(
        "/api/v1/subscriptions",
        {"namespace": DEMO, "name": "orders/daily", "job_namespace": "airflow"},
        "job_name",
        id="subscription job name",
    ),
    pytest.param("/api/v1/catalog/apply", {"datasets": []}, "team", id="catalog apply team"),
    pytest.param(
        "/api/v1/catalog/apply",
        {"team": "orders", "datasets": [{"namespace": DEMO}]},
        "datasets[0].name",
        id="catalog apply dataset name",
    ),
    pytest.param(
        "/api/v1/lineage",
        {
            "eventType": "START",
            "run": {"runId": "0190aa43-2b8b-7c43-8d0f-0a1b2c3d4e5f"},
            "job": {"namespace": "airflow", "name": "rollup"},
            "producer": "https://example.com/p",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        },
        "eventTime",
        id="lineage event time",
    ),
]


@pytest.mark.parametrize(("url", "body", "field"), REQUIRED)
def test_a_missing_field_is_required(client_for, team, orders, url, body, field):
    response = client_for(team).post(url, body, format="json")
    # An OpenLineage event's own rules answer 422, as Marquez does.
    error = _error_of(response, 422 if url == "/api/v1/lineage" else 400, field)
    assert error["rule"] == "required"
    assert error["detail"].startswith("This field is required")


def test_a_missing_partition_is_required_of_a_partitioned_dataset_only(client_for, team, orders):
    response = client_for(team).post(
        "/api/v1/readiness", {"namespace": DEMO, "name": "orders/daily"}, format="json"
    )
    assert _errors(response, 400) == [
        {"field": "partition", "rule": "required", "detail": "This field is required."}
    ]
    body = response.json()
    assert "does not match" not in body["detail"]
    assert body["expected_format"] == "YYYY-MM-DD, e.g. 2026-11-28"
    # An unpartitioned dataset needs no partition.
    DatasetFactory(
        owner=team, namespace=DEMO, name="dim/customers", partitioning=Dataset.Partitioning.NONE
    )
    response = client_for(team).post(
        "/api/v1/readiness", {"namespace": DEMO, "name": "dim/customers"}, format="json"
    )
    assert response.status_code == 201, response.json()


# --- an unknown dataset names the wrong field and the closest identity --------------------

UNKNOWN = [
    pytest.param(
        "s3://tidemark-dem0", "orders/daily", "namespace", "namespace_unknown", id="namespace"
    ),
    pytest.param(DEMO, "orders/dialy", "name", "name_unknown", id="name"),
    pytest.param("s3://tidemark-demp", "orders/dialy", "namespace", "namespace_unknown", id="both"),
]


def _publish(client, namespace, name):
    body = {"namespace": namespace, "name": name, "partition": "2026-11-28"}
    return client.post("/api/v1/readiness", body, format="json")


def _subscribe(client, namespace, name):
    return client.post(
        "/api/v1/subscriptions", {"namespace": namespace, "name": name}, format="json"
    )


def _graph(client, namespace, name):
    return client.get("/api/v1/lineage/graph", {"namespace": namespace, "name": name})


@pytest.mark.parametrize("call", [_publish, _subscribe, _graph])
@pytest.mark.parametrize(("namespace", "name", "field", "rule"), UNKNOWN)
def test_an_unknown_dataset_names_the_wrong_field_and_suggests_the_closest(
    client_for, team, orders, call, namespace, name, field, rule
):
    DatasetFactory(owner=team, namespace="s3://elsewhere", name="orders/daily")
    response = call(client_for(team), namespace, name)
    errors = _errors(response, 404)
    assert [(e["field"], e["rule"]) for e in errors] == [(field, rule)]
    body = response.json()
    assert body["suggestion"] == {"namespace": DEMO, "name": "orders/daily"}
    assert f"did you mean {DEMO}/orders/daily?" in body["detail"]


@pytest.mark.parametrize("call", [_publish, _subscribe])
def test_an_unknown_dataset_with_nothing_close_suggests_nothing(client_for, team, orders, call):
    response = call(client_for(team), "postgres://warehouse", "public.invoices")
    assert [e["field"] for e in _errors(response, 404)] == ["namespace"]
    assert "suggestion" not in response.json()


def test_a_publish_suggests_only_datasets_the_key_may_publish(client_for, team, orders):
    DatasetFactory(owner=TeamFactory(slug="billing"), namespace=DEMO, name="orders/dailies")
    response = _publish(client_for(TeamFactory(slug="stranger")), DEMO, "orders/dialy")
    assert [e["field"] for e in _errors(response, 404)] == ["name"]
    assert "suggestion" not in response.json()
    own = _publish(client_for(team), DEMO, "orders/dailie")
    _errors(own, 404)
    assert own.json()["suggestion"] == {"namespace": DEMO, "name": "orders/daily"}


# --- a body that is not JSON is a 415 saying what to send ---------------------------------

FORM_POSTS = [
    "/api/v1/readiness",
    "/api/v1/datasets",
    "/api/v1/subscriptions",
    "/api/v1/keys",
    "/api/v1/claims",
    "/api/v1/lineage",
    "/api/v1/catalog/apply",
]


@pytest.mark.parametrize("url", FORM_POSTS)
def test_a_form_encoded_body_is_415_saying_to_send_json(client_for, team, url):
    response = client_for(team).post(
        url, "namespace=s3%3A%2F%2Flake&name=x", content_type="application/x-www-form-urlencoded"
    )
    errors = _errors(response, 415)
    body = response.json()
    assert (body["type"], body["code"]) == (
        "/problems/unsupported-media-type",
        "unsupported_media_type",
    )
    assert body["detail"].startswith(
        "Content-Type 'application/x-www-form-urlencoded' is not accepted: send the body as "
        "JSON with 'Content-Type: application/json'"
    )
    assert errors == [{"field": "Content-Type", "rule": "media_type", "detail": body["detail"]}]
    assert body["accepted_media_types"][0] == "application/json"


def test_the_415_of_an_endpoint_taking_yaml_too_says_so(client_for, team):
    response = client_for(team).post(
        "/api/v1/catalog/apply", "team=orders", content_type="application/x-www-form-urlencoded"
    )
    _errors(response, 415)
    assert response.json()["accepted_media_types"] == ["application/json", "application/yaml"]
    assert response.json()["detail"].endswith("(or 'application/yaml')")
