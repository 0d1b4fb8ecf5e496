"""Django-level error handlers, so even unrouted paths answer with a problem document."""

from problems import problem_document

from ..exceptions import json_problem_response, server_error_document


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
