"""Whether a URL may be a target of outbound requests at all, judged when it is registered.

The same rules for every URL Tidemark will call on someone's behalf: a consumer's webhook
(the catalog), a team's Slack webhook, a watchdog channel. They refuse early what can
never be delivered; the guard is still the connect-time check in ``outbound.http``, since
a host name can resolve to anything later (DNS rebinding), so names are not resolved here.
A PagerDuty target is not a URL but a routing key (``routing_key_refusal``), judged the
same way for a watchdog channel and a catalog team's on-call channel.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from .http import AddressPolicy, BlockedAddress, IPAddress

# Rules, as problem documents name them (``errors[].rule``).
HTTPS_URL = "https_url"
NO_CREDENTIALS = "no_credentials"
PUBLIC_ADDRESS = "public_address"
PAGERDUTY_ROUTING_KEY = "pagerduty_routing_key"

# PagerDuty Events API v2: "routing_key: the 32 character Integration Key for an
# integration on a service or on a global ruleset".
_ROUTING_KEY = re.compile(r"[A-Za-z0-9]{32}")

# ``localhost`` is judged as 127.0.0.1: where it also resolves to ::1, the connect-time
# guard judges that address too.
_LOCALHOST = (ipaddress.ip_address("127.0.0.1"),)


@dataclass(frozen=True)
class Refusal:
    """Why a URL may not be a target: ``rule`` (one of the constants above) and a
    ``detail`` for people."""

    rule: str
    detail: str


def scheme_refusal(url: str, *, allow_http: bool) -> Refusal | None:
    """Refuse what is not an absolute https URL with a host (http too when
    ``allow_http``) or carries credentials; None when the form is acceptable."""
    schemes = ("https", "http") if allow_http else ("https",)
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in schemes or not host:
        wanted = "an https or http URL" if allow_http else "an https URL"
        return Refusal(HTTPS_URL, f"must be {wanted} with a host")
    if parts.username or parts.password:
        return Refusal(NO_CREDENTIALS, "must not carry credentials (user:password@)")
    return None


def address_refusal(url: str, *, policy: AddressPolicy) -> Refusal | None:
    """Refuse a URL whose host is an address the connect-time guard would block.

    Judged: a host written as an IP address (``169.254.169.254``, ``[::1]``, the legacy
    IPv4 forms ``127.1`` or ``0x7f000001``) and ``localhost`` or a name under it
    (loopback by standard), against
    ``policy`` (private, loopback, link-local, reserved... unless allow-listed). Other
    host names are not resolved here (see the module docstring). None when acceptable.
    """
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None  # not a URL at all: scheme_refusal says so
    if not host:
        return None
    for address in _addresses(host):
        try:
            policy.check(address, host)
        except BlockedAddress:
            return Refusal(
                PUBLIC_ADDRESS,
                f"{host} is not a public address; Tidemark only sends to public addresses",
            )
    return None


def url_refusal(url: str, *, policy: AddressPolicy) -> Refusal | None:
    """The first of ``scheme_refusal`` and ``address_refusal`` that refuses ``url``, or
    None when it may be a target."""
    return scheme_refusal(url, allow_http=policy.allow_http) or address_refusal(url, policy=policy)


def routing_key_refusal(key: str) -> Refusal | None:
    """Refuse what is not a PagerDuty Events API v2 routing key (an integration key:
    exactly 32 ASCII letters or digits), rule ``pagerduty_routing_key``; None when ``key``
    has that form. Whether PagerDuty knows the key is only learned when it is paged."""
    if _ROUTING_KEY.fullmatch(key):
        return None
    return Refusal(
        PAGERDUTY_ROUTING_KEY,
        "must be a PagerDuty Events API v2 routing key (the integration key): "
        f"32 letters or digits, not {len(key)} characters"
        + ("" if key.isascii() and key.isalnum() else " with other signs"),
    )


def _addresses(host: str) -> tuple[IPAddress, ...]:
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return _LOCALHOST  # loopback by standard, wherever looked up (RFC 6761 6.3)
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        pass
    try:  # inet_aton parses the numeric IPv4 shorthands; it never resolves a name
        return (ipaddress.IPv4Address(socket.inet_aton(host)),)
    except (OSError, ValueError):
        return ()
