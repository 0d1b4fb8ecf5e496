"""A database that is down or failing over is a 503 ``database_unavailable`` with
``Retry-After`` on every surface (the catalog's API, publish, pages and badge; the
watchdog's pings, API and on-call pages), logged as one line per outage, and served again
as soon as it is back, without a restart.

The outage is real: each test's connections go through a TCP relay in front of the
suite's PostgreSQL (``tests.db_relay``), which the test cuts (open connections dropped,
new ones refused) and restores. A failover to a read-only server is a real
``default_transaction_read_only`` session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Partition
from httpkit import outage
from tests.catalog.factories import DatasetFactory
from tests.db_relay import relayed
from tests.watchdog.conftest import OPERATOR_PASSWORD
from watchdog import monitors, operators, tokens
from watchdog.oncall import COOKIE

# Transactional: the relay closes and reopens the test's connections.
both_databases = pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])
both_servers = pytest.mark.urls("tests.urls_catalog_and_watchdog")

HTML = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"  # what a browser sends


@pytest.fixture(autouse=True)
def quiet_log_state(monkeypatch):
    """Each test starts with no outage logged yet in this process."""
    monkeypatch.setattr(outage, "_logged_at", {})
    monkeypatch.setattr(outage, "_unlogged", {})


@dataclass
class World:
    api: APIClient  # the orders team's API key
    person: Client  # signed in to the catalog's pages
    watchdog_api: APIClient  # a watchdog API token
    operator: Client  # signed in to the on-call pages
    badge_url: str
    ping_url: str


@pytest.fixture
def world(team, client_for, django_user_model) -> World:
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")
    person = Client()
    person.force_login(django_user_model.objects.create_user("ada", password="x" * 12))
    monitor = monitors.monitor_create(now=timezone.now(), name="nightly", period_seconds=3600)
    _, token = tokens.create("outage test")
    watchdog_api = APIClient()
    watchdog_api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    operators.operator_create(
        username="olga", password=OPERATOR_PASSWORD, labels=[], all_labels=True
    )
    operator = Client()
    operator.cookies[COOKIE] = operators.sign_in(
        username="olga", password=OPERATOR_PASSWORD, remote_addr="127.0.0.1", now=timezone.now()
    ).key
    return World(
        api=client_for(team),
        person=person,
        watchdog_api=watchdog_api,
        operator=operator,
        badge_url=f"/badge/{dataset.badge_token}.svg",
        ping_url=f"/ping/{monitor.ping_key}",
    )


def _publish(world: World):
    return world.api.post(
        "/api/v1/readiness",
        {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"},
        format="json",
    )


# (alias whose database goes away, the request, what a client gets: problem or html)
SURFACES: dict[str, tuple[str, Callable[[World], object], str]] = {
    "catalog API read": ("default", lambda w: w.api.get("/api/v1/datasets"), "problem"),
    "catalog publish": ("default", _publish, "problem"),
    "catalog page": ("default", lambda w: w.person.get("/", HTTP_ACCEPT=HTML), "html"),
    "catalog 404 page": ("default", lambda w: w.person.get("/nowhere/", HTTP_ACCEPT=HTML), "html"),
    "badge": ("default", lambda w: Client().get(w.badge_url), "problem"),
    "watchdog ping": (
        "watchdog",
        lambda w: Client().post(w.ping_url, b"ok", "text/plain"),
        "problem",
    ),
    "watchdog API": ("watchdog", lambda w: w.watchdog_api.get("/api/v1/monitors"), "problem"),
    "on-call page": ("watchdog", lambda w: w.operator.get("/oncall/", HTTP_ACCEPT=HTML), "html"),
}


def _assert_unavailable(response, kind: str) -> None:
    assert response.status_code == 503, response.content[:500]
    assert response["Retry-After"] == str(outage.RETRY_AFTER_SECONDS)
    if kind == "html":
        assert response["Content-Type"].startswith("text/html")
        assert "Temporarily unavailable" in response.content.decode()
    else:
        assert response["Content-Type"] == "application/problem+json"
        body = response.json()
        assert (body["status"], body["code"]) == (503, "database_unavailable")
        assert body["type"] == "/problems/database-unavailable"


@both_databases
@both_servers
@pytest.mark.parametrize("surface", SURFACES)
def test_an_outage_is_a_503_logged_once_and_served_again_when_the_database_is_back(
    surface, world, caplog
):
    alias, request, kind = SURFACES[surface]
    with relayed(alias) as relays:
        relay = relays[alias]
        before = request(world)
        assert before.status_code < 400 or surface == "catalog 404 page", before.content[:300]

        relay.cut()
        caplog.clear()
        with caplog.at_level(logging.INFO):
            during = [request(world) for _ in range(3)]
        for response in during:
            _assert_unavailable(response, kind)
        lines = [r for r in caplog.records if r.name == "httpkit.outage"]
        assert len(lines) == 1, [r.getMessage() for r in caplog.records]
        assert lines[0].levelno == logging.WARNING
        assert lines[0].getMessage().startswith("database unavailable, answering 503: ")
        assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
        assert not [r for r in caplog.records if r.name == "django.request"]

        relay.restore()
        after = request(world)
        assert after.status_code // 100 == before.status_code // 100, after.content[:300]


@both_databases
@both_servers
def test_a_long_outage_is_logged_again_after_the_interval_with_the_requests_in_between(
    world, caplog, monkeypatch
):
    now = [1000.0]
    monkeypatch.setattr(outage, "_clock", lambda: now[0])
    with relayed("default") as relays:
        relays["default"].cut()
        with caplog.at_level(logging.WARNING, logger="httpkit.outage"):
            for _ in range(4):
                assert world.api.get("/api/v1/datasets").status_code == 503
            now[0] += outage.LOG_EVERY_SECONDS - 0.1
            assert world.api.get("/api/v1/datasets").status_code == 503
            now[0] += 0.1
            assert world.api.get("/api/v1/datasets").status_code == 503
    lines = [r.getMessage() for r in caplog.records if r.name == "httpkit.outage"]
    assert len(lines) == 2, lines
    assert lines[1].endswith("(4 more answered 503 since the last line)")


@both_databases
@both_servers
def test_a_failover_to_a_read_only_server_is_a_503_and_the_next_publish_reconnects(world, caplog):
    """A connection left on a primary that a failover demoted still answers Django's
    health check; it is closed on the refusal, so the next request reaches the new
    primary (here: a new session, without the read-only setting)."""
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION default_transaction_read_only = on")
    with caplog.at_level(logging.WARNING, logger="httpkit.outage"):
        refused = _publish(world)
    _assert_unavailable(refused, "problem")
    assert "[25006]" in caplog.records[-1].getMessage()
    assert connection.connection is None  # closed, not kept for the next request
    published = _publish(world)
    assert published.status_code == 201, published.content
    assert Partition.objects.filter(key="2026-11-28").exists()


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param("IntegrityError", id="integrity"),
        pytest.param("DataError", id="data"),
        pytest.param("ProgrammingError", id="programming"),
    ],
)
def test_other_database_errors_are_not_an_outage(exc):
    from django import db

    assert not outage.is_database_unavailable(getattr(db, exc)("x"))
    assert outage.is_database_unavailable(db.OperationalError("x"))
    assert outage.is_database_unavailable(db.InterfaceError("x"))


@both_databases
@both_servers
def test_readyz_says_unavailable_with_retry_after_while_the_database_is_down(world):
    with relayed("default") as relays:
        assert Client().get("/readyz").status_code == 200
        relays["default"].cut()
        response = Client().get("/readyz")
        assert response.status_code == 503
        assert response["Retry-After"] == str(outage.RETRY_AFTER_SECONDS)
        assert response.json()["checks"]["database"].startswith("unreachable: ")
        relays["default"].restore()
        assert Client().get("/readyz").status_code == 200
