"""Refuse request bodies whose size Django cannot know."""

from django.http import HttpRequest

from httpkit.exceptions import json_problem_response
from problems import problem_document


class RequireContentLength:
    """Answer 411 to a chunked body without Content-Length (RFC 9110 15.5.12).

    WSGI hands Django such a body as empty, so it would be parsed as ``{}`` and refused
    with misleading "field required" errors, and the size limit could not apply.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not request.META.get("CONTENT_LENGTH"):
            return json_problem_response(
                problem_document(
                    code="length_required",
                    title="Content-Length required",
                    status=411,
                    detail="send the body with a Content-Length header, not chunked",
                    instance=request.path,
                )
            )
        return self.get_response(request)
