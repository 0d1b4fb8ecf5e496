"""The address of the client behind any reverse proxies Tidemark is told to trust.

Sign-in throttles count failures per client address, and pings record where they came
from. Behind a proxy, ``REMOTE_ADDR`` is the proxy's address: every client would share one
throttle. ``TIDEMARK_TRUSTED_PROXY_COUNT`` says how many proxies stand in front of the web
processes; each appends the address it received the request from to ``X-Forwarded-For``,
so the client is the entry that many places from the right. Entries further left were
written by the client itself and are never believed (RFC 7239 section 8.3 explains why a
left-most value can be forged).
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The client's IP address as text, or ``""`` when the request carries none.

    With ``TIDEMARK_TRUSTED_PROXY_COUNT`` = 0 (the default) this is ``REMOTE_ADDR``. With
    N > 0 it is the N-th ``X-Forwarded-For`` entry from the right (all headers of that name
    joined, as Django's WSGI handler does), when there are at least N entries and that one
    is a valid IPv4 or IPv6 address; otherwise ``REMOTE_ADDR``, so a missing or mangled
    header never merges clients under a made-up key.
    """
    remote = request.META.get("REMOTE_ADDR", "") or ""
    count = settings.TIDEMARK_TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [part for part in forwarded if part]
    if len(forwarded) < count:
        return remote
    candidate = forwarded[-count]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
