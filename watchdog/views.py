"""Ping endpoints, compatible with the common dead-man's-switch convention (Healthchecks'
Pinging API) so existing cron wrappers and one-line ``curl`` calls work:

- ``/ping/<uuid>`` (success), ``/start``, ``/fail``, ``/log``, ``/<exit status>``;
- ``/ping/<ping key>/<slug>`` and the same suffixes, with ``?create=1``;
- by GET, POST or HEAD, with ``?rid=<uuid>`` and ``?partition=``; OPTIONS is a CORS
  preflight, and every answer carries ``Access-Control-Allow-Origin: *`` so a browser can
  ping, and ``Ping-Body-Limit``.

Answers are short texts as that convention's: ``OK`` (200), ``Created`` (201), ``invalid
url format`` and ``invalid uuid format`` (400), ``not found`` (404); a monitor over its
rate answers 429 with ``Retry-After``. Plain Django views: no DRF machinery on the hot path.
"""

from __future__ import annotations

import re
import uuid
from functools import wraps

from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt

from httpkit import outage
from httpkit.client_address import client_address
from problems import ValidationProblem

from . import db, ping_keys, pings
from .models import Ping

PING_METHODS = ("GET", "HEAD", "POST")
# The canonical textual form, any case, as the convention's ``rid`` requires.
RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
# Request headers a preflight may ask for: header names, listed with commas.
_HEADER_LIST = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")


class _Invalid(Exception):
    """A ping URL or query the convention refuses with 400 and this text."""


def _answer(status: int, text: str) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


def ping_endpoint(view):
    """A ping view's HTTP rules: no CSRF (pings come from scripts), an OPTIONS preflight
    answered for any origin, other methods than GET/HEAD/POST refused (405), and on every
    answer the CORS, ``Ping-Body-Limit`` and never-cache headers."""

    @csrf_exempt
    @wraps(view)
    def endpoint(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method == "OPTIONS":
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = ", ".join(PING_METHODS)
            asked = request.headers.get("Access-Control-Request-Headers", "").strip()
            if asked and len(asked) <= 500 and _HEADER_LIST.fullmatch(asked):
                response["Access-Control-Allow-Headers"] = asked
            response["Access-Control-Max-Age"] = "600"
        elif request.method not in PING_METHODS:
            response = _answer(405, "method not allowed")
            response["Allow"] = ", ".join((*PING_METHODS, "OPTIONS"))
        else:
            response = view(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        response["Access-Control-Expose-Headers"] = "Ping-Body-Limit, Retry-After"
        response["Ping-Body-Limit"] = str(pings.body_limit())
        add_never_cache_headers(response)
        return response

    return endpoint


def _parsed(request: HttpRequest, kind: str, exit_status: int | None) -> pings.PingInput:
    """The ping a request sends, or _Invalid for what the convention answers 400."""
    if exit_status is not None and exit_status > 255:
        raise _Invalid("invalid url format")
    run_id = request.GET.get("rid")
    if run_id is not None and not RUN_ID.fullmatch(run_id):
        raise _Invalid("invalid uuid format")
    return pings.PingInput(
        kind=kind,
        method=request.method,
        exit_status=exit_status,
        partition=request.GET.get("partition", ""),
        run_id=(run_id or "").lower(),
        body=request.read(pings.body_limit()) if request.method == "POST" else b"",
        remote_addr=client_address(request),
        user_agent=request.META.get("HTTP_USER_AGENT", ""),
    )


def _recorded(key: uuid.UUID, ping: pings.PingInput, *, created: bool = False) -> HttpResponse:
    try:
        outcome = pings.record(ping_key=key, ping=ping, now=timezone.now())
    except pings.PingRejected as exc:
        response = _answer(exc.status, str(exc))
        if exc.retry_after is not None:
            response["Retry-After"] = str(exc.retry_after)
        return response
    if outcome != "ok":
        return _answer(200, "OK (ignored: this monitor takes POST only)")
    return _answer(201, "Created") if created else _answer(200, "OK")


def _kind(action: str, exit_status: int | None) -> str:
    return Ping.Kind.SUCCESS if exit_status is not None else action


@ping_endpoint
def ping(request, key, action=Ping.Kind.SUCCESS, status=None):
    """``/ping/<uuid>[/start|/fail|/log|/<exit status>]``."""
    try:
        parsed = _parsed(request, _kind(action, status), status)
    except _Invalid as exc:
        return _answer(400, str(exc))
    return _recorded(key, parsed)


@ping_endpoint
def ping_by_slug(request, ping_key, slug, action=Ping.Kind.SUCCESS, status=None):
    """``/ping/<ping key>/<slug>[/start|/fail|/log|/<exit status>]``, with ``?create=1``
    creating the monitor on its first ping (201 ``Created``)."""
    try:
        if slug != slug.lower():
            raise _Invalid("invalid url format")
        parsed = _parsed(request, _kind(action, status), status)
    except _Invalid as exc:
        return _answer(400, str(exc))
    target = ping_keys.slug_target(key=ping_key, slug=slug)
    if target.ping_key is not None:
        return _recorded(target.ping_key, parsed)
    if target.owner is None or request.GET.get("create") != "1":
        return _answer(404, pings.NOT_FOUND)
    try:
        key, created = ping_keys.monitor_create_for_slug(
            owner=target.owner, slug=slug, now=timezone.now()
        )
    except ping_keys.CreateRefused as exc:
        return _answer(404, f"{pings.NOT_FOUND} (create=1 refused: {exc})")
    except ValidationProblem:
        return _answer(400, "invalid url format")
    return _recorded(key, parsed, created=created)


def healthz(request):
    return _answer(200, "ok")


def readyz(request):
    """Ready to serve: 200 when the watchdog's database answers; 503 with ``Retry-After``
    (as every answer during an outage) when it does not."""
    database = connections[db.alias()]
    for attempt in (1, 2):
        try:
            with database.cursor() as cursor:
                cursor.execute("SELECT 1")
            return JsonResponse({"status": "ok", "checks": {"database": "ok"}})
        except Exception as exc:  # any driver error means unreachable
            # A kept connection may have died since its last use: try a new one first.
            database.close()
            if attempt == 2:
                checks = {"database": f"unreachable: {type(exc).__name__}"}
                response = JsonResponse({"status": "unavailable", "checks": checks}, status=503)
                response["Retry-After"] = str(outage.RETRY_AFTER_SECONDS)
                return response
    raise AssertionError("unreachable")
