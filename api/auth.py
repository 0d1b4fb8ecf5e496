"""API key authentication: ``Authorization: Bearer tm_<public id>_<secret>``."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import authentication, exceptions

from catalog.actors import Actor
from catalog.services.teams import api_key_authenticate


class ApiPrincipal:
    """The authenticated caller: a team acting through one API key."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, actor: Actor) -> None:
        self.actor = actor

    def __str__(self) -> str:
        return self.actor.label


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Resolve a bearer token to ``(ApiPrincipal, ApiKey)``; 401 for unknown, revoked or
    expired keys (with ``WWW-Authenticate: Bearer``)."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not token.strip():
            raise exceptions.AuthenticationFailed("Authorization must be 'Bearer <API key>'")
        key = api_key_authenticate(token=token.strip(), now=timezone.now())
        if key is None:
            raise exceptions.AuthenticationFailed("the API key is unknown, revoked or expired")
        return ApiPrincipal(Actor(team=key.team, api_key=key)), key

    def authenticate_header(self, request) -> str:
        return self.keyword
