"""Cursor pagination: stable under concurrent inserts, O(page) at any depth."""

from django.core.exceptions import ValidationError
from rest_framework import exceptions, pagination

from problems import FieldError, ValidationProblem


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = "-id"

    def paginate_queryset(self, queryset, request, view=None):
        """As DRF's, but a garbled or crafted cursor is a 400 naming ``cursor``."""
        try:
            return super().paginate_queryset(queryset, request, view)
        except (exceptions.NotFound, ValueError, TypeError, ValidationError) as exc:
            raise ValidationProblem(
                "the cursor is not one this API issued",
                errors=[FieldError("cursor", "invalid cursor", "cursor")],
            ) from exc
