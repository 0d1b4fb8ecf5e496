"""OpenAPI descriptions of the errors both servers answer: every failure is an RFC 9457
problem document (``problems.problem_document``), so every operation's 4xx and 5xx
responses share one ``Problem`` schema.

``ProblemAutoSchema`` (drf-spectacular's ``AutoSchema``) adds to each operation the
problem responses it can give, by what the operation takes and what Tidemark's HTTP glue
does with it:

- 400 always: ``UnstorableInputMiddleware`` refuses a NUL in any path, query or header
  value, before routing; and input errors (``validation_error``, ``malformed_request``);
- 401 when the operation needs credentials (``not_authenticated``,
  ``authentication_failed``, with ``WWW-Authenticate: Bearer``);
- 403 when the view requires a scope for the method (``required_scope``);
- 404 when the path has parameters (the object is not there);
- 414 when it takes path or query parameters: gunicorn's own HTML answer to a request
  line over 4094 bytes;
- 413 and 415 when the operation reads a body (``payload_too_large``,
  ``unsupported_media_type``);
- 503 always: a database outage (``database_unavailable``, with ``Retry-After``);
- and the statuses the view lists in ``problem_statuses`` for the method (its services'
  problems: a 409 conflict, a 422 rule, ...), as ``{"POST": {409: "why"}}``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, get_doc
from rest_framework.settings import api_settings

from problems import PROBLEM_CONTENT_TYPE

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An RFC 9457 problem document. Further members (e.g. `expected_format`, "
    "`suggestion`, `accepted_media_types`, `retry_after_seconds`) are specific to the "
    "problem type.",
    "properties": {
        "type": {
            "type": "string",
            "format": "uri-reference",
            "description": "`/problems/<code with dashes>`, answered by the server with "
            "the type's documentation.",
            "examples": ["/problems/validation-error"],
        },
        "title": {"type": "string", "description": "The same for every occurrence."},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string", "description": "This occurrence, in words."},
        "code": {
            "type": "string",
            "description": "The type's stable snake_case code.",
            "examples": ["validation_error"],
        },
        "instance": {"type": "string", "description": "The request's path."},
        "errors": {
            "type": "array",
            "description": "The offending input fields (input errors only).",
            "items": {
                "type": "object",
                "properties": {
                    "field": {
                        "type": "string",
                        "description": "Dotted path of the field, or `query.<name>`, "
                        "`header.<Name>`, `path`, `body`.",
                    },
                    "rule": {"type": "string", "examples": ["required", "invalid_choice"]},
                    "detail": {
                        "type": "string",
                        "description": "Why it was refused, naming `value` when there "
                        "is one: `Enter a valid URL (got 'htp:/x').`",
                    },
                    "value": {
                        "type": ["string", "number", "boolean", "null"],
                        "description": "The value sent at `field` (validation problems), "
                        "from the body or the query: a string cut at 100 characters "
                        "(ending in `...`), a URL's credentials shown as `***`. Absent when "
                        "the field was not sent (rule `required`), is a list or an object, "
                        "or is a secret by its name (`*_secret`, `*_token`, `*_key`, "
                        "`password`, `authorization`).",
                        "examples": ["htp:/x", 0],
                    },
                },
                "required": ["field", "rule", "detail"],
            },
        },
    },
    "required": ["type", "title", "status", "detail", "code"],
    "additionalProperties": True,
}

_RETRY_AFTER = {
    "schema": {"type": "string"},
    "description": "Seconds to wait before trying again.",
}

# The generic statuses: their description (naming the codes) and response headers.
GENERIC: dict[int, tuple[str, dict[str, Any]]] = {
    400: (
        "The request is not valid: `validation_error` (each offending field in `errors[]`, "
        "including a path, query or header value holding a NUL character), or "
        "`malformed_request` (a body that is not JSON).",
        {},
    ),
    401: (
        "`not_authenticated` (no credentials) or `authentication_failed` (malformed, "
        "unknown, revoked or expired).",
        {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`."}},
    ),
    403: ("`permission_denied`: the credentials lack the scope this operation needs.", {}),
    404: ("`not_found` or a type-specific code (`dataset_not_found`, ...).", {}),
    413: ("`payload_too_large`: the body is over the server's limit.", {}),
    414: (
        "The request line (path and query) is over the web server's limit, 4094 bytes "
        "under gunicorn, which answers this itself in HTML.",
        {},
    ),
    415: (
        "`unsupported_media_type`: the body is not `application/json`; "
        "`accepted_media_types` lists what the operation takes.",
        {},
    ),
    503: (
        "`database_unavailable`: the database cannot be reached; try again after "
        "`Retry-After` seconds.",
        {"Retry-After": _RETRY_AFTER},
    ),
}


def problem_response(description: str, headers: dict[str, Any] | None = None) -> dict:
    """An OpenAPI response object: ``description`` and a problem document body."""
    response: dict[str, Any] = {
        "description": description,
        "content": {PROBLEM_CONTENT_TYPE: {"schema": PROBLEM_COMPONENT.ref}},
    }
    if headers:
        response["headers"] = headers
    return response


PROBLEM_COMPONENT = ResolvedComponent(
    name="Problem", type=ResolvedComponent.SCHEMA, schema=PROBLEM_SCHEMA, object="Problem"
)


class ProblemAutoSchema(AutoSchema):
    """drf-spectacular's ``AutoSchema`` plus each operation's problem responses (see the
    module docstring for which); a view adds its own with ``problem_statuses``:
    ``{method: {status: description}}`` (``Retry-After`` is documented on a 429; a
    description of None drops a generic status the operation cannot answer).

    An operation is summarised by the first line of its method's docstring (unless
    ``extend_schema`` gives one) and described by the rest, then by its view class's own
    docstring. A list is paginated by the view's ``pagination_class``, or the settings'
    ``DEFAULT_PAGINATION_CLASS`` when the view names none (``pagination_class = None``:
    a plain array). drf-spectacular builds an ``extend_schema`` method's schema from the
    settings' ``DEFAULT_SCHEMA_CLASS``, so this class behaves the same under either
    server's settings.
    """

    def _get_paginator(self):
        pagination_class = getattr(
            self.view, "pagination_class", api_settings.DEFAULT_PAGINATION_CLASS
        )
        return pagination_class() if pagination_class else None

    def get_summary(self):
        return _docstring_parts(self._handler())[0].rstrip(".") or None

    def get_description(self):
        own = _docstring_parts(self._handler())[1]
        view = self.view.__class__.__dict__.get("__doc__")
        view = get_doc(self.view.__class__) if view else ""
        return "\n\n".join(part for part in (own, view) if part)

    def _handler(self):
        return getattr(self.view, self.method.lower(), None)

    def _map_basic_serializer(self, serializer, direction):
        """As drf-spectacular's, but in a response a field declared ``required=False`` (a
        member only some responses carry, e.g. a secret shown once) is not required."""
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "response" and "required" in schema:
            optional = {
                name
                for name, field in serializer.fields.items()
                if getattr(field, "_kwargs", {}).get("required") is False
            }
            schema["required"] = [name for name in schema["required"] if name not in optional]
            if not schema["required"]:
                del schema["required"]
        return schema

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        """As drf-spectacular's, but a nullable free-form field (a ``JSONField`` with
        ``allow_null``) is ``{}`` (any JSON value, null included): its OpenAPI 3.1 rendering
        ``oneOf: [{}, {type: null}]`` rejects null, which matches both."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if schema.get("oneOf") == [{}, {"type": "null"}]:
            del schema["oneOf"]
        return schema

    def _get_parameters(self):
        """As drf-spectacular's, but an optional query parameter may be empty: DRF reads
        ``?name=`` as leaving it out (``Field.get_value`` on a ``QueryDict``), so it is
        documented with no ``minLength``, a ``pattern`` that also matches the empty
        string and, for a choice, with ``""`` among them; a number, boolean or date-time
        as ``anyOf`` it and the empty string."""
        parameters = super()._get_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if parameter.get("in") != "query" or parameter.get("required"):
                continue
            if schema.get("type") != "string" or "format" in schema:
                parameter["schema"] = {"anyOf": [schema, {"type": "string", "maxLength": 0}]}
                continue
            if schema.get("minLength") == 1:
                del schema["minLength"]
            if "pattern" in schema:
                schema["pattern"] = f"^$|{schema['pattern']}"
            if "enum" in schema and "" not in schema["enum"]:
                schema["enum"] = [*schema["enum"], ""]
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        self.registry.register_on_missing(PROBLEM_COMPONENT)
        statuses = self.problem_statuses()
        for status in sorted(statuses):
            description, headers = statuses[status]
            if str(status) in responses:
                continue
            if status == 414:  # gunicorn's own answer, not a problem document
                responses["414"] = {"description": description, "content": {"text/html": {}}}
            else:
                responses[str(status)] = problem_response(description, headers)
        return dict(sorted(responses.items()))

    def problem_statuses(self) -> dict[int, tuple[str, dict[str, Any]]]:
        """``{status: (description, headers)}`` of the problems this operation can answer."""
        statuses = {400: GENERIC[400], 503: GENERIC[503]}
        if self.get_auth():
            statuses[401] = GENERIC[401]
        if self.requires_scope():
            statuses[403] = GENERIC[403]
        if "{" in self.path:
            statuses[404] = GENERIC[404]
        if any(p.get("in") in ("query", "path") for p in self._get_parameters()):
            statuses[414] = GENERIC[414]
        if self.method in ("POST", "PUT", "PATCH") and self._get_request_body():
            statuses[413] = GENERIC[413]
            statuses[415] = GENERIC[415]
        declared = getattr(self.view, "problem_statuses", {}).get(self.method, {})
        for status, description in declared.items():
            if description is None:  # the view says it cannot happen
                statuses.pop(status, None)
                continue
            headers = {"Retry-After": _RETRY_AFTER} if status == 429 else {}
            statuses[status] = (description, headers)
        return statuses

    def requires_scope(self) -> bool:
        """Whether a valid key may still be refused for lacking a scope (``required_scope``
        set for this method)."""
        scope = getattr(self.view, "required_scope", None)
        if isinstance(scope, dict):
            scope = scope.get(self.method)
        return scope is not None


def _docstring_parts(handler) -> tuple[str, str]:
    """A handler's docstring as ``(first line, the rest)``, each stripped."""
    doc = get_doc(handler) if handler is not None else ""
    first, _, rest = doc.partition("\n")
    return first.strip(), rest.strip()
