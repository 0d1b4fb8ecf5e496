"""Signing in and out of the web pages with Django accounts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

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


# --- the sign-in throttle (django-axes; TIDEMARK_LOGIN_FAILURES, TIDEMARK_LOGIN_WINDOW) ------


def _sign_in(client, username, password, addr):
    return client.post(
        "/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=addr
    )


def _signed_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == "/"


def test_a_username_that_failed_too_often_is_refused_from_anywhere_until_the_window_ends(
    client, make_person, settings
):
    make_person("ada")
    make_person("grace")
    limit = settings.AXES_FAILURE_LIMIT
    window = settings.AXES_COOLOFF_TIME
    assert (limit, window.total_seconds()) == (10, 900)  # the documented defaults
    start = datetime(2026, 11, 28, 9, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as clock:
        for attempt in range(limit):  # the last failure that counts is answered 429
            failed = _sign_in(client, "ada", "wrong", f"10.0.0.{attempt}")
            assert failed.status_code == (429 if attempt == limit - 1 else 200), attempt

        refused = _sign_in(client, "ada", PASSWORD, "10.9.9.9")  # the right password
        assert refused.status_code == 429
        assert refused["Retry-After"] == "900"
        assert "Too many failed sign-ins" in refused.content.decode()
        assert 'value="ada"' in refused.content.decode()
        assert "_auth_user_id" not in client.session
        assert _signed_in(_sign_in(Client(), "grace", PASSWORD, "10.0.0.1"))

        clock.move_to(start + window - timedelta(seconds=1))
        assert _sign_in(client, "ada", PASSWORD, "10.9.9.9").status_code == 429
        clock.move_to(start + window + timedelta(seconds=1))
        assert _signed_in(_sign_in(client, "ada", PASSWORD, "10.9.9.9"))


def test_an_address_that_failed_too_often_is_refused_for_every_username(
    client, make_person, settings
):
    make_person("ada")
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _sign_in(client, f"guess{attempt}", "wrong", "192.0.2.7").status_code == 200
    assert _sign_in(client, "guess", "wrong", "192.0.2.7").status_code == 429

    assert _sign_in(client, "ada", PASSWORD, "192.0.2.7").status_code == 429
    assert _signed_in(_sign_in(Client(), "ada", PASSWORD, "192.0.2.8"))


def test_refused_attempts_neither_count_nor_extend_the_lockout_and_old_failures_are_dropped(
    client, make_person, settings
):
    from axes.models import AccessAttempt

    make_person("ada")
    start = datetime(2026, 11, 28, 9, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as clock:
        for _ in range(settings.AXES_FAILURE_LIMIT):
            _sign_in(client, "ada", "wrong", "10.0.0.1")
        clock.move_to(start + timedelta(minutes=10))
        for _ in range(50):  # hammering while locked out
            assert _sign_in(client, "ada", "wrong", "10.0.0.1").status_code == 429
        assert AccessAttempt.objects.get().failures_since_start == settings.AXES_FAILURE_LIMIT

        clock.move_to(start + settings.AXES_COOLOFF_TIME + timedelta(seconds=1))
        assert _sign_in(client, "ada", "wrong", "10.0.0.2").status_code == 200
        # The failures of the window that ended are gone; this one starts a new count.
        assert list(AccessAttempt.objects.values_list("ip_address", "failures_since_start")) == [
            ("10.0.0.2", 1)
        ]


def test_the_admin_sign_in_shares_the_throttle(client, make_person, settings):
    make_person("root", is_staff=True, is_superuser=True)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(client, "root", "wrong", "10.0.0.1")
    refused = client.post(
        "/admin/login/", {"username": "root", "password": PASSWORD}, REMOTE_ADDR="10.0.0.9"
    )
    assert refused.status_code == 429


def test_behind_a_trusted_proxy_each_client_has_its_own_throttle(client, make_person, settings):
    """All sign-ins reach gunicorn from the proxy's address; the client is named by the
    proxy in X-Forwarded-For, and a value the client wrote itself is not believed."""
    settings.TIDEMARK_TRUSTED_PROXY_COUNT = 1
    make_person("ada")

    def via_proxy(username, password, client_addr, forged=""):
        return client.post(
            "/accounts/login/",
            {"username": username, "password": password},
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=f"{forged}{client_addr}",
        )

    for attempt in range(settings.AXES_FAILURE_LIMIT):
        forged = f"192.0.2.{100 + attempt}, "  # a new forged entry each time: no escape
        via_proxy(f"guess{attempt}", "wrong", "198.51.100.7", forged=forged)
    assert via_proxy("ada", PASSWORD, "198.51.100.7").status_code == 429
    assert _signed_in(via_proxy("ada", PASSWORD, "198.51.100.8"))
