"""Django-level error handlers, so even unrouted paths answer with a problem document; a
browser asking for one of the web pages gets an HTML page instead."""

from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string

from httpkit import exceptions as httpkit_errors
from httpkit import outage
from problems import problem_document

# Paths that are only ever machine-read: always a problem document.
_MACHINE_PATHS = ("/api/", "/ping/", "/badge/", "/healthz", "/readyz", "/demo/")


def _wants_html(request) -> bool:
    """A browser asking for a page: not a machine path, and ``text/html`` named in
    ``Accept`` (curl's ``*/*`` keeps getting the problem document)."""
    return not request.path.startswith(_MACHINE_PATHS) and "text/html" in request.headers.get(
        "Accept", ""
    )


def _page(request, template: str, context: dict, status: int):
    """An HTML error page; its layout reads the signed-in person, so a database outage
    met while rendering it is the outage's 503 page instead."""
    try:
        return render(request, template, context, status=status)
    except Exception as exc:
        if outage.is_database_unavailable(exc):
            return outage.response_for(request, exc)
        raise


def not_found(request, exception=None):
    if _wants_html(request):
        return _page(request, "404.html", {"path": request.path}, status=404)
    return httpkit_errors.not_found(request, exception)


def server_error(request):
    """``handler500``: a browser gets the error page, rendered without the request (the
    person, their teams: what failed may be the database), anything else the problem."""
    if _wants_html(request):
        return HttpResponse(render_to_string("500.html"), status=500)
    return httpkit_errors.server_error(request)


bad_request = httpkit_errors.bad_request


def csrf_failure(request, reason=""):
    """CSRF refusals (session-authenticated forms only; API keys need no CSRF token)."""
    if _wants_html(request):
        detail = "The form had expired or did not come from this site; reload it and try again."
        return _page(request, "403.html", {"exception": detail}, status=403)
    return httpkit_errors.json_problem_response(
        problem_document(
            code="csrf_failed",
            title="CSRF check failed",
            status=403,
            detail=reason or "the CSRF token is missing or wrong",
            instance=request.path,
        )
    )
