"""Claims (what a team owns in shared namespaces) and governance reports."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import selectors, services
from catalog.models import ApiKey

from ..serializers import governance as s
from .base import actor_of, paginate


class ClaimListCreateApi(APIView):
    """The caller's team's claims; claiming a job namespace makes the team's lineage
    events for its jobs verified."""

    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}

    @extend_schema(responses=s.ClaimOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        queryset = selectors.claim_list(team=actor_of(request).team)
        return paginate(self, request, queryset, s.ClaimOutputSerializer, ("-id",))

    @extend_schema(
        request=s.ClaimCreateInputSerializer,
        responses={201: s.ClaimOutputSerializer, 200: s.ClaimOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        data = s.ClaimCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        claim, created = services.claim_create(actor=actor_of(request), **data.validated_data)
        return Response(
            s.ClaimOutputSerializer(claim).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ClaimDeleteApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(responses={204: None})
    def delete(self, request: Request, claim_id: int) -> Response:
        services.claim_release(actor=actor_of(request), claim_id=claim_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


_VERIFIED = {"true": True, "false": False, "all": None}


class UndeclaredReadsReportApi(APIView):
    """Observed reads of registered datasets by a team with no subscription to them (per
    job), most recently seen first. A team sees its own rows; a key with the
    ``governance`` scope sees every team's (``team`` narrows them). Verified reads only by
    default; ``verified=false`` lists the unverified ones apart, ``verified=all`` both."""

    required_scope = (ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE)

    @extend_schema(
        parameters=[s.UndeclaredReadsFilterSerializer],
        responses=s.UndeclaredReadOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = s.UndeclaredReadsFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        own = actor_of(request).team
        governance = request.auth.has_scope(ApiKey.Scope.GOVERNANCE)
        slug = f.get("team")
        if slug and slug != own.slug and not governance:
            raise PermissionDenied("only a key with the 'governance' scope sees other teams")
        # Without a team filter, governance sees every team's rows, others their own.
        team = selectors.team_get(slug=slug) if slug else (None if governance else own)
        queryset = selectors.undeclared_reads_list(team=team, verified=_VERIFIED[f["verified"]])
        return paginate(
            self, request, queryset, s.UndeclaredReadOutputSerializer, ("-last_seen_at", "-id")
        )
