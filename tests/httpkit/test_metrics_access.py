"""Who may read ``GET /metrics`` (``TIDEMARK_METRICS``), on the catalog's server and on the
watchdog's, and what a request is counted under."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.urls import clear_url_caches, set_urlconf

from tests.db_relay import relayed
from tests.metrics_helpers import names, scrape, value

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

TOKEN = "metrics-token-7f3a"


@pytest.fixture(params=["config.urls", "config.urls_watchdog"], ids=["catalog", "watchdog"])
def server(request, settings):
    """Each server's URLs in turn."""
    settings.ROOT_URLCONF = request.param
    clear_url_caches()
    set_urlconf(None)
    yield request.param
    clear_url_caches()


def test_open_answers_anyone(server, settings):
    settings.TIDEMARK_METRICS = "open"
    response = Client().get("/metrics")
    assert response.status_code == 200
    family = "tidemark_late_datasets" if server == "config.urls" else "tidemark_watchdog_monitors"
    assert f"# TYPE {family} gauge" in response.content.decode()


def test_off_is_not_found(server, settings):
    settings.TIDEMARK_METRICS = "off"
    response = Client().get("/metrics")
    assert response.status_code == 404
    assert b"tidemark_" not in response.content
    assert response["Content-Type"] == "application/problem+json"


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer "],
    ids=["none", "wrong", "not-bearer", "longer", "empty"],
)
def test_token_refuses_without_the_token(server, settings, authorization):
    settings.TIDEMARK_METRICS = "token"
    settings.TIDEMARK_METRICS_TOKEN = TOKEN
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = Client().get("/metrics", **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert response.json()["code"] == "not_authenticated"
    assert b"tidemark_" not in response.content


def test_token_answers_the_token(server, settings):
    settings.TIDEMARK_METRICS = "token"
    settings.TIDEMARK_METRICS_TOKEN = TOKEN
    samples = scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert any(name.startswith("tidemark_") for name, _ in samples)


def test_only_get_is_answered(server):
    assert Client().post("/metrics").status_code == 405


def test_requests_are_counted_by_route_name_and_unknown_paths_as_unmatched(server):
    before = scrape(Client())
    Client().get("/healthz")
    Client().get("/no/such/path/4c1d9")
    after = scrape(Client())
    health = "healthz" if server == "config.urls" else "watchdog-healthz"

    def delta(**labels):
        return value(after, "tidemark_http_requests_total", **labels) - value(
            before, "tidemark_http_requests_total", **labels
        )

    assert delta(route=health, method="GET", status="200") == 1
    assert delta(route="unmatched", method="GET", status="404") == 1
    assert value(after, "tidemark_http_request_duration_seconds_count", route=health) >= 1
    assert not any("4c1d9" in v for _, labels in after for _, v in labels)


def _settings_error(**env: str) -> str:
    """Import the settings with ``env``: the error's last line, or "" when they load."""
    result = subprocess.run(
        [sys.executable, "-c", "import config.settings.local"],
        cwd=django_settings.BASE_DIR,
        env={"PATH": "/usr/bin:/bin", "TIDEMARK_IGNORE_DOTENV": "1", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.stderr.strip().splitlines()[-1] if result.returncode else ""


def _mode(tmp_path, module: str = "local", **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", f"import config.settings.{module} as s; print(s.TIDEMARK_METRICS)"],
        cwd=django_settings.BASE_DIR,
        env={
            "PATH": "/usr/bin:/bin",
            "TIDEMARK_IGNORE_DOTENV": "1",
            "TIDEMARK_VAR_DIR": str(tmp_path),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


def test_the_default_is_open_embedded_else_token_when_a_token_is_set_else_off(tmp_path):
    configured = {"DATABASE_URL": "postgres://tidemark@db.invalid:5432/tidemark"}
    assert _mode(tmp_path) == "open"
    assert _mode(tmp_path, **configured) == "off"
    assert _mode(tmp_path, **configured, TIDEMARK_METRICS_TOKEN=TOKEN) == "token"
    assert _mode(tmp_path, **configured, TIDEMARK_METRICS="OPEN") == "open"
    # The watchdog deployed alone: its own database decides.
    alone = {"WATCHDOG_DATABASE_URL": "postgres://tidemark@wd.invalid:5432/watchdog"}
    assert _mode(tmp_path, "watchdog") == "open"
    assert _mode(tmp_path, "watchdog", **alone) == "off"
    assert _mode(tmp_path, "watchdog", **alone, TIDEMARK_METRICS_TOKEN=TOKEN) == "token"
    assert "needs TIDEMARK_METRICS_TOKEN" in _settings_error(
        TIDEMARK_VAR_DIR=str(tmp_path), TIDEMARK_METRICS="token"
    )
    assert "must be off, open or token" in _settings_error(
        TIDEMARK_VAR_DIR=str(tmp_path), TIDEMARK_METRICS="public"
    )


@pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])
def test_a_database_that_does_not_answer_leaves_the_state_out_not_the_scrape(server):
    alias, up, state = (
        ("default", "tidemark_database_up", "tidemark_late_datasets")
        if server == "config.urls"
        else ("watchdog", "tidemark_watchdog_database_up", "tidemark_watchdog_open_incidents")
    )
    with relayed(alias) as relays:
        samples = scrape(Client())
        assert value(samples, up) == 1
        assert state in names(samples)
        relays[alias].cut()
        during = scrape(Client())
        assert value(during, up) == 0
        assert state not in names(during)
        # The processes' own metrics are still there.
        scrapes = {"route": "metrics", "method": "GET", "status": "200"}
        if server == "config.urls_watchdog":
            scrapes["route"] = "watchdog-metrics"
        assert value(during, "tidemark_http_requests_total", **scrapes) >= 1
        relays[alias].restore()
        assert value(scrape(Client()), up) == 1
