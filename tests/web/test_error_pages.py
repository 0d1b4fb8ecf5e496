"""A browser asking for a page gets an HTML error page; the API, and anything not asking
for HTML, keeps its RFC 9457 problem document."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}


def test_an_unknown_dataset_page_is_an_html_404_for_a_browser(make_person, client_as, orders):
    response = client_as(make_person("olga", orders)).get("/datasets/987654/", **HTML)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "Not found" in response.content.decode()


@pytest.mark.parametrize("path", ["/api/v1/nowhere", "/datasets/987654/"])
def test_the_api_and_non_browsers_keep_the_problem_document(make_person, client_as, path, orders):
    client = client_as(make_person("olga", orders))
    headers = HTML if path.startswith("/api/") else {"HTTP_ACCEPT": "*/*"}
    response = client.get(path, **headers)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"


def test_a_form_without_its_csrf_token_is_an_html_403_for_a_browser(make_person, orders):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_person("olga", orders))
    response = client.post("/accounts/logout/", **HTML)
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    assert "reload it" in response.content.decode()
    api = Client(enforce_csrf_checks=True)
    api.force_login(make_person("ana", orders))
    assert api.post("/accounts/logout/")["Content-Type"] == "application/problem+json"


def test_a_form_body_over_the_limit_is_a_413_not_a_host_header_400(
    make_person, client_as, orders, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    client = client_as(make_person("olga", orders, role="admin"))
    response = client.post("/teams/orders/keys", {"name": "x" * 4096})
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


def test_a_server_error_is_an_html_page_for_a_browser_without_touching_the_database(
    rf, django_assert_num_queries
):
    from api.views import errors

    with django_assert_num_queries(0):  # what failed may be the database
        page = errors.server_error(rf.get("/datasets/1/", **HTML))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")
    body = page.content.decode()
    assert "Something went wrong" in body and 'rel="stylesheet"' in body
    assert "Traceback" not in body
    problem = errors.server_error(rf.get("/datasets/1/", HTTP_ACCEPT="*/*"))
    assert problem.status_code == 500 and problem["Content-Type"] == "application/problem+json"
