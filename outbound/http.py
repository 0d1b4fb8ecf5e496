"""Sending one request to an endpoint we do not control, safely.

- SSRF guard at connect time: the host is resolved once and every address is checked
  against private, loopback, link-local, reserved and translation ranges (so DNS
  rebinding cannot slip past a check made at registration); the vetted address is the
  one connected to, with the original host kept for TLS SNI and ``Host``.
- No redirects, no proxies from the environment.
- Connect/read/write timeouts plus a total deadline, checked while the response streams,
  so a receiver dripping bytes cannot hold a worker; at most 64 KiB of body is read.
- One connection pool per ``Sender`` (one per worker process), reused across requests
  (keep-alive), driven directly: a worker sends hundreds of requests a second, and httpx's
  client layer (auth, cookies, redirects, its own URL model) cost more CPU per request than
  the HTTP exchange itself. httpx parses and checks each URL once.
"""

from __future__ import annotations

import base64
import ipaddress
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpcore
import httpx

MAX_RESPONSE_BYTES = 64 * 1024
EXCERPT_CHARS = 1024

_ALWAYS_BLOCKED = [
    ipaddress.ip_network(n)
    for n in (
        "::/96",  # IPv4-compatible (deprecated): ::127.0.0.1 reaches loopback on some stacks
        "::ffff:0:0:0/96",  # IPv4-translated
        "fec0::/10",  # site-local (deprecated)
        "64:ff9b::/96",  # NAT64: reaches IPv4 addresses through a translator
        "64:ff9b:1::/48",
        "2002::/16",  # 6to4: embeds an IPv4 address
        "100.64.0.0/10",  # carrier-grade NAT
        "192.0.0.0/24",
    )
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class BlockedAddress(Exception):
    """The endpoint resolved to an address outbound requests may not reach."""


@dataclass(frozen=True)
class AddressPolicy:
    """Which resolved addresses outbound requests may connect to.

    Args:
        allow_networks: CIDR blocks allowed even though not public (e.g. ``127.0.0.0/8``
            in tests, an internal hook relay in production).
        allow_http: plain ``http://`` URLs are allowed (only sensible with an allow-list).
    """

    allow_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    allow_http: bool = False

    @classmethod
    def from_strings(cls, networks: Iterable[str], *, allow_http: bool = False) -> AddressPolicy:
        return cls(tuple(ipaddress.ip_network(n, strict=False) for n in networks), allow_http)

    def check(self, address: IPAddress, host: str) -> None:
        """Raise BlockedAddress unless ``address`` is public or explicitly allowed."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if any(address in net for net in self.allow_networks):
            return
        if (
            not address.is_global
            or address.is_multicast
            or any(address in net for net in _ALWAYS_BLOCKED)
        ):
            raise BlockedAddress(f"{host} resolves to {address}, which is not a public address")


_request_deadline = threading.local()
_client_lock = threading.Lock()


def _remaining() -> float | None:
    deadline = getattr(_request_deadline, "at", None)
    return None if deadline is None else deadline - time.monotonic()


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write is cut to the request's total deadline,
    so a receiver dripping its status line or headers cannot hold a worker."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def _budget(self, timeout: float | None, error: type[Exception]) -> float | None:
        remaining = _remaining()
        if remaining is None:
            return timeout
        if remaining <= 0:
            raise error("the total deadline passed")
        return remaining if timeout is None else min(timeout, remaining)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._budget(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._budget(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        timeout = self._budget(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.SyncBackend):
    """httpcore's socket backend, resolving and vetting the address before connecting."""

    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"{host} did not resolve: {exc}") from exc
        if not infos:
            raise httpcore.ConnectError(f"{host} did not resolve")
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
        for address in addresses:  # every address, or rebinding could pick a bad one later
            self.policy.check(address, host)
        stream = super().connect_tcp(
            str(addresses[0]),
            port,
            timeout,
            local_address=local_address,
            socket_options=socket_options,
        )
        return _DeadlineStream(stream)


class _Pool(httpcore.ConnectionPool):
    """httpcore's pool, assigning requests to connections in time linear in its
    connections. httpcore 1.0's own pass counts the connections once per idle connection
    (quadratic: with tens of keep-alive connections, the largest CPU cost of a request),
    only to compare the count with ``max_keepalive_connections``; here the count is read
    once. The decisions are the same."""

    def _assign_requests_to_connections(self) -> list[httpcore.ConnectionInterface]:
        closing = []
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.has_expired() or (
                len(self._connections) > self._max_keepalive_connections and connection.is_idle()
            ):
                self._connections.remove(connection)
                closing.append(connection)
        for pool_request in [r for r in self._requests if r.is_queued()]:
            origin = pool_request.request.url.origin
            available = next(
                (c for c in self._connections if c.can_handle_request(origin) and c.is_available()),
                None,
            )
            if available is not None:
                pool_request.assign_to_connection(available)
            elif len(self._connections) < self._max_connections:
                connection = self.create_connection(origin)
                self._connections.append(connection)
                pool_request.assign_to_connection(connection)
            else:
                idle = next((c for c in self._connections if c.is_idle()), None)
                if idle is not None:
                    self._connections.remove(idle)
                    closing.append(idle)
                    connection = self.create_connection(origin)
                    self._connections.append(connection)
                    pool_request.assign_to_connection(connection)
        return closing


# httpcore 1.0's pool is what ``_Pool`` overrides one step of; another release gets its own.
_POOL_CLASS = _Pool if httpcore.__version__.startswith("1.0.") else httpcore.ConnectionPool


@dataclass(frozen=True)
class _Target:
    """A URL as the pool sends to it: parsed and checked once (``Sender._target``)."""

    url: httpcore.URL
    host: bytes  # the Host header: host, and port unless the scheme's default
    authorization: bytes | None  # basic credentials written in the URL, as httpx sends them


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt saw.

    ``status_code`` is None when no response arrived; then ``error_kind`` is one of
    ``timeout``, ``connect``, ``deadline``, ``protocol``, ``blocked``, ``invalid_url``.
    """

    status_code: int | None
    duration_ms: int
    response_excerpt: str = ""
    retry_after: str | None = None
    error_kind: str = ""
    error: str = ""


@dataclass
class Sender:
    """POSTs bodies with the guard, timeouts and deadline above.

    Args:
        policy: the address policy.
        connect_timeout, read_timeout: seconds, per connect and per read.
        total_deadline: seconds for the whole attempt, response included.
        max_connections: connections open at once, all hosts together; as many as the
            caller sends concurrently (``post`` is safe to call from several threads:
            the pool is shared, the deadline is per thread), since a request beyond
            it waits for a connection.
    """

    policy: AddressPolicy = field(default_factory=AddressPolicy)
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    total_deadline: float = 15.0
    user_agent: str = "Tidemark-Webhooks/1"
    max_connections: int = 20
    _pool: httpcore.ConnectionPool | None = field(default=None, init=False, repr=False)
    _targets: dict[str, _Target | str] = field(default_factory=dict, init=False, repr=False)

    def pool(self) -> httpcore.ConnectionPool:
        """The shared connection pool, built on first use (under a lock: threads may race)."""
        if self._pool is not None:
            return self._pool
        with _client_lock:
            if self._pool is None:
                self._pool = _POOL_CLASS(
                    ssl_context=httpx.create_ssl_context(),
                    max_connections=self.max_connections,
                    max_keepalive_connections=self.max_connections,
                    keepalive_expiry=30.0,
                    network_backend=_GuardedBackend(self.policy),
                )
            return self._pool

    def _target(self, url: str) -> _Target | str:
        """``url`` parsed for the pool, or why it may not be sent to (remembered: a worker
        sends to the same few URLs over and over)."""
        target = self._targets.get(url)
        if target is not None:
            return target
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            target = str(exc)
        else:
            if parsed.scheme != "https" and not (
                parsed.scheme == "http" and self.policy.allow_http
            ):
                target = "only https URLs"
            elif not parsed.raw_host:
                target = "the URL has no host"
            else:
                authorization = None
                if parsed.userinfo:
                    credentials = f"{parsed.username}:{parsed.password}"  # decoded by httpx
                    authorization = b"Basic " + base64.b64encode(credentials.encode())
                target = _Target(
                    url=httpcore.URL(
                        scheme=parsed.raw_scheme,
                        host=parsed.raw_host,
                        port=parsed.port,
                        target=parsed.raw_path,
                    ),
                    host=parsed.netloc,
                    authorization=authorization,
                )
        if len(self._targets) >= _MAX_TARGETS:
            self._targets.clear()
        self._targets[url] = target
        return target

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> AttemptResult:
        """POST ``body`` to ``url``; never raises for network trouble, only reports it."""
        started = time.monotonic()

        def result(**kwargs) -> AttemptResult:
            return AttemptResult(duration_ms=int((time.monotonic() - started) * 1000), **kwargs)

        target = self._target(url)
        if isinstance(target, str):
            return result(status_code=None, error_kind="invalid_url", error=target)
        request_headers = [
            (b"Host", target.host),
            (b"Accept", b"*/*"),
            # Raw bytes only: a compressed answer must not inflate past the read limit.
            (b"Accept-Encoding", b"identity"),
            (b"User-Agent", self.user_agent.encode()),
            (b"Content-Length", str(len(body)).encode()),
        ]
        if target.authorization is not None:
            request_headers.append((b"Authorization", target.authorization))
        reserved = {"host", "accept-encoding", "content-length"}
        for name, value in headers.items():
            if name.lower() not in reserved:
                request_headers.append((name.encode(), value.encode()))
        timeout = {
            "connect": self.connect_timeout,
            "read": self.read_timeout,
            "write": self.total_deadline,
            "pool": self.total_deadline,
        }
        _request_deadline.at = started + self.total_deadline
        try:
            with self.pool().stream(
                b"POST",
                target.url,
                headers=request_headers,
                content=body,
                extensions={"timeout": timeout},
            ) as response:
                chunks, size = [], 0
                for chunk in response.iter_stream():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size >= MAX_RESPONSE_BYTES:
                        break
                    if time.monotonic() - started > self.total_deadline:
                        return result(
                            status_code=None,
                            error_kind="deadline",
                            error=f"response not complete within {self.total_deadline:g} s",
                        )
                excerpt = b"".join(chunks)[:EXCERPT_CHARS].decode("utf-8", "replace")
                excerpt = excerpt.replace("\x00", "\ufffd")  # text columns cannot hold NUL
                retry_after = next(
                    (
                        v.decode("latin-1")
                        for k, v in response.headers
                        if k.lower() == b"retry-after"
                    ),
                    None,
                )
                return result(
                    status_code=response.status,
                    response_excerpt=excerpt,
                    retry_after=retry_after,
                )
        except BlockedAddress:
            # Generic on purpose: the resolved address would leak internal DNS to the owner.
            return result(
                status_code=None,
                error_kind="blocked",
                error="the endpoint resolves to an address outbound requests may not reach",
            )
        except httpcore.TimeoutException as exc:
            remaining = _remaining()
            if remaining is not None and remaining <= 0.01:
                return result(
                    status_code=None,
                    error_kind="deadline",
                    error=f"no complete response within {self.total_deadline:g} s",
                )
            return result(status_code=None, error_kind="timeout", error=str(exc) or "timed out")
        except httpcore.ConnectError as exc:
            return result(status_code=None, error_kind="connect", error=str(exc))
        except (
            httpcore.NetworkError,
            httpcore.ProtocolError,
            httpcore.UnsupportedProtocol,
            httpcore.ConnectionNotAvailable,
        ) as exc:
            return result(status_code=None, error_kind="protocol", error=str(exc))
        finally:
            _request_deadline.at = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


# URLs a Sender remembers parsed (endpoints a worker sends to); past this it starts afresh.
_MAX_TARGETS = 10_000
