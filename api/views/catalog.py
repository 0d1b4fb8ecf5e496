"""Catalog API views: one operation each, validating input and calling one service/selector."""

from __future__ import annotations

import io

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import declarations, errors, freshness, selectors, watchdog_feed
from catalog.models import ApiKey, AuditEntry
from catalog.services import datasets, publishing, subscriptions, teams
from httpkit.exceptions import problem_exception_handler
from httpkit.parsers import StrictJSONParser
from problems import PROBLEM_CONTENT_TYPE, FieldError, ValidationProblem

from ..auth import ApiKeyAuthentication
from ..parsers import DeclarationYAMLParser
from ..serializers import catalog as s
from .base import actor_of, paginate


class MeApi(APIView):
    """Who the presented API key acts for."""

    @extend_schema(responses=s.ApiKeyOutputSerializer)
    def get(self, request: Request) -> Response:
        key = request.auth
        return Response(
            {
                "team": {"slug": key.team.slug, "name": key.team.name},
                "key": s.ApiKeyOutputSerializer(key).data,
            }
        )


class ApiKeyListCreateApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(responses=s.ApiKeyOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        queryset = selectors.api_key_list(team=actor_of(request).team)
        return paginate(self, request, queryset, s.ApiKeyOutputSerializer, ("-id",))

    @extend_schema(
        request=s.ApiKeyCreateInputSerializer, responses={201: s.ApiKeyCreatedOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        data = s.ApiKeyCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        expires_at = data.validated_data.get("expires_at")
        if expires_at is not None and expires_at <= timezone.now():
            raise ValidationProblem(
                "expires_at is in the past",
                errors=[FieldError("expires_at", "must be in the future", "future")],
            )
        key, token = teams.api_key_create(
            team=actor_of(request).team,
            name=data.validated_data["name"],
            scopes=data.validated_data["scopes"],
            expires_at=expires_at,
            granted_by=request.auth,
        )
        body = {**s.ApiKeyOutputSerializer(key).data, "token": token}
        return Response(body, status=status.HTTP_201_CREATED)


class ApiKeyRevokeApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(responses={204: None})
    def delete(self, request: Request, public_id: str) -> Response:
        key = selectors.api_key_get(team=actor_of(request).team, public_id=public_id)
        teams.api_key_revoke(key=key, now=timezone.now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class DatasetListCreateApi(APIView):
    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}

    @extend_schema(
        parameters=[s.DatasetListFilterSerializer], responses=s.DatasetOutputSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        filters = s.DatasetListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        queryset = selectors.dataset_list(
            owner=f.get("owner"),
            namespace=f.get("namespace"),
            criticality=f.get("criticality"),
            lifecycle=f.get("lifecycle"),
            search=f.get("q"),
            name=f.get("name"),
        )
        return paginate(self, request, queryset, s.DatasetOutputSerializer, ("id",))

    @extend_schema(
        request=s.DatasetCreateInputSerializer, responses={201: s.DatasetOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        data = s.DatasetCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = datasets.dataset_register(actor=actor_of(request), **data.validated_data)
        return Response(s.DatasetOutputSerializer(dataset).data, status=status.HTTP_201_CREATED)


class DatasetDetailApi(APIView):
    required_scope = {"GET": ApiKey.Scope.READ, "PATCH": ApiKey.Scope.MANAGE}

    @extend_schema(responses=s.DatasetOutputSerializer)
    def get(self, request: Request, dataset_id: int) -> Response:
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        body = dict(s.DatasetOutputSerializer(dataset).data)
        if dataset.owner_id == actor_of(request).team.pk:  # the badge URL is the owner's to share
            body["badge_url"] = request.build_absolute_uri(f"/badge/{dataset.badge_token}.svg")
            if ping_url := watchdog_feed.pipeline_ping_url(dataset):
                body["pipeline_ping_url"] = ping_url
        return Response(body)

    @extend_schema(request=s.DatasetUpdateInputSerializer, responses=s.DatasetOutputSerializer)
    def patch(self, request: Request, dataset_id: int) -> Response:
        data = s.DatasetUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        dataset = datasets.dataset_update(
            actor=actor_of(request), dataset=dataset, **data.validated_data
        )
        return Response(s.DatasetOutputSerializer(dataset).data)


class CatalogApplyApi(APIView):
    """Declarations as code: show the plan that brings the calling team's datasets to a
    declaration (``team`` + ``datasets``, YAML or JSON) and, with ``dry_run=false``, apply
    it all or nothing through the same rules as the dataset endpoints."""

    required_scope = ApiKey.Scope.MANAGE
    parser_classes = [DeclarationYAMLParser, StrictJSONParser]

    @extend_schema(
        parameters=[s.CatalogApplyQuerySerializer],
        request={"application/yaml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        responses=s.CatalogPlanOutputSerializer,
    )
    def post(self, request: Request) -> Response:
        query = s.CatalogApplyQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        dry_run = query.validated_data["dry_run"]
        document = declarations.validate(request.data)
        actor = actor_of(request)
        if dry_run:
            result = selectors.declarations_plan(team=actor.team, document=document)
        else:
            result = datasets.declarations_apply(actor=actor, document=document)
        body = {**declarations.plan_as_dict(result), "dry_run": dry_run}
        return Response(s.CatalogPlanOutputSerializer(body).data)


class DatasetAuditApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.AuditEntryOutputSerializer(many=True))
    def get(self, request: Request, dataset_id: int) -> Response:
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        queryset = AuditEntry.objects.filter(dataset=dataset)
        return paginate(self, request, queryset, s.AuditEntryOutputSerializer, ("-id",))


class DatasetFreshnessApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.FreshnessOutputSerializer)
    def get(self, request: Request, dataset_id: int) -> Response:
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        state = freshness.dataset_freshness(dataset, now=timezone.now())
        return Response(s.FreshnessOutputSerializer(state).data)


class DatasetPollApi(APIView):
    """The fallback poll's view of a dataset: its storage group, cadence and recent sweeps
    with their cost (List calls, pages, objects) and finds."""

    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.PollOutputSerializer)
    def get(self, request: Request, dataset_id: int) -> Response:
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        return Response(s.PollOutputSerializer(selectors.dataset_poll(dataset=dataset)).data)


class PartitionListApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(
        parameters=[s.PartitionListFilterSerializer],
        responses=s.PartitionOutputSerializer(many=True),
    )
    def get(self, request: Request, dataset_id: int) -> Response:
        filters = s.PartitionListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        queryset = selectors.partition_list(
            dataset=dataset,
            state=f.get("state"),
            logical_from=f.get("logical_from"),
            logical_to=f.get("logical_to"),
        )
        return paginate(self, request, queryset, s.PartitionOutputSerializer, ("-start_at", "-id"))


class PartitionLatestReadyApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(
        description="The newest partition whose current revision is ready and whose period "
        "has started (a future partition of a dataset that accepts them is not the latest "
        "before its period starts); 404 when there is none.",
        responses=s.PartitionOutputSerializer,
    )
    def get(self, request: Request, dataset_id: int) -> Response:
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        partition = selectors.partition_latest_ready(dataset=dataset, now=timezone.now())
        if partition is None:
            raise errors.PartitionNotFound(f"{dataset} has no ready partition yet")
        return Response(s.PartitionOutputSerializer(partition).data)


class PartitionDetailApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.PartitionOutputSerializer)
    def get(self, request: Request, dataset_id: int, key: str) -> Response:
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        partition = selectors.partition_get(dataset=dataset, key=key)
        return Response(s.PartitionOutputSerializer(partition).data)


class ReadinessPublishApi(APIView):
    required_scope = ApiKey.Scope.PUBLISH

    @extend_schema(
        description="Publish that a partition (revision) is ready or failed, by the owner "
        "team or a key delegated for the dataset. A partition whose period starts after now "
        "plus the clock-skew allowance (5 minutes by default) is refused with 422 "
        "partition_in_future naming partition, the rule partition_started and "
        "newest_accepted_partition, unless the dataset sets accepts_future_partitions.",
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
            201: s.ReadinessPublishOutputSerializer,
            200: s.ReadinessPublishOutputSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        data = s.ReadinessPublishInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = publishing.readiness_publish(
            actor=actor_of(request),
            idempotency_key=_idempotency_key(request),
            now=timezone.now(),
            **data.validated_data,
        )
        headers = {"Idempotent-Replayed": "true"} if result.replayed else {}
        return Response(result.body, status=result.status_code, headers=headers)

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        """A valid publish is served by ``_publish_directly``; anything else by DRF."""
        if request.method == "POST":
            response = _publish_directly(request)
            if response is not None:
                return response
        return super().dispatch(request, *args, **kwargs)


_JSON_RANGES = frozenset(("*/*", "application/*", "application/json"))
_RENDERER = JSONRenderer()
_PUBLISH_ALLOW = "POST, OPTIONS"  # what DRF's Allow header says for this view


def _publish_directly(request: HttpRequest) -> HttpResponse | None:
    """A publish without DRF's request wrapping, negotiation, parser and permission
    machinery (about a fifth of a publish's CPU), answering exactly what
    ``ReadinessPublishApi.post`` answers; None when the request is not plainly valid (no
    usable key with the publish scope, not JSON, a body the serializer refuses, an Accept
    header without JSON...): DRF then serves it, and its error. ``readiness_publish``'s
    own errors are rendered here by the API's exception handler."""
    meta = request.META
    if meta.get("QUERY_STRING"):
        return None  # e.g. DRF's ?format= override
    if meta.get("CONTENT_TYPE", "").partition(";")[0].strip().lower() != "application/json":
        return None
    accept = meta.get("HTTP_ACCEPT")
    if accept and not _plainly_json(accept):
        return None
    try:
        principal, key = ApiKeyAuthentication().authenticate(request) or (None, None)
        if key is None or not key.has_scope(ApiKey.Scope.PUBLISH):
            return None
        data = s.ReadinessPublishInputSerializer(
            data=StrictJSONParser().parse(io.BytesIO(request.body))
        )
        if not data.is_valid():
            return None
        idempotency_key = _idempotency_key(request)
    except Exception:  # whatever it is, DRF answers it as it always does
        return None
    try:
        result = publishing.readiness_publish(
            actor=principal.actor,
            idempotency_key=idempotency_key,
            now=timezone.now(),
            **data.validated_data,
        )
    except Exception as exc:  # as DRF renders it: a problem (logged when unexpected)
        problem = problem_exception_handler(exc, {"request": request})
        response = _rendered(problem.data, problem.status_code, PROBLEM_CONTENT_TYPE)
        for name, value in problem.items():  # e.g. Retry-After; the renderer's type wins
            if name.lower() != "content-type":
                response[name] = value
        return response
    response = _rendered(result.body, result.status_code, "application/json")
    if result.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


def _plainly_json(accept: str) -> bool:
    """Whether DRF would pick its JSON renderer for ``accept`` and render compact JSON:
    some media range matches JSON and none has a parameter but ``q`` (``indent=4``
    changes the rendering)."""
    ranges = [part.split(";") for part in accept.split(",")]
    if any(
        param.partition("=")[0].strip().lower() != "q" for _, *params in ranges for param in params
    ):
        return False
    return any(media.strip().lower() in _JSON_RANGES for media, *_ in ranges)


def _rendered(body: dict, status_code: int, content_type: str) -> HttpResponse:
    """``body`` as DRF's JSONRenderer renders it, with DRF's Allow header (one renderer:
    no ``Vary: Accept``)."""
    response = HttpResponse(_RENDERER.render(body), status=status_code, content_type=content_type)
    response["Allow"] = _PUBLISH_ALLOW
    return response


def _idempotency_key(request: Request) -> str | None:
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


class SubscriptionListCreateApi(APIView):
    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}

    @extend_schema(responses=s.SubscriptionOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        queryset = selectors.subscription_list(team=actor_of(request).team)
        return paginate(self, request, queryset, s.SubscriptionOutputSerializer, ("-id",))

    @extend_schema(
        request=s.SubscriptionCreateInputSerializer,
        responses={201: s.SubscriptionOutputSerializer, 200: s.SubscriptionOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        data = s.SubscriptionCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        dataset_id = values.pop("dataset_id", None)
        namespace, name = values.pop("namespace", None), values.pop("name", None)
        dataset = (
            selectors.dataset_get_by_id(dataset_id=dataset_id)
            if dataset_id is not None
            else selectors.dataset_get(namespace=namespace, name=name)
        )
        result = subscriptions.subscription_create(
            actor=actor_of(request), dataset=dataset, **values
        )
        body = dict(s.SubscriptionOutputSerializer(result.subscription).data)
        if result.endpoint_secret:
            body["endpoint_secret"] = result.endpoint_secret
        body["warnings"] = s.WarningOutputSerializer(result.warnings, many=True).data
        return Response(
            body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        )


class SubscriptionDeleteApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(responses={204: None})
    def delete(self, request: Request, subscription_id: int) -> Response:
        subscriptions.subscription_delete(actor=actor_of(request), subscription_id=subscription_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
