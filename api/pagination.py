"""Cursor pagination: stable under concurrent inserts, O(page) at any depth."""

from rest_framework import pagination


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = "-id"
