"""Examples for the catalog's OpenAPI document: one realistic request and answer per
serializer, attached with ``extend_schema_serializer(examples=...)`` so that every
operation using the serializer shows them (a paginated list wraps the item in a page).

The values follow the demo (``s3://tidemark-demo``, teams ``orders`` and ``finance``,
partition ``2026-11-28``); ``tests/api/test_openapi_document.py`` validates each example
against its schema.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample


def request(summary: str, value: Any) -> list[OpenApiExample]:
    """One request body example (never shown under a response)."""
    return [OpenApiExample(summary, value=value, request_only=True)]


def response(summary: str, value: Any) -> list[OpenApiExample]:
    """One answer example, shown under the operation's 200 and 201 responses."""
    return [OpenApiExample(summary, value=value, response_only=True)]
