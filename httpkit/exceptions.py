"""One error format: every failure becomes an RFC 9457 problem document."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from rest_framework import exceptions
from rest_framework.request import Empty
from rest_framework.response import Response

from problems import PROBLEM_CONTENT_TYPE, Problem, ValidationProblem, problem_document

from . import outage, sent_values

logger = logging.getLogger(__name__)

_DRF_CODES = {
    exceptions.NotAuthenticated: ("not_authenticated", "Authentication required"),
    exceptions.AuthenticationFailed: ("authentication_failed", "Authentication failed"),
    exceptions.PermissionDenied: ("permission_denied", "Not allowed"),
    exceptions.NotFound: ("not_found", "Not found"),
    exceptions.MethodNotAllowed: ("method_not_allowed", "Method not allowed"),
    exceptions.NotAcceptable: ("not_acceptable", "Not acceptable"),
    exceptions.UnsupportedMediaType: ("unsupported_media_type", "Unsupported media type"),
    exceptions.Throttled: ("throttled", "Too many requests"),
    exceptions.ParseError: ("malformed_request", "The request body could not be parsed"),
}


def problem_exception_handler(exc: Exception, context: dict) -> Response:
    """DRF ``EXCEPTION_HANDLER``: render ``exc`` as ``application/problem+json``; a
    database outage is a 503 with ``Retry-After`` (``httpkit.outage``).

    A validation problem (DRF's, Django's or a ``ValidationProblem``) names in each error
    the ``value`` the client sent at its field, looked up in the parsed body and the query
    (``httpkit.sent_values``), and its detail names that value unless it already does.

    Args:
        exc: the exception raised.
        context: DRF's context; its ``request`` (a DRF ``Request`` or a plain
            ``HttpRequest``) gives the path and the query, and ``data``, when given, the
            parsed body of a view that parses its own.
    """
    instance = getattr(context.get("request"), "path", None)
    headers: dict[str, str] = {}
    if outage.is_database_unavailable(exc):
        outage.handled(exc)
        response = Response(outage.problem(instance), status=503, content_type=PROBLEM_CONTENT_TYPE)
        return outage.mark(response)
    if isinstance(exc, ValidationProblem):
        doc = exc.document(instance)
        sources = _sent(context)
        errors = [
            _with_value(error, sent_values.path_of(error["field"]), sources)
            for error in doc.get("errors", [])
        ]
        if errors:
            doc["detail"] = _problem_detail(exc, doc["detail"], doc["errors"], errors)
            doc["errors"] = errors
    elif isinstance(exc, Problem):
        doc = exc.document(instance)
    elif isinstance(exc, exceptions.ValidationError | DjangoValidationError):
        if isinstance(exc, exceptions.ValidationError):
            flat = _flatten(exc.detail)
        else:
            flat = _flatten(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
        sources = _sent(context)
        errors = [_with_value(error, path, sources) for path, error in flat]
        doc = problem_document(
            code="validation_error",
            title="The request is not valid",
            status=400,
            detail="; ".join(f"{e['field']}: {e['detail']}" for e in errors)[:1000],
            instance=instance,
            errors=errors,
        )
    elif isinstance(exc, RequestDataTooBig):
        doc = problem_document(
            code="payload_too_large",
            title="The request body is too large",
            status=413,
            detail=str(exc),
            instance=instance,
        )
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        doc = unsupported_media_type_document(context.get("request"), instance)
    elif isinstance(exc, Http404):
        doc = problem_document(
            code="not_found", title="Not found", status=404, detail="Not found", instance=instance
        )
    elif isinstance(exc, DjangoPermissionDenied):
        doc = problem_document(
            code="permission_denied", title="Not allowed", status=403, detail=str(exc)
        )
    elif isinstance(exc, exceptions.APIException):
        code, title = next(
            (v for cls, v in _DRF_CODES.items() if isinstance(exc, cls)),
            (exc.default_code, "Request failed"),
        )
        doc = problem_document(
            code=code,
            title=title,
            status=exc.status_code,
            detail=str(exc.detail),
            instance=instance,
        )
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            headers["WWW-Authenticate"] = "Bearer"
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
    else:
        logger.exception("unhandled error on %s", instance)
        doc = server_error_document(instance)
    return Response(doc, status=doc["status"], headers=headers, content_type=PROBLEM_CONTENT_TYPE)


def unsupported_media_type_document(request: Any, instance: str | None = None) -> dict[str, Any]:
    """The 415 for a body in a media type the endpoint does not parse: the same words on
    every endpoint, DRF's and the plain publish view alike, saying what to send instead.

    Args:
        request: the DRF ``Request`` (its parsers say what the endpoint takes) or a plain
            ``HttpRequest`` (JSON only).

    Returns:
        A problem document naming the ``Content-Type`` sent and the accepted media types
        (``accepted_media_types``), JSON first.
    """
    sent = (getattr(request, "content_type", "") or "").split(";")[0].strip().lower()
    parsed = dict.fromkeys(p.media_type for p in getattr(request, "parsers", None) or ())
    accepted = sorted(parsed, key=lambda m: m != "application/json") or ["application/json"]
    others = [m for m in accepted if m != "application/json"]
    also = "".join(f" (or '{m}')" for m in others)
    detail = (
        f"Content-Type {sent[:100] or '(none)'!r} is not accepted: send the body as JSON with "
        f"'Content-Type: application/json'{also}"
    )
    return problem_document(
        code="unsupported_media_type",
        title="Unsupported media type",
        status=415,
        detail=detail,
        instance=instance,
        errors=[{"field": "Content-Type", "rule": "media_type", "detail": detail}],
        extra={"accepted_media_types": accepted},
    )


def server_error_document(instance: str | None = None) -> dict[str, Any]:
    """The generic 500 problem: no internals leak to clients."""
    return problem_document(
        code="server_error",
        title="Internal error",
        status=500,
        detail="The server failed to handle the request; it has been logged.",
        instance=instance,
    )


def _flatten(detail: Any, path: sent_values.Path = ()) -> Iterator[tuple[sent_values.Path, dict]]:
    """DRF error details as ``(path, {"field", "rule", "detail"})``: ``path`` the keys and
    list indexes leading to the field (``("endpoints", 0, "url")``; ``()`` for the whole
    body), ``field`` the same as a dotted path (``endpoints.0.url``; ``body``)."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":  # an error of the object itself
                yield from _flatten(value, path)
            else:
                yield from _flatten(value, (*path, key))
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            for item in detail:
                yield path, _error(path, item)
        else:
            for index, item in enumerate(detail):
                yield from _flatten(item, (*path, index))
    else:
        yield path, _error(path, detail)


def _error(path: sent_values.Path, detail: Any) -> dict[str, Any]:
    return {
        "field": ".".join(str(segment) for segment in path) or "body",
        "rule": getattr(detail, "code", "invalid"),
        "detail": str(detail),
    }


def _sent(context: dict) -> tuple[Any, Any]:
    """What the client sent, where an error's value is looked up: the parsed body (the
    context's ``data`` for a view that parses its own, e.g. the publish view) and the
    query's ``QueryDict``. A body the view never read stays unread (None): parsing it here
    could fail, and no error can be about it."""
    request = context.get("request")
    body = context.get("data")
    if body is None:
        body = getattr(request, "_full_data", None)  # DRF's Request once it has parsed
        if body is Empty:
            body = None
    query = getattr(request, "query_params", None) or getattr(request, "GET", None)
    return body, query


def _with_value(error: dict[str, Any], path: sent_values.Path, sources) -> dict[str, Any]:
    """``error`` with the ``value`` sent at ``path`` (``sent_values.value_member``), its
    detail naming that value unless it already does."""
    value = sent_values.value_member(path, error["rule"], sources)
    if value is sent_values.MISSING:
        return error
    detail = error["detail"]
    if not sent_values.names_value(detail, value):
        detail = sent_values.detail_naming(detail, value)
    return {**error, "detail": detail, "value": value}


def _problem_detail(exc: ValidationProblem, detail: str, old: list[dict], new: list[dict]) -> str:
    """A validation problem's detail once its errors name their values: written again from
    its summary when ``ValidationProblem.of`` made it; else, when it ends with an error's
    former detail (``"... the first at datasets[0].name: at most 255 characters"``), ending
    with that error's new one; else, with one error, naming its value at its end unless it
    already does; else as raised. At most 1,000 characters, as every detail."""
    if exc.summary is not None:
        return ValidationProblem.listed(exc.summary, new)
    changed = [(o, n) for o, n in zip(old, new, strict=True) if o["detail"] != n["detail"]]
    for before, after in changed:
        if before["detail"] and detail.endswith(before["detail"]):
            return (detail[: -len(before["detail"])] + after["detail"])[:1000]
    if len(new) == 1 and changed and not sent_values.names_value(detail, new[0]["value"]):
        return sent_values.detail_naming(detail, new[0]["value"])[:1000]
    return detail


def json_problem_response(doc: dict[str, Any]) -> JsonResponse:
    """A plain Django response carrying a problem document (for non-DRF views)."""
    return JsonResponse(doc, status=doc["status"], content_type=PROBLEM_CONTENT_TYPE)


# Django's error handlers (``handler400``/``404``/``500`` in a URLconf) as problem documents,
# for a server without pages of its own to show (the watchdog deployed alone); the
# catalog's handlers (``api.views.errors``) send browsers its HTML pages instead.


def not_found(request, exception=None) -> JsonResponse:
    """``handler404``: no route (or a view raised ``Http404``)."""
    return json_problem_response(
        problem_document(
            code="not_found",
            title="Not found",
            status=404,
            detail=f"no resource at {request.path}",
            instance=request.path,
        )
    )


def bad_request(request, exception=None) -> JsonResponse:
    """``handler400``: e.g. a Host header not in ``ALLOWED_HOSTS``; a form body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413, as the API answers it."""
    if isinstance(exception, RequestDataTooBig):
        return json_problem_response(
            problem_document(
                code="payload_too_large",
                title="The request body is too large",
                status=413,
                detail=str(exception),
                instance=request.path,
            )
        )
    return json_problem_response(
        problem_document(
            code="bad_request",
            title="Bad request",
            status=400,
            detail="the request could not be accepted (check the Host header)",
            instance=request.path,
        )
    )


def server_error(request) -> JsonResponse:
    """``handler500``: the generic problem, nothing internal."""
    return json_problem_response(server_error_document(request.path))
