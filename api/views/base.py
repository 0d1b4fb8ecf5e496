"""What every API view needs: who is calling, and cursor pagination."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.actors import Actor

from ..pagination import CursorPagination


def actor_of(request: Request) -> Actor:
    """The team (and key) the request acts for; set by ApiKeyAuthentication."""
    return request.user.actor


def paginate(
    view: APIView, request: Request, queryset, serializer_class, ordering, context=None
) -> Response:
    """One cursor page of ``queryset`` rendered with ``serializer_class`` (and ``context``)."""
    paginator = CursorPagination()
    paginator.ordering = ordering
    page = paginator.paginate_queryset(queryset, request, view=view)
    data = serializer_class(page, many=True, context=context or {}).data
    return paginator.get_paginated_response(data)
