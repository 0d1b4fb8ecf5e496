"""OpenAPI extensions: describe Tidemark's bearer API keys in the schema."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "api.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A team API key: `Authorization: Bearer tm_<id>_<secret>`.",
        }
