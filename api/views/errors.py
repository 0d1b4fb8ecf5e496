"""Django-level error handlers, so even unrouted paths answer with a problem document; a
browser asking for one of the web pages gets an HTML page instead."""

from django.core.exceptions import RequestDataTooBig
from django.shortcuts import render

from httpkit.exceptions import json_problem_response, server_error_document
from problems import problem_document

# Paths that are only ever machine-read: always a problem document.
_MACHINE_PATHS = ("/api/", "/ping/", "/badge/", "/healthz", "/readyz", "/demo/")


def _wants_html(request) -> bool:
    """A browser asking for a page: not a machine path, and ``text/html`` named in
    ``Accept`` (curl's ``*/*`` keeps getting the problem document)."""
    return not request.path.startswith(_MACHINE_PATHS) and "text/html" in request.headers.get(
        "Accept", ""
    )


def not_found(request, exception=None):
    if _wants_html(request):
        return render(request, "404.html", {"path": request.path}, status=404)
    return json_problem_response(
        problem_document(
            code="not_found",
            title="Not found",
            status=404,
            detail=f"no resource at {request.path}",
            instance=request.path,
        )
    )


def server_error(request):
    return json_problem_response(server_error_document(request.path))


def bad_request(request, exception=None):
    """Django's 400 (e.g. a Host header not in ALLOWED_HOSTS) as a problem document; a form
    body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413, as the API answers it."""
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


def csrf_failure(request, reason=""):
    """CSRF refusals (session-authenticated forms only; API keys need no CSRF token)."""
    if _wants_html(request):
        detail = "The form had expired or did not come from this site; reload it and try again."
        return render(request, "403.html", {"exception": detail}, status=403)
    return json_problem_response(
        problem_document(
            code="csrf_failed",
            title="CSRF check failed",
            status=403,
            detail=reason or "the CSRF token is missing or wrong",
            instance=request.path,
        )
    )
