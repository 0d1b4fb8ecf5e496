"""One access log line per request, and the request id that ties a request's log lines
(and the Celery tasks it enqueues) together.

``X-Request-ID`` is taken from the client or the reverse proxy when it is a sane token
(``accepted_request_id``), and generated otherwise (a uuid4 in hex). It is bound in
structlog's context variables for every record logged while the request is answered,
returned in the response's ``X-Request-ID`` on every answer (problem documents and 5xx
included), and put in the headers of the tasks the request publishes by
``config.celery_logging``.

The access line (logger ``tidemark.access``, event ``request``) carries ``method``,
``route`` (the URL pattern, e.g. ``api/v1/datasets/<int:pk>``, never the requested path
with its ids and secrets; ``path``, redacted, only when no pattern matched), ``status``,
``duration_ms``, ``team`` (the API key's team when one authenticated the request) and
``request_id``. It replaces gunicorn's access log, which the Procfile no longer turns on.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable

import structlog
from django.core.signals import request_finished
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

from .logsafe import redact

REQUEST_ID_HEADER = "X-Request-ID"
# Tokens a proxy sends (uuids, hex, base64url, "abc-123.4"): no spaces, quotes or
# control characters that could forge a log field or a header, and bounded.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+/=-]{0,127}")

access_log = structlog.get_logger("tidemark.access")


def new_request_id() -> str:
    """A fresh request id: a uuid4 as 32 lowercase hex digits."""
    return uuid.uuid4().hex


def accepted_request_id(value: str | None) -> str | None:
    """``value`` when it is a sane request id: 1 to 128 characters of ASCII letters,
    digits and ``._:+/=-``, starting with a letter or digit; None otherwise (absent,
    empty, too long, or holding spaces, quotes or control characters)."""
    if value and _SANE_REQUEST_ID.fullmatch(value):
        return value
    return None


class AccessLogMiddleware:
    """Bind the request id, answer, then log the access line and return the id.

    First in ``MIDDLEWARE``: its duration covers every other middleware, and the
    responses they make themselves (400 for unstorable input, 503 in a database outage,
    Django's 500 for an exception) get the header too. The context is cleared when the
    request starts, so nothing bound by a previous request on this thread leaks in, and
    when the response is closed (``request_finished``), not when this returns: Django
    logs a 4xx or 5xx answer (``django.request``) after the middleware, and that line
    belongs to the request too.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = accepted_request_id(request.headers.get(REQUEST_ID_HEADER))
        request_id = request_id or new_request_id()
        request.request_id = request_id
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        started = time.perf_counter()
        response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        access_log.info("request", **_access_fields(request, response, started))
        return response


@receiver(request_finished, dispatch_uid="httpkit.access.forget_request")
def forget_request(**_kwargs) -> None:
    """Clear the finished request's context (its response has been sent and closed)."""
    structlog.contextvars.clear_contextvars()


def _access_fields(request: HttpRequest, response: HttpResponse, started: float) -> dict:
    fields = {
        "method": request.method,
        "status": response.status_code,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }
    match = getattr(request, "resolver_match", None)
    if match is not None:
        fields["route"] = match.route
    else:
        fields["path"] = redact(request.path)
    team = _team_slug(request)
    if team is not None:
        fields["team"] = team
    return fields


def _team_slug(request: HttpRequest) -> str | None:
    """The slug of the team an API key authenticated as (``api.auth.ApiPrincipal``'s
    ``actor.team``), read by shape so httpkit imports no app; None otherwise.

    DRF puts its authenticated principal on the Django request itself; a session's
    user is a lazy object, left alone so the log line never costs a query."""
    user = getattr(request, "user", None)
    if isinstance(user, SimpleLazyObject):
        return None
    actor = getattr(user, "actor", None)
    return getattr(getattr(actor, "team", None), "slug", None)
