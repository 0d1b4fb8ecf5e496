"""The client's retries and errors against a stub server on loopback (pytest-httpserver):
429 and 503 are retried as ``Retry-After`` says (seconds or an HTTP-date, bounded), a
publish keeps its ``Idempotency-Key`` across retries, and problem documents become
``ProblemError`` with their type, title, detail and field. No database."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from tidemark_client import Client, ProblemError, RetryPolicy, TransportError
from tidemark_client.cli import EXIT_OK, EXIT_TIMEOUT
from tidemark_client.retries import retry_after_seconds
from werkzeug import Response

from .conftest import run_cli

PROBLEM = "application/problem+json"
PUBLISHED = {"partition": "2026-11-28", "state": "ready", "version": None}


def _problem(status: int, code: str, *, retry_after: str | None = None, **extra) -> Response:
    body = {"type": f"/problems/{code.replace('_', '-')}", "title": code, "status": status}
    body.update(code=code, **extra)
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Response(json.dumps(body), status=status, headers=headers, content_type=PROBLEM)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(httpserver, sleeps):
    with Client(httpserver.url_for("/"), "tm_test", sleep=sleeps.append) as client:
        yield client


def test_a_publish_waits_as_retry_after_says_and_keeps_its_idempotency_key(
    httpserver, client, sleeps
):
    for answer in (
        _problem(429, "throttled", retry_after="2"),
        _problem(503, "service_unavailable", retry_after="1"),
        Response(json.dumps(PUBLISHED), status=201, content_type="application/json"),
    ):
        httpserver.expect_ordered_request("/api/v1/readiness", method="POST").respond_with_response(
            answer
        )

    result = client.publish("s3://lake", "raw/orders", "2026-11-28")

    assert (result.state, result.status_code) == ("ready", 201)
    assert sleeps == [2.0, 1.0]
    keys = {request.headers["Idempotency-Key"] for request, _ in httpserver.log}
    assert keys == {result.idempotency_key} and len(httpserver.log) == 3
    assert {request.headers["Authorization"] for request, _ in httpserver.log} == {"Bearer tm_test"}
    assert json.loads(httpserver.log[0][0].data)["state"] == "ready"


def test_an_http_date_retry_after_is_waited_until(httpserver, client, sleeps):
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    httpserver.expect_ordered_request("/api/v1/me").respond_with_response(
        _problem(503, "service_unavailable", retry_after=later)
    )
    httpserver.expect_ordered_request("/api/v1/me").respond_with_json({"team": {"slug": "x"}})

    assert client.me() == {"team": {"slug": "x"}}
    [wait] = sleeps
    assert 27 <= wait <= 30


def test_a_retry_after_over_the_bound_is_not_waited_for(httpserver, client, sleeps):
    httpserver.expect_request("/api/v1/me").respond_with_response(
        _problem(429, "throttled", retry_after="3600", detail="slow down")
    )

    with pytest.raises(ProblemError) as raised:
        client.me()

    assert (raised.value.status, raised.value.retry_after) == (429, 3600.0)
    assert sleeps == [] and len(httpserver.log) == 1


def test_retries_end_after_the_policy_s_attempts(httpserver, sleeps):
    httpserver.expect_request("/api/v1/me").respond_with_response(
        _problem(503, "service_unavailable")  # no Retry-After: exponential backoff
    )
    policy = RetryPolicy(attempts=3, backoff_base=0.5, backoff_cap=0.75)

    client = Client(httpserver.url_for("/"), "k", retry=policy, sleep=sleeps.append)
    with client, pytest.raises(ProblemError) as raised:
        client.me()

    assert raised.value.code == "service_unavailable" and len(httpserver.log) == 3
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.5 and 0 <= sleeps[1] <= 0.75


def test_a_502_is_retried_for_a_get_and_a_keyed_publish_but_not_an_unkeyed_one(
    httpserver, client, sleeps
):
    httpserver.expect_request("/api/v1/me").respond_with_data("bad gateway", status=502)
    httpserver.expect_request("/api/v1/readiness").respond_with_data("bad gateway", status=502)

    with pytest.raises(ProblemError):
        client.me()
    assert len(httpserver.log) == 5
    with pytest.raises(ProblemError):
        client.publish("s3://lake", "raw/orders", "2026-11-28")
    assert len(httpserver.log) == 10
    with pytest.raises(ProblemError) as raised:
        client.publish("s3://lake", "raw/orders", "2026-11-28", use_idempotency_key=False)
    assert len(httpserver.log) == 11
    assert (raised.value.code, raised.value.detail) == ("http_502", "bad gateway")


def test_a_problem_document_becomes_a_problem_error(httpserver, client):
    httpserver.expect_request("/api/v1/readiness").respond_with_response(
        _problem(
            400,
            "validation_error",
            detail="partition: '28.11.2026' is not a daily key",
            errors=[{"field": "partition", "rule": "format", "detail": "use YYYY-MM-DD"}],
            expected_format="YYYY-MM-DD",
        )
    )

    with pytest.raises(ProblemError) as raised:
        client.publish("s3://lake", "raw/orders", "28.11.2026")

    problem = raised.value
    assert (problem.status, problem.type, problem.title) == (
        400,
        "/problems/validation-error",
        "validation_error",
    )
    assert (problem.detail, problem.field) == (
        "partition: '28.11.2026' is not a daily key",
        "partition",
    )
    assert problem.errors[0].rule == "format"
    assert problem.document["expected_format"] == "YYYY-MM-DD"


def test_no_answer_is_a_transport_error(sleeps):
    client = Client("http://127.0.0.1:9", "k", retry=RetryPolicy(attempts=2), sleep=sleeps.append)
    with client, pytest.raises(TransportError):
        client.me()
    assert len(sleeps) == 1


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("0", 0.0), ("17", 17.0), (" 5 ", 5.0), ("soon", None), (None, None), ("-3", None)],
)
def test_retry_after_seconds(header, seconds):
    assert retry_after_seconds(header) == seconds


def test_retry_after_seconds_of_a_past_date_is_zero():
    past = format_datetime(datetime(2020, 1, 1, tzinfo=UTC), usegmt=True)
    assert retry_after_seconds(past) == 0.0


# --- the command line, really waiting --------------------------------------------------


def _env(httpserver) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "TIDEMARK_URL": httpserver.url_for("/"),
        "TIDEMARK_API_KEY": "tm_test",
    }


def test_the_cli_waits_out_a_429_before_publishing(httpserver):
    path = "/api/v1/readiness"
    httpserver.expect_ordered_request(path).respond_with_response(
        _problem(429, "throttled", retry_after="1")
    )
    httpserver.expect_ordered_request(path).respond_with_json(PUBLISHED, status=201)

    started = time.monotonic()
    done = run_cli("publish", "s3://lake/raw/orders", "2026-11-28", env=_env(httpserver))

    assert (done.returncode, done.stderr) == (EXIT_OK, ""), done.stderr
    assert [r.headers["Idempotency-Key"] for r, _ in httpserver.log].count(
        httpserver.log[0][0].headers["Idempotency-Key"]
    ) == 2
    second = httpserver.log[1][0]
    assert json.loads(second.data)["name"] == "raw/orders"
    assert time.monotonic() - started >= 1.0


def test_wait_rides_out_a_503_from_the_catalog(httpserver):
    dataset = {"id": 7, "namespace": "s3://lake", "name": "raw/orders"}
    httpserver.expect_request("/api/v1/datasets").respond_with_json(
        {"next": None, "previous": None, "results": [dataset]}
    )
    partition = "/api/v1/datasets/7/partitions/2026-11-28"
    # Past the client's own retries (5 attempts), the outage goes on: wait keeps polling.
    for _ in range(6):
        httpserver.expect_oneshot_request(partition).respond_with_response(
            _problem(503, "service_unavailable", retry_after="0")
        )
    httpserver.expect_oneshot_request(partition).respond_with_json(
        {"key": "2026-11-28", "state": "ready", "current_revision": {"version": "v1"}}
    )

    done = run_cli(
        "wait", "s3://lake/raw/orders", "2026-11-28", "--interval", "0.1", env=_env(httpserver)
    )

    assert done.returncode == EXIT_OK, done.stderr
    assert done.stdout == "2026-11-28: ready version v1\n"
    assert "error: 503 service_unavailable" in done.stderr


def test_wait_times_out_through_an_outage(httpserver):
    httpserver.expect_request("/api/v1/datasets/7").respond_with_json(
        {"id": 7, "namespace": "s3://lake", "name": "raw/orders"}
    )
    httpserver.expect_request("/api/v1/datasets/7/partitions/2026-11-28").respond_with_response(
        _problem(503, "service_unavailable", retry_after="0")
    )

    done = run_cli("wait", "7", "2026-11-28", "--timeout", "0.5", env=_env(httpserver))

    assert done.returncode == EXIT_TIMEOUT
    assert "(last state: None)" in done.stderr
