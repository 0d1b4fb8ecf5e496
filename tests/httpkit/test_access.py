"""The access line and the request id, on real requests through the configured middleware,
rendered by the real JSON formatter (``httpkit.logs``) into a buffer."""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections.abc import Iterator

import pytest
import structlog
from django.test import override_settings

from httpkit.access import accepted_request_id, new_request_id
from httpkit.logs import formatter
from httpkit.logsafe import RedactPingSecrets
from tests.catalog.factories import DatasetFactory

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

HEX32 = re.compile(r"[0-9a-f]{32}")
KEY = "6f9619ff-8b86-d011-b42d-00cf4fc964ff"


@pytest.fixture
def json_log() -> Iterator[callable]:
    """``json_log() -> list[dict]``: every record logged since, rendered as the JSON
    format renders it (one object per line) through the ping-secret filter."""
    spec = formatter("json")
    factory = spec.pop("()")
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(factory(**spec))
    handler.addFilter(RedactPingSecrets())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def _access_lines(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line["logger"] == "tidemark.access"]


def test_a_sane_request_id_makes_the_round_trip(client, json_log):
    response = client.get("/healthz", headers={"X-Request-ID": "edge-7f3a.b2:9"})
    assert response.status_code == 200
    assert response["X-Request-ID"] == "edge-7f3a.b2:9"
    [line] = _access_lines(json_log())
    assert line["request_id"] == "edge-7f3a.b2:9"


@pytest.mark.parametrize(
    "sent",
    ["", " ", "a" * 129, "has space", 'quo"te', "new\nline", "-leading-dash", "é"],
)
def test_an_unsafe_request_id_is_replaced_by_a_new_one(client, json_log, sent):
    response = client.get("/healthz", headers={"X-Request-ID": sent})
    assert HEX32.fullmatch(response["X-Request-ID"]), response["X-Request-ID"]
    [line] = _access_lines(json_log())
    assert line["request_id"] == response["X-Request-ID"]


def test_without_a_request_id_each_request_gets_its_own(client):
    first = client.get("/healthz")["X-Request-ID"]
    second = client.get("/healthz")["X-Request-ID"]
    assert HEX32.fullmatch(first) and HEX32.fullmatch(second) and first != second


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/v1/datasets", 401),  # no API key: a problem document
        ("/api/v1/no-such-thing", 404),
        ("/api/v1/datasets?name=a%00b", 400),  # refused by a middleware before any view
    ],
)
def test_problems_and_errors_carry_the_request_id(client, json_log, path, status):
    response = client.get(path, headers={"X-Request-ID": "r-1"})
    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    assert response["X-Request-ID"] == "r-1"
    [line] = _access_lines(json_log())
    assert (line["status"], line["request_id"]) == (status, "r-1")


def test_a_500_carries_the_request_id_and_every_line_of_the_request_does(client, json_log):
    client.raise_request_exception = False
    with override_settings(ROOT_URLCONF="tests.httpkit.urls_failing"):
        response = client.get("/fail", headers={"X-Request-ID": "r-500"})
    assert response.status_code == 500
    assert response["X-Request-ID"] == "r-500"
    lines = json_log()
    django_error = next(line for line in lines if line["logger"] == "django.request")
    assert django_error["request_id"] == "r-500"
    assert "ZeroDivisionError" in django_error["exception"]
    [access] = _access_lines(lines)
    assert (access["status"], access["route"]) == (500, "fail")
    assert structlog.contextvars.get_contextvars() == {}  # nothing left for the next one


def test_the_access_line_names_the_route_team_status_and_duration(client_for, team, json_log):
    dataset = DatasetFactory(owner=team)
    response = client_for(team).get(f"/api/v1/datasets/{dataset.pk}")
    assert response.status_code == 200, response.content
    [line] = _access_lines(json_log())
    assert line["event"] == "request"
    assert line["method"] == "GET"
    assert line["route"] == "api/v1/datasets/<int:dataset_id>"  # the pattern, not the path
    assert "path" not in line
    assert line["status"] == 200
    assert line["team"] == "orders"
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    assert line["request_id"] == response["X-Request-ID"]
    assert line["level"] == "info" and line["timestamp"].endswith("Z")


def test_an_unmatched_path_is_logged_redacted_and_without_a_team(client, json_log):
    response = client.get(f"/nowhere/ping/{KEY}")
    assert response.status_code == 404
    lines = json_log()
    [line] = _access_lines(lines)
    assert "route" not in line and "team" not in line
    assert line["path"] == "/nowhere/ping/6f9619ff…"
    assert KEY not in json.dumps(lines)
    # Django logs the 404 after the middleware returned: the line still has the id.
    django_line = next(line for line in lines if line["logger"] == "django.request")
    assert django_line["request_id"] == response["X-Request-ID"]
    assert structlog.contextvars.get_contextvars() == {}  # cleared once the response closed


def test_the_watchdog_server_logs_and_answers_the_request_id_too(client, json_log):
    from config.settings import watchdog as watchdog_settings

    assert watchdog_settings.MIDDLEWARE[0] == "httpkit.access.AccessLogMiddleware"
    with override_settings(
        ROOT_URLCONF="config.urls_watchdog", MIDDLEWARE=watchdog_settings.MIDDLEWARE
    ):
        response = client.post(f"/ping/{KEY}", headers={"X-Request-ID": "wd-1"})
    assert response.status_code == 404  # no such monitor
    assert response["X-Request-ID"] == "wd-1"
    lines = json_log()
    [line] = _access_lines(lines)
    assert (line["route"], line["status"], line["request_id"]) == ("ping/<uuid:key>", 404, "wd-1")
    assert KEY not in json.dumps(lines)  # Django's "Not Found: /ping/..." is redacted too


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("abc", True),
        (uuid.uuid4().hex, True),
        (str(uuid.uuid4()), True),
        ("Zm9vYmFy+/==", True),
        ("a" * 128, True),
        ("a" * 129, False),
        (None, False),
        ("", False),
        ("a b", False),
        ("a\tb", False),
        ("a,b", False),
        ("_a", False),
    ],
)
def test_accepted_request_id(value, accepted):
    assert accepted_request_id(value) == (value if accepted else None)


def test_new_request_ids_are_uuid4_hex():
    value = new_request_id()
    assert HEX32.fullmatch(value) and uuid.UUID(value).version == 4
