"""``POST /api/v1/readiness``: the publish hot path, as a plain Django view.

Producers publish far more often than anything else is called, so this one operation skips
DRF's request cycle (request wrapping, content negotiation, parser and permission classes,
``Response`` rendering: about a fifth of a publish's CPU, measured by ``bench/ingest.py``'s
``--compare-drf``). It is still the API's one implementation of the operation: the same API
key authentication, JSON parser, input serializer, service and problem renderer as every
DRF view. ``ReadinessPublishApi`` only describes the operation to the OpenAPI generator.
"""

from __future__ import annotations

import io

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from catalog import errors
from catalog import metrics as catalog_metrics
from catalog.models import ApiKey
from catalog.services import publishing
from httpkit.exceptions import problem_exception_handler
from httpkit.parsers import StrictJSONParser
from problems import PROBLEM_CONTENT_TYPE, FieldError

from ..auth import ApiKeyAuthentication
from ..serializers import catalog as s

ALLOW = "POST, OPTIONS"
_RENDERER = JSONRenderer()
_AUTHENTICATION = ApiKeyAuthentication()
_PUBLISHES = {
    result: catalog_metrics.PUBLISHES.labels(result) for result in catalog_metrics.PUBLISH_RESULTS
}


@csrf_exempt
def readiness_publish_view(request: HttpRequest) -> HttpResponse:
    """Publish one partition's readiness (see ``ReadinessPublishApi`` for the contract).

    Every failure is an RFC 9457 problem rendered by the API's exception handler: 401
    without a usable key, 403 without the ``publish`` scope, 405 for another method, 415
    for a body that is not ``application/json``, 400 for a body the serializer refuses,
    and the service's own problems (404, 409, 422 ...).
    """
    if request.method == "OPTIONS":
        return _response(b"", 200, "application/json")
    sent: dict = {}  # the parsed body, once parsed: where a refused value is looked up
    try:
        body, status_code, replayed = _publish(request, sent)
    except Exception as exc:  # rendered as every API error is (unexpected ones are logged)
        problem = problem_exception_handler(exc, {"request": request, "data": sent.get("data")})
        response = _response(_RENDERER.render(problem.data), problem.status_code)
        for name, value in problem.items():  # e.g. WWW-Authenticate, Retry-After
            if name.lower() != "content-type":
                response[name] = value
        # A database outage's 503 is logged once by httpkit.outage, not per request.
        response._has_been_logged = getattr(problem, "_has_been_logged", False)
        _PUBLISHES["failed" if problem.status_code >= 500 else "refused"].inc()
        return response
    response = _response(_RENDERER.render(body), status_code, "application/json")
    if replayed:
        response["Idempotent-Replayed"] = "true"
        _PUBLISHES["replayed"].inc()
    else:
        _PUBLISHES["recorded" if status_code == 201 else "unchanged"].inc()
    return response


def _publish(request: HttpRequest, sent: dict) -> tuple[dict, int, bool]:
    if request.method != "POST":
        raise exceptions.MethodNotAllowed(request.method)
    principal, key = _AUTHENTICATION.authenticate(request) or (None, None)
    if key is None:
        raise exceptions.NotAuthenticated("send 'Authorization: Bearer <API key>'")
    if not key.has_scope(ApiKey.Scope.PUBLISH):
        raise exceptions.PermissionDenied(f"this API key lacks the '{ApiKey.Scope.PUBLISH}' scope")
    media_type = request.content_type.strip().lower()
    if media_type != "application/json":  # worded by the exception handler, as DRF's 415s
        raise exceptions.UnsupportedMediaType(media_type or "(none)")
    sent["data"] = StrictJSONParser().parse(io.BytesIO(request.body))
    data = s.ReadinessPublishInputSerializer(data=sent["data"])
    data.is_valid(raise_exception=True)
    result = publishing.readiness_publish(
        actor=principal.actor,
        idempotency_key=idempotency_key(request),
        now=timezone.now(),
        **data.validated_data,
    )
    return result.body, result.status_code, result.replayed


def _response(content: bytes, status_code: int, content_type: str = PROBLEM_CONTENT_TYPE):
    response = HttpResponse(content, status=status_code, content_type=content_type)
    response["Allow"] = ALLOW
    return response


def idempotency_key(request: HttpRequest) -> str | None:
    """The ``Idempotency-Key`` header as a string (a Structured Field string may be quoted).

    Raises:
        InvalidIdempotencyKey: empty, longer than 255 characters or not printable ASCII.
    """
    raw = request.headers.get("Idempotency-Key")
    if raw is None:
        return None
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not value or len(value) > 255 or not all(32 < ord(ch) < 127 for ch in value):
        raise errors.InvalidIdempotencyKey(
            "Idempotency-Key must be 1 to 255 printable ASCII characters without spaces",
            errors=[FieldError("Idempotency-Key", "malformed header", "format")],
        )
    return value


class ReadinessPublishApi(APIView):
    """The OpenAPI description of ``POST /api/v1/readiness``; requests are served by
    ``readiness_publish_view``, which the URL routes to with this class attached as its ``cls``
    (what the schema generator reads)."""

    required_scope = ApiKey.Scope.PUBLISH
    problem_statuses = {
        "POST": {
            403: (
                "`permission_denied` (scope) or `publish_not_allowed` (not the owner team nor "
                "delegated)."
            ),
            404: "`dataset_not_found` (with `suggestion`).",
            409: (
                "`revision_already_ready`, `revision_staged`, `dataset_retired` or "
                "`idempotency_key_in_progress`."
            ),
            422: "`partition_in_future`, `idempotency_key_reused` or another publish rule.",
        }
    }

    @extend_schema(
        summary="Publish a partition's readiness",
        description=(
            "Record that a partition of a dataset is ready (or pending, or failed). The "
            "first publish of a partition creates it; a repeat of what its current revision "
            "says is a no-op answered 200; a new `version` of a ready partition is a "
            "restatement, told to subscribers as `partition.restated`. Needs an API key "
            "with the `publish` scope, of the dataset's owner team or delegated for it. A "
            "partition whose period starts after now plus the clock-skew allowance (5 "
            "minutes by default) is refused with 422 `partition_in_future` naming "
            "`partition`, the rule `partition_started` and `newest_accepted_partition`, "
            "unless the dataset sets `accepts_future_partitions`."
        ),
        request=s.ReadinessPublishInputSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                location=OpenApiParameter.HEADER,
                required=False,
                description="Same key + same body replays the first response for 48 h.",
            )
        ],
        responses={
            201: OpenApiResponse(s.ReadinessPublishOutputSerializer, "a new revision"),
            200: OpenApiResponse(s.ReadinessPublishOutputSerializer, "a repeat (no-op)"),
        },
    )
    def post(self, request):
        return readiness_publish_view(request._request)  # mounted directly, the same view answers


readiness_publish_view.cls = ReadinessPublishApi  # type: ignore[attr-defined]
readiness_publish_view.initkwargs = {}  # type: ignore[attr-defined]
