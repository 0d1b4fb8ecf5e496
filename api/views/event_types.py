"""The event catalog: every notification type Tidemark sends, with its JSON Schema and an
example (``catalog.event_types``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import event_types

from ..serializers import event_types as s


class EventTypeListApi(APIView):
    """Every event type, in a fixed order. Any valid key may read it: it describes
    Tidemark, not a team's data."""

    required_scope = None

    @extend_schema(operation_id="v1_event_types_list", responses=s.EventTypeListOutputSerializer)
    def get(self, request: Request) -> Response:
        """List the event types Tidemark sends."""
        return Response(s.EventTypeListOutputSerializer({"results": event_types.EVENT_TYPES}).data)


class EventTypeDetailApi(APIView):
    """One event type; a 404 ``event_type_not_found`` lists the known ones in ``known``."""

    required_scope = None

    @extend_schema(responses=s.EventTypeOutputSerializer)
    def get(self, request: Request, type: str) -> Response:
        """Read one event type."""
        event_type = event_types.event_type_require(type)
        return Response(s.EventTypeOutputSerializer(event_type).data)
