import pytest
from django.db import connections

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_dependencies(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_is_ok_with_database_and_broker(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"


def test_readyz_is_503_when_database_unreachable(client, settings):
    real = connections["default"].settings_dict["PORT"]
    connections["default"].close()
    connections["default"].settings_dict["PORT"] = "1"
    try:
        response = client.get("/readyz")
    finally:
        connections["default"].close()
        connections["default"].settings_dict["PORT"] = real
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"


def test_openapi_schema_lists_the_v1_operations(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/v1/readiness",
        "/api/v1/datasets",
        "/api/v1/datasets/{dataset_id}/partitions/latest",
        "/api/v1/subscriptions",
    ):
        assert path in paths


def test_api_docs_page_is_served_without_a_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert b"cdn." not in response.content and b"unpkg" not in response.content


def test_unrouted_path_is_a_problem_document(client):
    response = client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"


def test_csrf_and_host_refusals_are_problem_documents(client, settings):
    from django.test import Client

    response = Client(enforce_csrf_checks=True).post("/healthz")
    assert (response.status_code, response["Content-Type"]) == (403, "application/problem+json")
    response = client.get("/healthz", HTTP_HOST="evil.example")
    assert (response.status_code, response["Content-Type"]) == (400, "application/problem+json")
