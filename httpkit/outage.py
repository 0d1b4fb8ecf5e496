"""A database that is down or failing over, answered as such: 503 ``database_unavailable``
with ``Retry-After`` (an RFC 9457 problem, or a small HTML page for a browser), one log
line per outage rather than a traceback per request, and the connections that failed
closed, so the first request after the database is back connects afresh.

Used in one place per stack: the DRF exception handler (``httpkit.exceptions``) for the
APIs, and ``DatabaseUnavailableMiddleware`` for plain Django views (the catalog's pages,
the badge, the watchdog's pings and on-call pages).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.db import Error as DjangoDatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from problems import PROBLEM_CONTENT_TYPE, problem_document

logger = logging.getLogger(__name__)

# What a client is told to wait; a failover usually takes seconds to a minute.
RETRY_AFTER_SECONDS = 5
# Each process logs an outage at most this often per kind of error (seconds); the next line
# says how many requests were answered 503 in between.
LOG_EVERY_SECONDS = 30.0
# read_only_sql_transaction: the server is now a standby (a failover demoted it).
_READ_ONLY_SQLSTATE = "25006"

_lock = threading.Lock()
_logged_at: dict[tuple[str, str | None], float] = {}  # (error class, SQLSTATE) -> monotonic
_unlogged: dict[tuple[str, str | None], int] = {}
_clock = time.monotonic  # a test moves it


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot serve now (rather than a bug or bad input).

    True for Django's ``OperationalError`` (connection refused or cut, server shutting
    down or starting, too many connections, SQLite busy...) and ``InterfaceError``
    (a closed connection), and for a write refused by a read-only server (SQLSTATE 25006,
    raised by psycopg as an ``InternalError``). ``DataError``/``IntegrityError`` are not:
    they are input the boundaries must refuse first.
    """
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DatabaseError) and _sqlstate(exc) == _READ_ONLY_SQLSTATE


def problem(instance: str | None = None) -> dict:
    """The 503 problem document for an unavailable database."""
    return problem_document(
        code="database_unavailable",
        title="The database is unavailable",
        status=503,
        detail=(
            f"Tidemark cannot reach its database just now; retry in {RETRY_AFTER_SECONDS} seconds."
        ),
        instance=instance,
    )


def handled(exc: BaseException) -> None:
    """Note an outage met by a request: log it (at most once per ``LOG_EVERY_SECONDS`` per
    kind of error, one line, no traceback) and close the connections that failed, so the
    next request opens new ones (a connection to a demoted primary still answers the
    health check, so Django would keep it)."""
    _report(exc)
    for connection in connections.all(initialized_only=True):
        if connection.errors_occurred and not connection.in_atomic_block:
            with contextlib.suppress(DjangoDatabaseError):  # it is already broken
                connection.close()


def response_for(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """The answer to ``request`` when ``exc`` made the database unavailable: an HTML page
    for a browser (``text/html`` in ``Accept``), the problem document for anything else,
    both 503 with ``Retry-After``. Calls ``handled``."""
    handled(exc)
    if "text/html" in request.headers.get("Accept", ""):
        # The shared layout, rendered without the request: nothing in it reads a database.
        page = render_to_string("httpkit/unavailable.html")
        response = HttpResponse(page, status=503, content_type="text/html; charset=utf-8")
    else:
        response = JsonResponse(
            problem(request.path), status=503, content_type=PROBLEM_CONTENT_TYPE
        )
    return mark(response)


def mark(response: HttpResponse) -> HttpResponse:
    """Add ``Retry-After``, and keep Django from logging the 503 again: ``handled``'s line
    stands for every request of the outage."""
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response._has_been_logged = True  # read by django.utils.log.log_response
    return response


class DatabaseUnavailableMiddleware:
    """Answer a view's database outage with ``response_for`` (last in ``MIDDLEWARE``, so
    its ``process_exception`` runs first). Other exceptions go on to Django's handlers."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        if is_database_unavailable(exception):
            return response_for(request, exception)
        return None


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc.__cause__, "sqlstate", None)


def _report(exc: BaseException) -> None:
    kind = (type(exc).__name__, _sqlstate(exc))
    with _lock:
        now = _clock()
        last = _logged_at.get(kind)
        if last is not None and now - last < LOG_EVERY_SECONDS:
            _unlogged[kind] = _unlogged.get(kind, 0) + 1
            return
        _logged_at[kind] = now
        since = _unlogged.pop(kind, 0)
    message = " ".join(str(exc).split())[:300]
    more = f" ({since} more answered 503 since the last line)" if since else ""
    logger.warning(
        "database unavailable, answering 503: %s%s: %s%s",
        kind[0],
        f" [{kind[1]}]" if kind[1] else "",
        message,
        more,
    )
