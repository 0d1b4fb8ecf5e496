"""Django-level error handlers, so even unrouted paths answer with a problem document."""

from httpkit.exceptions import json_problem_response, server_error_document
from problems import problem_document


def not_found(request, exception=None):
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
    """Django's 400 (e.g. a Host header not in ALLOWED_HOSTS) as a problem document."""
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
    return json_problem_response(
        problem_document(
            code="csrf_failed",
            title="CSRF check failed",
            status=403,
            detail=reason or "the CSRF token is missing or wrong",
            instance=request.path,
        )
    )
