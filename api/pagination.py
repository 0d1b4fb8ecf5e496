"""Cursor pagination: stable under concurrent inserts, O(page) at any depth."""

from django.core.exceptions import ValidationError
from rest_framework import exceptions, pagination

from problems import FieldError, ValidationProblem


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = "-id"

    def get_page_size(self, request) -> int:
        """``page_size`` from the query: 1 to ``max_page_size`` (a 400 naming ``page_size``
        otherwise, rather than DRF's silent fallback to the default), ``page_size`` when
        absent or empty (``?page_size=``, as DRF reads an empty query value)."""
        raw = request.query_params.get(self.page_size_query_param)
        if not raw:
            return self.page_size
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if not 1 <= value <= self.max_page_size:
            rule = f"an integer from 1 to {self.max_page_size}"
            raise ValidationProblem(
                f"page_size must be {rule}",
                errors=[FieldError("page_size", f"must be {rule}", "range")],
            )
        return value

    def paginate_queryset(self, queryset, request, view=None):
        """As DRF's, but a garbled or crafted cursor is a 400 naming ``cursor``."""
        try:
            return super().paginate_queryset(queryset, request, view)
        except (exceptions.NotFound, ValueError, TypeError, ValidationError) as exc:
            raise ValidationProblem(
                "the cursor is not one this API issued",
                errors=[FieldError("cursor", "invalid cursor", "cursor")],
            ) from exc

    def get_paginated_response_schema(self, schema: dict) -> dict:
        """The page envelope as served (OpenAPI 3.1): ``next`` and ``previous`` are always
        present, a URL carrying an opaque ``cursor`` or null at either end."""
        link = {"type": ["string", "null"], "format": "uri"}
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {
                "next": {
                    **link,
                    "description": "The next page, or null on the last.",
                    "examples": ["https://tidemark.example/api/v1/datasets?cursor=cD00ODY%3D"],
                    # drf-spectacular builds a list's page example from these.
                    "example": "https://tidemark.example/api/v1/datasets?cursor=cD00ODY%3D",
                },
                "previous": {
                    **link,
                    "description": "The previous page, or null on the first.",
                    "example": None,
                },
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view) -> list[dict]:
        """``cursor`` (opaque, from ``next``/``previous``) and ``page_size`` (1 to 500)."""
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "An opaque cursor from a page's `next` or `previous` URL.",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"Results per page (default {self.page_size}, at most "
                f"{self.max_page_size}).",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            },
        ]
