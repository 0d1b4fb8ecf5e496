"""Signing in and out of the web pages with Django accounts."""

from __future__ import annotations

import pytest

from tests.web.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def test_pages_redirect_anonymous_people_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_login_with_a_django_account_shows_the_catalog_and_team_navigation(
    client, make_person, orders
):
    make_person("ada", orders)
    response = client.post(
        "/accounts/login/", {"username": "ada", "password": PASSWORD}, follow=True
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "<h1>Catalog</h1>" in body
    assert 'href="/teams/orders/"' in body
    assert "htmx-2.0.11.min.js" in body


def test_login_with_a_wrong_password_says_so(client, make_person):
    make_person("ada")
    response = client.post("/accounts/login/", {"username": "ada", "password": "nope"})
    assert response.status_code == 200
    assert "enter a correct username and password" in response.content.decode()


def test_logout_is_a_post_and_ends_the_session(client_as, make_person):
    client = client_as(make_person("ada"))
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_login_form_without_csrf_token_is_refused(make_person):
    from django.test import Client

    make_person("ada")
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert response.status_code == 403


def test_vendored_htmx_is_served_without_a_cdn(client):
    from django.contrib.staticfiles import finders

    assert finders.find("catalog/vendor/htmx-2.0.11.min.js")
