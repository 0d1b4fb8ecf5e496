"""Catalog API views: one operation each, validating input and calling one service/selector."""

from __future__ import annotations

import dataclasses

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import declarations, errors, freshness_state, selectors, watchdog_feed
from catalog.models import ApiKey, AuditEntry
from catalog.services import datasets, subscriptions, teams
from httpkit.parsers import StrictJSONParser
from problems import FieldError, ValidationProblem

from ..openapi_examples import catalog as examples
from ..parsers import DeclarationYAMLParser
from ..serializers import catalog as s
from .base import actor_of, paginate


class MeApi(APIView):
    @extend_schema(responses=s.MeOutputSerializer)
    def get(self, request: Request) -> Response:
        """Who the presented API key acts for

        Any valid key may ask: its team (`slug`, `name`) and the key's own record (scopes,
        expiry, last use), never its secret.
        """
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
        """List your team's API keys.

        Needs the `manage` scope. Every key of the caller's team, revoked and expired ones
        included, newest first, one cursor page at a time; a key's secret is never shown
        again after its creation.
        """
        queryset = selectors.api_key_list(team=actor_of(request).team)
        return paginate(self, request, queryset, s.ApiKeyOutputSerializer, ("-id",))

    @extend_schema(
        request=s.ApiKeyCreateInputSerializer, responses={201: s.ApiKeyCreatedOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        """Create an API key (its token is shown once).

        Needs the `manage` scope. The new key belongs to the caller's team and holds the
        scopes asked for; `token` (`tm_<public id>_<secret>`) is in this response only, so
        store it now. `expires_at`, when given, must be in the future (a 400 otherwise).
        """
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
        """Revoke an API key.

        Needs the `manage` scope. The key is refused from now on (by other server
        processes within `API_KEY_CACHE_SECONDS`). Revoking a revoked key again is a 204
        that keeps the first revocation time; another team's key is a 404.
        """
        key = selectors.api_key_get(team=actor_of(request).team, public_id=public_id)
        teams.api_key_revoke(key=key, now=timezone.now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class DatasetListCreateApi(APIView):
    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}
    problem_statuses = {
        "POST": {
            409: "`dataset_exists`: a dataset with this namespace and name is registered.",
            422: (
                "A rule of the dataset's fields the document cannot express (e.g. "
                "`sunset_too_soon`)."
            ),
        }
    }

    @extend_schema(
        parameters=[s.DatasetListFilterSerializer], responses=s.DatasetOutputSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        """List and search datasets.

        Needs the `read` scope; every team's datasets are listed. Filter by `owner` (team
        slug), `namespace`, exact `name`, `criticality` or `lifecycle`, or search names and
        descriptions with `q`. One cursor page at a time, oldest registration first.
        """
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
        request=s.DatasetCreateInputSerializer, responses={201: s.DatasetDetailOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        """Register a dataset.

        Needs the `manage` scope; the caller's team becomes its owner. Namespace and name
        are normalised (e.g. a trailing slash dropped) before the uniqueness check, so
        registering the same dataset again is a 409 `dataset_exists`, as is a name under a
        prefix another team claims (`prefix_claimed`, naming the `owner`). The response
        carries the SLA's next deadlines and warnings about the declaration.
        """
        data = s.DatasetCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = datasets.dataset_register(actor=actor_of(request), **data.validated_data)
        return Response(_detail(dataset), status=status.HTTP_201_CREATED)


def _detail(dataset) -> dict:
    """A dataset's full representation: with its next deadlines and its SLA's warnings."""
    return dict(s.DatasetDetailOutputSerializer(dataset, context={"now": timezone.now()}).data)


class DatasetDetailApi(APIView):
    required_scope = {"GET": ApiKey.Scope.READ, "PATCH": ApiKey.Scope.MANAGE}
    problem_statuses = {
        "PATCH": {
            403: "`permission_denied` (scope) or `not_dataset_owner`.",
            409: "`dataset_retired` or `lifecycle_notice_required`.",
            422: "A rule of the dataset's fields (e.g. `sunset_too_soon`).",
        }
    }

    @extend_schema(responses=s.DatasetDetailOutputSerializer)
    def get(self, request: Request, dataset_id: int) -> Response:
        """Read a dataset.

        Needs the `read` scope; any team's dataset can be read. For the owner team the
        response also carries `badge_url` (a freshness badge to embed) and, when the
        watchdog follows the dataset, `pipeline_ping_url`.
        """
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        body = _detail(dataset)
        if dataset.owner_id == actor_of(request).team.pk:  # the badge URL is the owner's to share
            body["badge_url"] = request.build_absolute_uri(f"/badge/{dataset.badge_token}.svg")
            if ping_url := watchdog_feed.pipeline_ping_url(dataset):
                body["pipeline_ping_url"] = ping_url
        return Response(body)

    @extend_schema(
        request=s.DatasetUpdateInputSerializer, responses=s.DatasetDetailOutputSerializer
    )
    def patch(self, request: Request, dataset_id: int) -> Response:
        """Change a dataset (owner team).

        Needs the `manage` scope and the caller's team must own the dataset (a 403
        `not_dataset_owner` otherwise). Fields left out stay as they are; changes to
        audited fields are written to the audit trail. A 409 means the dataset is retired,
        or that a lifecycle step needs a change notice first (`lifecycle_notice_required`).
        """
        data = s.DatasetUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        dataset = datasets.dataset_update(
            actor=actor_of(request), dataset=dataset, **data.validated_data
        )
        return Response(_detail(dataset))


class CatalogApplyApi(APIView):
    """Declarations as code: show the plan that brings the calling team's datasets to a
    declaration (``team`` + ``datasets``, YAML or JSON) and, with ``dry_run=false``, apply
    it all or nothing through the same rules as the dataset endpoints."""

    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `declaration_for_another_team`.",
            409: (
                "A dataset of the declaration conflicts with the catalog (e.g. `dataset_exists` "
                "under another team)."
            ),
        }
    }
    parser_classes = [DeclarationYAMLParser, StrictJSONParser]

    @extend_schema(
        parameters=[s.CatalogApplyQuerySerializer],
        request={"application/yaml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        responses=s.CatalogPlanOutputSerializer,
        # Examples here replace the serializer's, so the plan's is repeated.
        examples=[
            OpenApiExample(
                "A declaration in YAML",
                value=examples.CATALOG_DECLARATION_YAML,
                media_type="application/yaml",
                request_only=True,
            ),
            OpenApiExample(
                "The same declaration in JSON",
                value=examples.CATALOG_DECLARATION_JSON,
                media_type="application/json",
                request_only=True,
            ),
            *examples.CATALOG_PLAN_OUTPUT,
        ],
    )
    def post(self, request: Request) -> Response:
        """Plan or apply a catalog declaration."""
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
        """A dataset's audit trail.

        Needs the `read` scope. Who changed what and when (registration, field changes,
        ownership, lifecycle overrides), newest first, one cursor page at a time.
        """
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        queryset = AuditEntry.objects.filter(dataset=dataset)
        return paginate(self, request, queryset, s.AuditEntryOutputSerializer, ("-id",))


class DatasetFreshnessApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.FreshnessOutputSerializer)
    def get(self, request: Request, dataset_id: int) -> Response:
        """A dataset's freshness, arrival profile, forecast, root cause and blast radius.

        Needs the `read` scope. `state` says whether the partition now due has arrived
        (`fresh`, `late`, ...); the arrival profile and forecast are learnt from past
        arrivals; when late, `caused_by` names the late upstream it waits for, and
        `blast_radius` lists the downstream datasets and teams it holds up.
        """
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        now = timezone.now()
        state = freshness_state.dataset_freshness(dataset, now=now)
        profile = selectors.dataset_arrival_profile(dataset=dataset, now=now)
        forecast = selectors.dataset_forecast(dataset=dataset, now=now, profile=profile)
        late = state.partition_due if state.state == "late" else None
        body = {
            **dataclasses.asdict(state),
            "arrival_profile": profile,
            "forecast": forecast,
            "caused_by": selectors.late_cause(dataset=dataset, partition=late),
            "blast_radius": selectors.blast_radius(dataset=dataset),
        }
        return Response(s.FreshnessOutputSerializer(body).data)


class DatasetPollApi(APIView):
    """The fallback poll's view of a dataset: its storage group, cadence and recent sweeps
    with their cost (List calls, pages, objects) and finds."""

    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.PollOutputSerializer)
    def get(self, request: Request, dataset_id: int) -> Response:
        """A dataset's storage polling."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        return Response(s.PollOutputSerializer(selectors.dataset_poll(dataset=dataset)).data)


class PartitionListApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(
        parameters=[s.PartitionListFilterSerializer],
        responses=s.PartitionOutputSerializer(many=True),
    )
    def get(self, request: Request, dataset_id: int) -> Response:
        """List a dataset's partitions.

        Needs the `read` scope. Newest period first, one cursor page at a time; filter by
        the current revision's `state` (`missing`: expected but never published) or by
        logical period (`logical_from` inclusive, `logical_to` exclusive).
        """
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
        """The newest ready partition."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        partition = selectors.partition_latest_ready(dataset=dataset, now=timezone.now())
        if partition is None:
            raise errors.PartitionNotFound(f"{dataset} has no ready partition yet")
        return Response(s.PartitionOutputSerializer(partition).data)


class PartitionDetailApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.PartitionOutputSerializer)
    def get(self, request: Request, dataset_id: int, key: str) -> Response:
        """Read one partition.

        Needs the `read` scope. `key` is the partition's key as published (e.g.
        `2026-11-28`); the response gives its current revision and that revision's
        state and times.
        """
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        partition = selectors.partition_get(dataset=dataset, key=key)
        return Response(s.PartitionOutputSerializer(partition).data)


class SubscriptionListCreateApi(APIView):
    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}
    problem_statuses = {
        "POST": {
            404: "`dataset_not_found` (with `suggestion`).",
            409: "`subscription_exists`: the same dataset and job with another `endpoint_url` "
            "(add it with POST /api/v1/subscriptions/{id}/endpoints).",
        }
    }

    @extend_schema(responses=s.SubscriptionOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        """List your team's subscriptions.

        Needs the `read` scope. The caller's team's subscriptions, newest first, one
        cursor page at a time, with their filters, need-by and endpoint.
        """
        queryset = selectors.subscription_list(team=actor_of(request).team)
        return paginate(self, request, queryset, s.SubscriptionOutputSerializer, ("-id",))

    @extend_schema(
        description="Declare that your team (optionally one of its jobs) reads a dataset, "
        "with a webhook endpoint and filters. Declaring the same dataset and job again with "
        "one of its endpoints' URLs (or none) is a 200 that updates the filters. It never "
        "moves the subscription to another URL, nor adds one: that is a 409 "
        "subscription_exists whose existing member gives the subscription's id, "
        "endpoint_url and endpoints_path. A subscription delivers to several endpoints "
        "when you add them (POST /api/v1/subscriptions/{id}/endpoints): to move it, add "
        "the new URL, then remove the old one.",
        request=s.SubscriptionCreateInputSerializer,
        responses={
            201: OpenApiResponse(s.SubscriptionOutputSerializer, "a new subscription"),
            200: OpenApiResponse(s.SubscriptionOutputSerializer, "declared again (same URL)"),
        },
    )
    def post(self, request: Request) -> Response:
        """Declare a subscription to a dataset."""
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


class SubscriptionDetailApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(
        description="Change a subscription's filters (event_types, partition_pattern, "
        "newest_only) or need-by (need_by_cron, need_by_timezone); fields left out stay as "
        "they are. Its endpoints change under /api/v1/subscriptions/{id}/endpoints, not "
        "here. The response carries warnings about the need-by (e.g. "
        "need_by_before_sla).",
        request=s.SubscriptionUpdateInputSerializer,
        responses=s.SubscriptionOutputSerializer,
    )
    def patch(self, request: Request, subscription_id: int) -> Response:
        """Change a subscription's filters or need-by."""
        data = s.SubscriptionUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = subscriptions.subscription_update(
            actor=actor_of(request), subscription_id=subscription_id, **data.validated_data
        )
        body = dict(s.SubscriptionOutputSerializer(result.subscription).data)
        body["warnings"] = s.WarningOutputSerializer(result.warnings, many=True).data
        return Response(body)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, subscription_id: int) -> Response:
        """Delete a subscription.

        Needs the `manage` scope. No further notifications are made for it; another
        team's subscription is a 404 (it is not revealed).
        """
        subscriptions.subscription_delete(actor=actor_of(request), subscription_id=subscription_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
