"""Liveness and readiness probes."""

from __future__ import annotations

from django.db import connections
from django.http import JsonResponse

from httpkit import outage


def healthz(request):
    """Process alive: answers 200 without touching any dependency."""
    return JsonResponse({"status": "ok"})


def readyz(request):
    """Ready to serve: 503 (with ``Retry-After``, as every answer during an outage) only
    when the catalog database is unreachable.

    A broker outage is reported as ``degraded`` with 200, since publishing keeps working
    without it (doorbells are best-effort; sweepers catch up).
    """
    checks: dict[str, str] = {}
    database = connections["default"]
    for attempt in (1, 2):
        try:
            with database.cursor() as cursor:
                cursor.execute("SELECT 1")
            checks["database"] = "ok"
            break
        except Exception as exc:  # any driver error means unreachable
            if attempt == 1:
                # A kept connection may have died since its last use (it is not checked
                # before reuse when used within DATABASE_HEALTH_CHECK_DELAY): try a new one.
                database.close()
                continue
            checks["database"] = f"unreachable: {type(exc).__name__}"
            response = JsonResponse({"status": "unavailable", "checks": checks}, status=503)
            response["Retry-After"] = str(outage.RETRY_AFTER_SECONDS)
            return response
    checks["broker"] = _broker_check()
    status = "ok" if checks["broker"] == "ok" else "degraded"
    return JsonResponse({"status": status, "checks": checks})


def _broker_check() -> str:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=0, timeout=1)
        return "ok"
    except Exception as exc:  # unreachable broker, any transport
        return f"unreachable: {type(exc).__name__}"
