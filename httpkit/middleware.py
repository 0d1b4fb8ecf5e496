"""Refuse, before any view or database sees them, request texts PostgreSQL cannot store."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from problems import PROBLEM_CONTENT_TYPE, problem_document

from .storable import has_unstorable


class UnstorableInputMiddleware:
    """Answer 400 (rule ``text``) to a request whose path, query string (names or values)
    or header values hold a NUL (``%00``) or a lone surrogate.

    PostgreSQL refuses NUL in text, so such a value reaching a lookup or an insert would
    be a 500 from the driver; no path, parameter or header Tidemark reads may hold one.
    Bodies are checked by their parsers (``StrictJSONParser``, the YAML declaration
    loader) and forms (Django's and DRF's ``CharField`` refuse NUL). Invalid UTF-8 needs no
    check: Django decodes the path and query leniently (``%ff`` stays ``%FF`` in the path
    and becomes U+FFFD in the query).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = _first_unstorable(request)
        if field is not None:
            return JsonResponse(
                problem_document(
                    code="validation_error",
                    title="The request is not valid",
                    status=400,
                    detail=f"{field} holds a NUL character or a lone UTF-16 surrogate",
                    instance=request.path.replace("\x00", "%00"),
                    errors=[{"field": field, "rule": "text", "detail": "NUL or lone surrogate"}],
                ),
                status=400,
                content_type=PROBLEM_CONTENT_TYPE,
            )
        return self.get_response(request)


def _first_unstorable(request: HttpRequest) -> str | None:
    """The first offending part as ``path``, ``query.<name>`` or ``header.<Name>``."""
    if has_unstorable(request.path_info):
        return "path"
    for name, values in request.GET.lists():
        if has_unstorable(name) or any(has_unstorable(value) for value in values):
            return f"query.{name.replace(chr(0), '%00')}"
    for key, value in request.META.items():
        if key.startswith("HTTP_") and isinstance(value, str) and has_unstorable(value):
            return "header." + key[5:].replace("_", "-").title()
    return None
