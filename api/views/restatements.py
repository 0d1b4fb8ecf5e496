"""Restatements of a dataset: opened, promoted and abandoned by its owner team (``manage``),
readable by any key with ``read``. Publishing into one is ``POST /readiness`` with
``restatement``."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import restatements, selectors
from catalog.models import ApiKey, Restatement

from ..serializers import catalog as s
from .base import actor_of, paginate


def _body(restatement: Restatement) -> dict:
    """The restatement as read back, with its per-partition progress."""
    fresh = selectors.restatement_get(dataset=restatement.dataset, restatement_id=restatement.pk)
    return s.RestatementOutputSerializer(fresh).data


class RestatementListCreateApi(APIView):
    """A dataset's restatements, newest first; its owner team opens new ones."""

    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `not_dataset_owner`.",
            409: "`restatement_exists`: another restatement is open.",
            422: "`invalid_restatement_range`.",
        }
    }

    @extend_schema(responses=s.RestatementOutputSerializer(many=True))
    def get(self, request: Request, dataset_id: int) -> Response:
        """List a dataset's restatements."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        queryset = selectors.restatement_list(dataset=dataset)
        return paginate(self, request, queryset, s.RestatementOutputSerializer, ("-id",))

    @extend_schema(
        description="Open a staged restatement of the partitions first_partition to "
        "last_partition (inclusive, all published before) as a new version. Publish each "
        "partition into it with POST /readiness and restatement: <id>; nothing readers see "
        "changes until it is promoted.",
        request=s.RestatementOpenInputSerializer,
        responses={201: s.RestatementOutputSerializer},
    )
    def post(self, request: Request, dataset_id: int) -> Response:
        """Open a restatement (owner team)."""
        data = s.RestatementOpenInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        restatement = restatements.restatement_open(
            actor=actor_of(request), dataset=dataset, now=timezone.now(), **data.validated_data
        )
        return Response(_body(restatement), status=status.HTTP_201_CREATED)


class RestatementDetailApi(APIView):
    """One restatement with each partition's readiness in it."""

    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.RestatementOutputSerializer)
    def get(self, request: Request, dataset_id: int, restatement_id: int) -> Response:
        """Read a restatement."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        restatement = selectors.restatement_get(dataset=dataset, restatement_id=restatement_id)
        return Response(s.RestatementOutputSerializer(restatement).data)


class RestatementPromoteApi(APIView):
    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `not_dataset_owner`.",
            409: (
                "`restatement_incomplete` (with `missing_partitions`) or the restatement is closed."
            ),
        }
    }

    @extend_schema(
        description="Make every partition of the range serve the restatement's revisions, in "
        "one transaction, and send one dataset.version_promoted. 409 "
        "restatement_incomplete names missing_partitions until every one is ready.",
        request=None,
        responses={200: s.RestatementOutputSerializer},
    )
    def post(self, request: Request, dataset_id: int, restatement_id: int) -> Response:
        """Promote a restatement."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        restatement = selectors.restatement_get(dataset=dataset, restatement_id=restatement_id)
        restatement = restatements.restatement_promote(
            actor=actor_of(request), restatement=restatement, now=timezone.now()
        )
        return Response(_body(restatement))


class RestatementAbandonApi(APIView):
    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `not_dataset_owner`.",
            409: "The restatement is closed.",
        }
    }

    @extend_schema(
        description="Abandon a staged restatement; nothing readers see changes.",
        request=None,
        responses={200: s.RestatementOutputSerializer},
    )
    def post(self, request: Request, dataset_id: int, restatement_id: int) -> Response:
        """Abandon a restatement."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        restatement = selectors.restatement_get(dataset=dataset, restatement_id=restatement_id)
        restatement = restatements.restatement_abandon(
            actor=actor_of(request), restatement=restatement, now=timezone.now()
        )
        return Response(_body(restatement))
