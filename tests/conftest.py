"""Shared fixtures. The main suite runs on real PostgreSQL and Redis; ``tests/embedded``
runs on SQLite and the filesystem broker (``--ds=config.settings.test_embedded``)."""

from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient

_EMBEDDED = os.environ.get("DJANGO_SETTINGS_MODULE", "").endswith("test_embedded")
collect_ignore_glob = [] if _EMBEDDED else ["embedded/*"]


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def team(db):
    from tests.catalog.factories import TeamFactory

    return TeamFactory(slug="orders")


@pytest.fixture
def make_key(db):
    """``make_key(team, scopes=...) -> token``: a real API key for ``team``."""
    from catalog.models import ApiKey
    from catalog.services import api_key_create

    def make(team, scopes=None, **kwargs) -> str:
        _, token = api_key_create(
            team=team,
            name=kwargs.pop("name", "test"),
            scopes=scopes or ApiKey.Scope.values,
            **kwargs,
        )
        return token

    return make


@pytest.fixture
def client_for(make_key):
    """``client_for(team, scopes=...) -> APIClient`` authenticated with a fresh key."""

    def make(team, scopes=None, **kwargs) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(team, scopes, **kwargs)}")
        return client

    return make
