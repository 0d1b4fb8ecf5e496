"""Writes for teams and their API keys: creating teams and keys, authenticating a token
(with the per-process cache of key rows) and revoking a key."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction

from problems import FieldError

from .. import errors, keys
from ..models import ApiKey, Dataset, Team


@transaction.atomic
def team_create(
    *, slug: str, name: str, contact_email: str = "", paging_routing_key: str = ""
) -> Team:
    """Create a team.

    Args:
        paging_routing_key: the team's on-call channel (a PagerDuty Events API v2 routing
            key), handed to the watchdog for its critical datasets; "" for none.

    Raises:
        ValidationError: the slug is taken or malformed.
    """
    team = Team(
        slug=slug, name=name, contact_email=contact_email, paging_routing_key=paging_routing_key
    )
    team.full_clean()
    team.save()
    return team


@transaction.atomic
def api_key_create(
    *,
    team: Team,
    name: str,
    scopes: list[str],
    expires_at: datetime | None = None,
    delegated_datasets: list[Dataset] | None = None,
    granted_by: ApiKey | None = None,
) -> tuple[ApiKey, str]:
    """Create an API key for ``team``.

    Args:
        scopes: subset of ``ApiKey.Scope`` values.
        expires_at: aware UTC instant after which the key is refused; None: never.
        delegated_datasets: other teams' datasets this key may publish readiness for.
        granted_by: the key creating this one, if created over the API; a key can only
            grant scopes it holds itself, and never expires after it.

    Returns:
        ``(key, token)``; the token is the only copy of the secret: show it once.

    Raises:
        ValidationError: an unknown scope.
        ScopeNotHeld: ``granted_by`` lacks one of ``scopes`` (403).
    """
    unknown = sorted(set(scopes) - set(ApiKey.Scope.values))
    if unknown:
        raise ValidationError({"scopes": f"unknown scope(s): {', '.join(unknown)}"})
    if granted_by is not None and granted_by.expires_at is not None:
        # A key cannot outlive the key that made it.
        expires_at = min(expires_at or granted_by.expires_at, granted_by.expires_at)
    if granted_by is not None:
        missing = sorted(set(scopes) - set(granted_by.scopes))
        if missing:
            raise errors.ScopeNotHeld(
                f"this key cannot grant scope(s) it does not hold: {', '.join(missing)}",
                errors=[FieldError("scopes", "not held by the granting key", "scope_not_held")],
            )
    generated = keys.generate_key()
    key = ApiKey(
        team=team,
        name=name,
        public_id=generated.public_id,
        digest=generated.digest,
        scopes=sorted(set(scopes)),
        expires_at=expires_at,
    )
    key.full_clean()
    key.save()
    if delegated_datasets:
        key.delegated_datasets.set(delegated_datasets)
    return key, generated.token


# How long a process reuses an API key row (with its team) it read, in seconds. Every
# request still checks the secret and the expiry against it, but a revocation, or any
# other change to the key or its team, reaches other processes only within this bound
# (the revoking process forgets the key at once). Saves a query on every request.
API_KEY_CACHE_SECONDS = 5.0


@dataclass
class _CachedKey:
    key: ApiKey  # never handed out: each request gets its own copy
    until: float  # time.monotonic() after which the row is read again


_api_keys: dict[str, _CachedKey] = {}  # by public id; only keys that exist


def api_key_authenticate(*, token: str, now: datetime) -> ApiKey | None:
    """The usable key ``token`` names, or None (unknown, wrong secret, revoked or expired).

    The key row is read at most every ``API_KEY_CACHE_SECONDS`` per process.

    Side effects: refreshes ``last_used_at`` at most once a minute per key (and process),
    so hot publishers do not write on every request.
    """
    parsed = keys.parse_key(token)
    if parsed is None:
        return None
    cached = _api_keys.get(parsed.public_id)
    if cached is None or cached.until <= time.monotonic():
        row = ApiKey.objects.select_related("team").filter(public_id=parsed.public_id).first()
        if row is None:
            _api_keys.pop(parsed.public_id, None)
            return None
        cached = _CachedKey(key=row, until=time.monotonic() + API_KEY_CACHE_SECONDS)
        _api_keys[parsed.public_id] = cached
    row = cached.key
    if not keys.matches(parsed.secret, row.digest) or not row.is_usable(now):
        return None
    key = copy.copy(row)
    key.scopes = list(row.scopes)
    key.team = copy.copy(row.team)
    if row.last_used_at is None or now - row.last_used_at > timedelta(minutes=1):
        ApiKey.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return key


def _forget_api_key(public_id: str) -> None:
    """Drop a key from this process's cache (see ``API_KEY_CACHE_SECONDS``)."""
    _api_keys.pop(public_id, None)


@transaction.atomic
def api_key_revoke(*, key: ApiKey, now: datetime) -> ApiKey:
    """Revoke ``key`` from ``now`` on; revoking twice keeps the first instant.

    This process refuses the key at once; other processes within
    ``API_KEY_CACHE_SECONDS``.
    """
    ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=now)
    # Again after commit: a request of this process may have re-read the row meanwhile.
    _forget_api_key(key.public_id)
    transaction.on_commit(lambda: _forget_api_key(key.public_id))
    key.refresh_from_db()
    return key
