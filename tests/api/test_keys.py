from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import ApiKey
from tests.catalog.factories import TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/keys"


def test_create_key_shows_token_once_and_it_works(client_for, team, api_client):
    client = client_for(team, scopes=["manage", "read", "publish"])
    response = client.post(URL, {"name": "airflow", "scopes": ["publish", "read"]}, format="json")
    assert response.status_code == 201, response.json()
    token = response.json()["token"]
    listed = client.get(URL).json()["results"]
    assert all("token" not in k for k in listed)
    assert {k["name"] for k in listed} == {"test", "airflow"}
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api_client.get("/api/v1/me").json()["key"]["scopes"] == ["publish", "read"]


def test_key_cannot_grant_scopes_it_lacks(client_for, team):
    client = client_for(team, scopes=["manage"])
    response = client.post(URL, {"name": "x", "scopes": ["governance"]}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "scope_not_held"
    assert ApiKey.objects.count() == 1


def test_create_key_rejects_past_expiry_and_unknown_scope(client_for, team):
    client = client_for(team)
    past = (timezone.now() - timedelta(days=1)).isoformat()
    response = client.post(
        URL, {"name": "x", "scopes": ["read"], "expires_at": past}, format="json"
    )
    assert response.json()["errors"][0]["field"] == "expires_at"
    response = client.post(URL, {"name": "x", "scopes": ["root"]}, format="json")
    assert response.json()["errors"][0]["field"] == "scopes.0"
    assert ApiKey.objects.count() == 1


def test_revoke_key_makes_it_401(client_for, team, make_key, api_client):
    victim = make_key(team, name="old")
    public_id = ApiKey.objects.get(name="old").public_id
    assert client_for(team).delete(f"{URL}/{public_id}").status_code == 204
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {victim}")
    assert api_client.get("/api/v1/me").status_code == 401


def test_cannot_list_or_revoke_another_teams_keys(client_for, team, make_key):
    other = TeamFactory(slug="other")
    make_key(other, name="theirs")
    theirs = ApiKey.objects.get(name="theirs")
    client = client_for(team)
    assert "theirs" not in {k["name"] for k in client.get(URL).json()["results"]}
    assert client.delete(f"{URL}/{theirs.public_id}").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
