"""Fixtures for the catalog's web pages: people in teams, signed in with Django's test
client."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from catalog.models import Membership
from tests.catalog.factories import TeamFactory

PASSWORD = "correct horse battery staple"


@pytest.fixture
def make_person(db):
    """``make_person(username, *teams, role="member", **user_fields) -> User``."""

    def make(username, *teams, role=Membership.Role.MEMBER, **fields):
        user = get_user_model().objects.create_user(username=username, password=PASSWORD, **fields)
        for team in teams:
            Membership.objects.create(team=team, user=user, role=role)
        return user

    return make


@pytest.fixture
def client_as():
    """``client_as(user) -> Client`` signed in as ``user``."""

    def make(user, **kwargs) -> Client:
        client = Client(**kwargs)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def orders(db):
    return TeamFactory(slug="orders", name="Orders platform")


@pytest.fixture
def analytics(db):
    return TeamFactory(slug="analytics", name="Analytics engineering")
