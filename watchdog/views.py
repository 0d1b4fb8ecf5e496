"""Ping endpoints, compatible with the common dead-man's-switch convention so existing cron
wrappers and one-line ``curl`` calls work: ``/ping/<uuid>`` (success), ``/start``, ``/fail``
and ``/<exit status>``, by GET, POST or HEAD, with ``?partition=`` and ``?rid=``.

Plain Django views: tiny text answers, no DRF machinery on the hot path.
"""

from __future__ import annotations

import uuid

from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from httpkit import outage
from httpkit.client_address import client_address

from . import db, pings
from .models import Ping


def _answer(status: int, text: str) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


def _ping(request: HttpRequest, key: uuid.UUID, kind: str, exit_status: int | None = None):
    if exit_status is not None and not 0 <= exit_status <= 255:
        return _answer(400, "exit status must be 0-255")
    ping = pings.PingInput(
        kind=kind,
        method=request.method,
        exit_status=exit_status,
        partition=request.GET.get("partition", ""),
        run_id=request.GET.get("rid", ""),
        body=request.read(pings.MAX_PING_BODY) if request.method == "POST" else b"",
        remote_addr=client_address(request),
        user_agent=request.META.get("HTTP_USER_AGENT", ""),
    )
    try:
        outcome = pings.record(ping_key=key, ping=ping, now=timezone.now())
    except pings.PingRejected as exc:
        return _answer(exc.status, str(exc))
    return _answer(200, "OK" if outcome == "ok" else "OK (ignored: this monitor takes POST only)")


@csrf_exempt
@require_http_methods(["GET", "POST", "HEAD"])
def ping_success(request, key):
    return _ping(request, key, Ping.Kind.SUCCESS)


@csrf_exempt
@require_http_methods(["GET", "POST", "HEAD"])
def ping_start(request, key):
    return _ping(request, key, Ping.Kind.START)


@csrf_exempt
@require_http_methods(["GET", "POST", "HEAD"])
def ping_fail(request, key):
    return _ping(request, key, Ping.Kind.FAIL)


@csrf_exempt
@require_http_methods(["GET", "POST", "HEAD"])
def ping_exit_status(request, key, status):
    return _ping(request, key, Ping.Kind.SUCCESS, exit_status=status)


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
