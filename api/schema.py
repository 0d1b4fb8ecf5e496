"""OpenAPI extensions: describe Tidemark's bearer API keys in the schema, and the catalog
API's own ``AutoSchema`` (settings ``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]``)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from httpkit.openapi import ProblemAutoSchema


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "api.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A team API key: `Authorization: Bearer tm_<id>_<secret>`.",
        }


class CatalogAutoSchema(ProblemAutoSchema):
    """The catalog API's schema (``httpkit.openapi.ProblemAutoSchema``): every list is one
    cursor page (``REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"]``, ``api.pagination``)."""
