"""``POST /api/v1/readiness`` is a plain Django view (the hot path): every answer, errors
included, is the API's: the same key authentication, parser, serializer, service and
problem documents as the DRF views, with ``Allow: POST, OPTIONS``."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import ApiKey, Partition
from catalog.services import publishing
from catalog.services.teams import api_key_create, api_key_revoke
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/readiness"
BODY = {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"}


@pytest.fixture
def clients(team, client_for, make_key):
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")
    SubscriptionFactory.create_batch(2, dataset=dataset)
    delegate = TeamFactory(slug="orchestrator")
    _, delegated = api_key_create(
        team=delegate, name="d", scopes=["publish"], delegated_datasets=[dataset]
    )
    expired = make_key(team, ["publish"], expires_at=timezone.now() + timedelta(seconds=1))
    ApiKey.objects.filter(team=team, expires_at__isnull=False).update(
        expires_at=timezone.now() - timedelta(days=1)
    )
    revoked_key, revoked = api_key_create(team=team, name="r", scopes=["publish"])
    api_key_revoke(key=revoked_key, now=timezone.now())
    good = make_key(team, ["publish"])

    def raw(auth: str | None) -> APIClient:
        client = APIClient()
        if auth is not None:
            client.credentials(HTTP_AUTHORIZATION=auth)
        return client

    return {
        "owner": raw(f"Bearer {good}"),
        "reader": client_for(team, scopes=["read"]),
        "stranger": client_for(TeamFactory(slug="stranger"), scopes=["publish"]),
        "anonymous": raw(None),
        "delegated": raw(f"Bearer {delegated}"),
        "expired": raw(f"Bearer {expired}"),
        "revoked": raw(f"Bearer {revoked}"),
        "lower-case scheme": raw(f"bearer {good}"),
        "double space": raw(f"Bearer  {good}"),
        "tab": raw(f"Bearer\t{good}"),
        "basic": raw("Basic dXNlcjpwYXNz"),
    }


def _post(client, body=None, **kwargs):
    kwargs.setdefault("content_type", "application/json")
    text = body if isinstance(body, str) else json.dumps(body if body is not None else BODY)
    return client.post(URL, text, **kwargs)


def test_a_new_partition_then_a_repeat(clients):
    first = _post(clients["owner"], {**BODY, "manifest": {"expected_files": 2}})
    again = _post(clients["owner"])

    assert (first.status_code, again.status_code) == (201, 200)
    assert first["Content-Type"] == "application/json"
    assert first["Allow"] == "POST, OPTIONS"
    assert first.json()["partition"] == "2026-11-28"
    assert Partition.objects.filter(key="2026-11-28").count() == 1


def test_an_idempotency_key_replays_the_first_answer(clients):
    first = _post(clients["owner"], headers={"Idempotency-Key": '"k1"'})
    replay = _post(clients["owner"], headers={"Idempotency-Key": "k1"})

    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()


@pytest.mark.parametrize(
    ("who", "send", "status", "code"),
    [
        ("anonymous", lambda c: _post(c), 401, "not_authenticated"),
        ("expired", lambda c: _post(c), 401, "authentication_failed"),
        ("revoked", lambda c: _post(c), 401, "authentication_failed"),
        ("tab", lambda c: _post(c), 401, "authentication_failed"),
        ("basic", lambda c: _post(c), 401, "authentication_failed"),
        ("reader", lambda c: _post(c), 403, "permission_denied"),
        ("stranger", lambda c: _post(c), 403, None),
        ("owner", lambda c: _post(c, "{not json"), 400, "malformed_request"),
        ("owner", lambda c: _post(c, {**BODY, "state": "done"}), 400, "validation_error"),
        ("owner", lambda c: _post(c, {**BODY, "x": 1}), 400, "validation_error"),
        ("owner", lambda c: _post(c, {**BODY, "metadata": {"x": "\u0000"}}), 400, None),
        ("owner", lambda c: _post(c, {**BODY, "name": "raw/nothing"}), 404, None),
        ("owner", lambda c: _post(c, headers={"Idempotency-Key": ""}), 400, None),
        ("owner", lambda c: _post(c, content_type="text/plain"), 415, "unsupported_media_type"),
        ("owner", lambda c: _post(c, content_type="application/*"), 415, None),
        ("owner", lambda c: _post(c, content_type="application/merge-patch+json"), 415, None),
    ],
)
def test_every_refusal_is_a_problem_document(clients, who, send, status, code):
    response = send(clients[who])

    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response["Allow"] == "POST, OPTIONS"
    problem = response.json()
    assert problem["status"] == status and problem["instance"] == URL
    if code:
        assert problem["code"] == code
    if status == 401:
        assert response["WWW-Authenticate"] == "Bearer"
    assert not Partition.objects.exists()


def test_a_415_says_what_to_send(clients):
    detail = _post(clients["owner"], content_type="application/x-www-form-urlencoded").json()
    assert "Content-Type: application/json" in detail["detail"]


@pytest.mark.parametrize(
    ("who", "kwargs"),
    [
        ("delegated", {}),
        ("lower-case scheme", {}),
        ("double space", {}),
        ("owner", {"content_type": "application/JSON"}),
        ("owner", {"content_type": "application/json; charset=utf-8"}),
        ("owner", {"HTTP_ACCEPT": "text/html;q=0.9, application/json"}),
    ],
)
def test_accepted_variants_publish(clients, who, kwargs):
    assert _post(clients[who], **kwargs).status_code == 201


def test_an_oversized_body_is_413(clients, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = _post(clients["owner"], {**BODY, "metadata": {"x": "y" * 200}})
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


@pytest.mark.parametrize("method", ["get", "head", "put", "patch", "delete"])
def test_other_methods_are_405(clients, method):
    response = getattr(clients["owner"], method)(URL)
    assert response.status_code == 405
    assert response["Allow"] == "POST, OPTIONS"


def test_options_answers_the_allowed_methods(clients):
    response = clients["anonymous"].options(URL)
    assert response.status_code == 200
    assert response["Allow"] == "POST, OPTIONS"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (RuntimeError("a bug"), 500, "server_error"),
        # A connection that died within the health-check delay: the database is away.
        (OperationalError("server closed the connection unexpectedly"), 503, None),
    ],
)
def test_an_error_that_is_not_a_problem_is_rendered_by_the_api_handler(
    clients, monkeypatch, error, status, code
):
    def boom(**kwargs):
        raise error

    monkeypatch.setattr(publishing, "readiness_publish", boom)
    clients["owner"].raise_request_exception = False
    response = _post(clients["owner"])

    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    assert str(error) not in response.content.decode()
    if code:
        assert response.json()["code"] == code
    else:
        assert response.json()["code"] == "database_unavailable"
        assert int(response["Retry-After"]) > 0
