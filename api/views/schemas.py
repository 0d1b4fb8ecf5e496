"""A dataset's schema as observed, over time."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import selectors
from catalog.models import ApiKey

from ..serializers import schemas as s
from .base import paginate


class DatasetSchemaObservationListApi(APIView):
    """The dataset's schema timeline, newest first: one observation per change (the
    first row is its schema as last seen), from lineage schema facets and readiness
    publishes' ``metadata.schema``."""

    required_scope = ApiKey.Scope.READ

    @extend_schema(
        parameters=[s.SchemaObservationFilterSerializer],
        responses=s.SchemaObservationOutputSerializer(many=True),
    )
    def get(self, request: Request, dataset_id: int) -> Response:
        """List a dataset's observed schemas."""
        filters = s.SchemaObservationFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        queryset = selectors.schema_observation_list(dataset=dataset)
        return paginate(
            self,
            request,
            queryset,
            s.SchemaObservationOutputSerializer,
            ("-observed_at", "-id"),
        )
