import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from catalog.models import ApiKey
from catalog.services import teams
from catalog.services.teams import api_key_authenticate, api_key_revoke

pytestmark = pytest.mark.django_db


def _problem(response, status):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status
    return body


def test_unauthenticated_request_is_401_problem(api_client):
    body = _problem(api_client.get("/api/v1/datasets"), 401)
    assert body["code"] == "not_authenticated"


def test_unknown_key_is_401_with_bearer_challenge(api_client):
    api_client.credentials(HTTP_AUTHORIZATION="Bearer tm_000000000000_nope")
    response = api_client.get("/api/v1/datasets")
    assert _problem(response, 401)["code"] == "authentication_failed"
    assert response["WWW-Authenticate"] == "Bearer"


def test_wrong_scheme_is_401(api_client, team, make_key):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {make_key(team)}")
    _problem(api_client.get("/api/v1/datasets"), 401)


def test_wrong_secret_for_known_public_id_is_401(api_client, team, make_key):
    token = make_key(team)
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token[:-2]}xx")
    _problem(api_client.get("/api/v1/datasets"), 401)


def test_revoked_key_is_401(api_client, team, make_key):
    token = make_key(team)
    api_key_revoke(key=ApiKey.objects.get(team=team), now=timezone.now())
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    _problem(api_client.get("/api/v1/datasets"), 401)


def test_expired_key_is_401(api_client, team, make_key):
    token = make_key(team, expires_at=timezone.now() - timedelta(seconds=1))
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    _problem(api_client.get("/api/v1/datasets"), 401)


def test_key_stores_only_a_digest(team, make_key):
    token = make_key(team)
    key = ApiKey.objects.get(team=team)
    assert token.split("_", 2)[2] not in (key.digest, key.public_id)
    assert len(key.digest) == 64


def test_read_key_cannot_publish(client_for, team):
    client = client_for(team, scopes=["read"])
    body = _problem(
        client.post(
            "/api/v1/readiness",
            {"namespace": "s3://b", "name": "x", "partition": "2026-11-28"},
            format="json",
        ),
        403,
    )
    assert "publish" in body["detail"]


def test_publish_key_cannot_register_datasets(client_for, team):
    client = client_for(team, scopes=["publish"])
    _problem(
        client.post("/api/v1/datasets", {"namespace": "s3://b", "name": "x"}, format="json"), 403
    )


def test_me_names_the_keys_team_and_scopes(client_for, team):
    body = client_for(team, scopes=["read"]).get("/api/v1/me").json()
    assert body["team"]["slug"] == "orders"
    assert body["key"]["scopes"] == ["read"]


def test_last_used_at_is_recorded(client_for, team):
    client_for(team).get("/api/v1/me")
    assert ApiKey.objects.get(team=team).last_used_at is not None


def test_a_key_revoked_by_another_process_is_refused_within_the_cache_bound(
    team, make_key, monkeypatch
):
    token = make_key(team)
    now = timezone.now()
    assert api_key_authenticate(token=token, now=now) is not None  # read and cached here
    # Another process revokes it: this one's cache does not know yet...
    ApiKey.objects.filter(team=team).update(revoked_at=now)
    assert api_key_authenticate(token=token, now=now) is not None
    # ...and reads the row again once the cache bound has passed.
    later = time.monotonic() + teams.API_KEY_CACHE_SECONDS
    monkeypatch.setattr(teams, "time", SimpleNamespace(monotonic=lambda: later))
    assert api_key_authenticate(token=token, now=now) is None


def test_a_cached_key_still_needs_its_secret_and_expires_on_time(team, make_key):
    expires_at = timezone.now() + timedelta(minutes=5)
    token = make_key(team, expires_at=expires_at)
    assert api_key_authenticate(token=token, now=timezone.now()) is not None
    assert api_key_authenticate(token=f"{token[:-2]}xx", now=timezone.now()) is None
    assert api_key_authenticate(token=token, now=expires_at) is None


def test_each_request_gets_its_own_copy_of_a_cached_key(team, make_key):
    token = make_key(team, scopes=["read"])
    first = api_key_authenticate(token=token, now=timezone.now())
    first.scopes.append("manage")
    first.team.name = "changed by a request"
    second = api_key_authenticate(token=token, now=timezone.now())
    assert (second.scopes, second.team.name) == (["read"], team.name)
