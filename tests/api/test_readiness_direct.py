"""``POST /api/v1/readiness`` served without DRF (``_publish_directly``) answers exactly
what the DRF view answers, and leaves to DRF every request that is not plainly valid."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import time_machine
from django.db import transaction
from rest_framework.test import APIClient

from api.views import catalog as views
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
