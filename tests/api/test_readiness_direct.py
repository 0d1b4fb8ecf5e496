"""``POST /api/v1/readiness`` served without DRF (``_publish_directly``) answers exactly
what the DRF view answers, and leaves to DRF every request that is not plainly valid."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import OperationalError, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from api.views import catalog as views
from catalog import services
from catalog.models import ApiKey, Dataset, Partition
from catalog.services import api_key_create, api_key_revoke
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/readiness"
BODY = {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"}
HEADERS = ("Content-Type", "Allow", "Vary", "Idempotent-Replayed", "WWW-Authenticate")


@pytest.fixture
def world(team, client_for):
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")
    SubscriptionFactory.create_batch(2, dataset=dataset)
    return {
        "owner": client_for(team, scopes=["publish"]),
        "reader": client_for(team, scopes=["read"]),
        "stranger": client_for(TeamFactory(slug="stranger"), scopes=["publish"]),
        "anonymous": APIClient(),
    }


@pytest.fixture
def ways(monkeypatch):
    """``ways(send) -> {"direct": answer, "drf": answer}``: ``send()`` run once each way,
    each rolled back after, with ``answer = (status, headers, body, served directly)``."""
    direct = views._publish_directly
    served = []

    def spy(request):
        response = direct(request)
        served.append(response is not None)
        return response

    def run(send, way):
        monkeypatch.setattr(views, "_publish_directly", spy if way == "direct" else lambda r: None)
        served.clear()
        with (
            time_machine.travel(datetime(2026, 11, 29, 7, tzinfo=UTC), tick=False),
            transaction.atomic(),
        ):
            response = send()
            transaction.set_rollback(True)
        body = json.loads(response.content)
        body.pop("event_id", None)  # ids are drawn from sequences that rollback keeps
        headers = {name: response.get(name) for name in HEADERS}
        return response.status_code, headers, body, any(served)

    return lambda send: {way: run(send, way) for way in ("direct", "drf")}


def _post(client, body=None, **kwargs):
    kwargs.setdefault("content_type", "application/json")
    payload = json.dumps(body if body is not None else BODY)
    return client.post(URL, payload, **kwargs)


def _same(answers, status, *, directly):
    direct, drf = answers["direct"], answers["drf"]
    assert direct[:3] == drf[:3]
    assert direct[0] == status, direct
    assert direct[3] is directly, "served by the wrong way"
    assert drf[3] is False


def test_a_new_partition(world, ways):
    body = {**BODY, "manifest": {"expected_files": 2, "row_count": 9}, "metadata": {"é": "ü"}}
    _same(ways(lambda: _post(world["owner"], body)), 201, directly=True)


def test_a_repeat_is_a_no_op(world, ways):
    def send():
        _post(world["owner"])
        return _post(world["owner"])

    _same(ways(send), 200, directly=True)


def test_a_restatement_and_a_failed_version(world, ways):
    _same(ways(lambda: _post(world["owner"], {**BODY, "state": "failed"})), 201, directly=True)

    def restate():
        _post(world["owner"])
        return _post(world["owner"], {**BODY, "version": "v2"})

    _same(ways(restate), 201, directly=True)


def test_an_idempotency_key_replay_and_reuse(world, ways):
    def replay():
        _post(world["owner"], headers={"Idempotency-Key": "k1"})
        return _post(world["owner"], headers={"Idempotency-Key": "k1"})

    answers = ways(replay)
    _same(answers, 201, directly=True)
    assert answers["direct"][1]["Idempotent-Replayed"] == "true"

    def reuse():
        _post(world["owner"], headers={"Idempotency-Key": "k1"})
        return _post(world["owner"], {**BODY, "version": "v9"}, headers={"Idempotency-Key": "k1"})

    _same(ways(reuse), 422, directly=True)


@pytest.mark.parametrize(
    ("who", "body", "status"),
    [
        ("owner", {**BODY, "name": "raw/nothing"}, 404),
        ("owner", {**BODY, "partition": "2026-11"}, 400),
        ("owner", {**BODY, "partition": 20261128}, 400),  # the serializer makes it a string
        ("stranger", BODY, 403),
        ("owner", {**BODY, "metadata": {"schema": {"fields": [{"name": 1}]}}}, 400),
    ],
)
def test_errors_of_the_publish_itself_are_rendered_directly(world, ways, who, body, status):
    _same(ways(lambda: _post(world[who], body)), status, directly=True)


@pytest.mark.parametrize(
    ("who", "send", "status"),
    [
        ("anonymous", lambda c: _post(c), 401),
        ("reader", lambda c: _post(c), 403),
        ("owner", lambda c: c.post(URL, "{not json", content_type="application/json"), 400),
        ("owner", lambda c: c.post(URL, json.dumps(BODY), content_type="text/plain"), 415),
        ("owner", lambda c: _post(c, {**BODY, "state": "done"}), 400),
        ("owner", lambda c: _post(c, {**BODY, "metadata": {"x": "\u0000"}}), 400),
        ("owner", lambda c: _post(c, HTTP_ACCEPT="text/html"), 406),
        ("owner", lambda c: _post(c, headers={"Idempotency-Key": ""}), 400),
        ("owner", lambda c: _post(c, {**BODY, "x": 1}), 400),
    ],
)
def test_anything_not_plainly_valid_is_left_to_drf(world, ways, who, send, status):
    _same(ways(lambda: send(world[who])), status, directly=False)


def test_a_json_accept_header_or_charset_is_still_served_directly(world, ways):
    _same(
        ways(
            lambda: _post(
                world["owner"],
                content_type="application/json; charset=utf-8",
                HTTP_ACCEPT="text/html;q=0.9, application/json",
            )
        ),
        201,
        directly=True,
    )


def test_an_oversized_body_is_left_to_drf(world, ways, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    _same(
        ways(lambda: _post(world["owner"], {**BODY, "metadata": {"x": "y" * 200}})),
        413,
        directly=False,
    )


# --- the exact bytes, both ways ------------------------------------------------------

RAW_HEADERS = (
    "Content-Type",
    "Allow",
    "Vary",
    "Idempotent-Replayed",
    "WWW-Authenticate",
    "Retry-After",
)


@pytest.fixture
def raw_ways(monkeypatch):
    """Like ``ways`` but keeps the raw bytes of the body (not re-parsed JSON)."""

    direct = views._publish_directly

    def run(send, way):
        monkeypatch.setattr(
            views, "_publish_directly", direct if way == "direct" else (lambda r: None)
        )
        with (
            time_machine.travel(datetime(2026, 11, 29, 7, tzinfo=UTC), tick=False),
            transaction.atomic(),
        ):
            response = send()
            created = Partition.objects.filter(key=BODY["partition"]).exists()
            transaction.set_rollback(True)
        body = re.sub(rb'("event_id": ?)\d+', rb"\1ID", response.content)
        headers = {name: response.get(name) for name in RAW_HEADERS}
        return response.status_code, headers, body, created

    return lambda send: {way: run(send, way) for way in ("direct", "drf")}


def test_a_format_query_parameter_is_left_to_drf(world, raw_ways):
    """DRF's content negotiation honours ``?format=``: a format no renderer has is a 404
    and nothing is published."""
    answers = raw_ways(
        lambda: world["owner"].post(
            URL + "?format=xml", json.dumps(BODY), content_type="application/json"
        )
    )
    drf, direct = answers["drf"], answers["direct"]
    assert drf[0] == 404 and drf[3] is False  # DRF refuses, writes nothing
    assert direct[:4] == drf[:4], (direct, drf)


def test_an_accept_header_asking_for_indented_json_is_left_to_drf(world, raw_ways):
    """DRF's JSONRenderer honours ``Accept: application/json; indent=4``."""
    answers = raw_ways(lambda: _post(world["owner"], HTTP_ACCEPT="application/json; indent=4"))
    drf, direct = answers["drf"], answers["direct"]
    assert drf[0] == direct[0] == 201
    assert b"\n    " in drf[2]  # DRF indents
    assert direct[2] == drf[2]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (RuntimeError("a bug"), 500),
        # A connection that died within the health-check delay: the database is away.
        (OperationalError("server closed the connection unexpectedly"), 503),
    ],
)
def test_an_error_that_is_not_a_problem_is_rendered_as_drf_renders_it(
    world, raw_ways, monkeypatch, error, status
):
    """An error that is not a problem is answered as DRF's exception handler answers it:
    a 500 problem document, or a 503 with Retry-After for a database outage, compact,
    with Allow."""

    def boom(**kwargs):
        raise error

    monkeypatch.setattr(services, "readiness_publish", boom)
    world["owner"].raise_request_exception = False
    answers = raw_ways(lambda: _post(world["owner"]))
    drf, direct = answers["drf"], answers["direct"]
    assert drf[0] == direct[0] == status
    assert (direct[1], direct[2]) == (drf[1], drf[2])


@pytest.fixture
def more(world, team, client_for, make_key):

    dataset = Dataset.objects.get(namespace="s3://lake", name="raw/orders")
    delegate_team = TeamFactory(slug="orchestrator")
    _, token = api_key_create(
        team=delegate_team, name="d", scopes=["publish"], delegated_datasets=[dataset]
    )
    expired = make_key(team, ["publish"], expires_at=timezone.now() + timedelta(seconds=1))
    ApiKey.objects.filter(team=team, expires_at__isnull=False).update(
        expires_at=timezone.now() - timedelta(days=1)
    )
    rkey, revoked = api_key_create(team=team, name="r", scopes=["publish"])
    api_key_revoke(key=rkey, now=timezone.now())
    good = make_key(team, ["publish"])

    def raw(auth):
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=auth)
        return c

    return {
        "delegated": raw(f"Bearer {token}"),
        "expired": raw(f"Bearer {expired}"),
        "revoked": raw(f"Bearer {revoked}"),
        "double-space": raw(f"Bearer  {good}"),
        "lower": raw(f"bearer {good}"),
        "tab": raw(f"Bearer\t{good}"),
        "basic": raw("Basic dXNlcjpwYXNz"),
        "owner": world["owner"],
    }


@pytest.mark.parametrize(
    ("who", "kwargs"),
    [
        ("delegated", {}),
        ("expired", {}),
        ("revoked", {}),
        ("double-space", {}),
        ("lower", {}),
        ("tab", {}),
        ("basic", {}),
        ("owner", {"content_type": "application/JSON"}),
        ("owner", {"content_type": "application/json;charset=latin-1"}),
        ("owner", {"content_type": "application/merge-patch+json"}),
        ("owner", {"content_type": "application/*"}),
        ("owner", {"HTTP_ACCEPT": "application/json;q=0"}),
        ("owner", {"HTTP_ACCEPT": "*/*;q=0.1,text/html"}),
        ("owner", {"HTTP_ACCEPT": "*/json"}),
        ("owner", {"HTTP_ACCEPT": " "}),
        ("owner", {"headers": {"Idempotency-Key": '"quoted"'}}),
        ("owner", {"headers": {"Idempotency-Key": '"'}}),
    ],
)
def test_keys_headers_and_media_types_get_the_same_answer_both_ways(more, raw_ways, who, kwargs):
    answers = raw_ways(lambda: _post(more[who], **kwargs))
    assert answers["direct"] == answers["drf"]
    if who in ("delegated", "double-space", "lower"):
        assert answers["direct"][0] == 201


@pytest.mark.parametrize(
    "text",
    [
        '{"namespace":"s3://lake","name":"raw/orders","partition":"2026-11-28","partition":"x"}',
        '{"namespace":"s3://lake","name":"raw/orders","partition":"2026-11-28",'
        '"manifest":{"expected_files":1,"row_count":1' + "0" * 40 + "}}",
        '{"namespace":"s3://lake","name":"raw/orders","partition":"2026-11-28",'
        '"metadata":' + '{"a":' * 60 + "1" + "}" * 60 + "}",
        '{"namespace":"s3://lake","name":"raw/orders","partition":"2026-11-28",'
        '"metadata":{"n":1e308}}',
        '{"namespace":"S3://LAKE/","name":"raw/orders","partition":"2026-11-28"}',
        '{"namespace":"s3://lake","name":"raw/orders","partition":"2026-11-28","version":null}',
    ],
)
def test_odd_bodies_get_the_same_answer_both_ways(world, raw_ways, text):
    answers = raw_ways(lambda: world["owner"].post(URL, text, content_type="application/json"))
    assert answers["direct"] == answers["drf"]


@pytest.mark.parametrize("method", ["get", "head", "options", "put", "patch", "delete"])
def test_other_methods_are_left_to_drf(world, raw_ways, method):
    answers = raw_ways(
        lambda: (
            getattr(world["owner"], method)(URL)
            if method in ("get", "head")
            else getattr(world["owner"], method)(
                URL, json.dumps(BODY), content_type="application/json"
            )
        )
    )
    assert answers["direct"] == answers["drf"]
    assert answers["direct"][0] in (200, 405)


def test_a_trailing_slash_gets_the_same_answer_both_ways(world, raw_ways):
    answers = raw_ways(
        lambda: world["owner"].post(URL + "/", json.dumps(BODY), content_type="application/json")
    )
    assert answers["direct"] == answers["drf"]
