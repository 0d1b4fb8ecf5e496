"""The watchdog's server describes its API: ``/api/schema/`` (OpenAPI 3.1, no token
needed) and a docs page whose Swagger UI is served by the watchdog itself (no CDN)."""

import pytest

pytestmark = pytest.mark.urls("config.urls_watchdog")


def test_the_watchdog_serves_its_openapi_document(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] == "Tidemark watchdog API"
    assert "/api/v1/monitors" in document["paths"]
    assert "/api/v1/datasets" not in document["paths"]
    scheme = document["components"]["securitySchemes"]["watchdogToken"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")


def test_the_watchdog_serves_a_docs_page_without_a_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "/api/schema/" in page
    assert "cdn" not in page.lower()


def test_the_served_document_shows_examples(client):
    """The served document carries the serializers' examples (issue 20): a monitor's
    definition as a request and the monitor as the answer."""
    document = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    create = document["paths"]["/api/v1/monitors"]["post"]
    request = create["requestBody"]["content"]["application/json"]["examples"]
    assert [example["value"]["kind"] for example in request.values()] == ["deadline"]
    answer = create["responses"]["201"]["content"]["application/json"]["examples"]
    assert all("ping_url" in example["value"] for example in answer.values())
    assert answer
