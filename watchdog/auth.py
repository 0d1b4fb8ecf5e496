"""Authentication for the watchdog's REST API, with tokens from its own database."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from . import tokens


class TokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer wd_<public id>_<secret>``."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise exceptions.AuthenticationFailed("Authorization must be 'Bearer <watchdog token>'")
        row = tokens.authenticate(token.strip())
        if row is None:
            raise exceptions.AuthenticationFailed("the token is unknown or revoked")
        return (_TokenUser(row), row)

    def authenticate_header(self, request):
        return 'Bearer realm="tidemark-watchdog"'


class _TokenUser:
    is_authenticated = True

    def __init__(self, token):
        self.token = token
