"""Lineage API views: the OpenLineage endpoint, reads of runs and their raw events, and
the lineage graph."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ParseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import selectors as catalog_selectors
from catalog.models import ApiKey
from lineage import selectors
from lineage.services import receiving

from ..parsers import OpenLineageJSONParser
from ..permissions import MarquezRead
from ..serializers import lineage as s
from . import marquez
from .base import actor_of, paginate


class LineageEventReceiveApi(APIView):
    """Receive one OpenLineage event (spec 2-0-2), as Marquez's endpoint does.

    The event is checked (required identifiers: 422 naming the field; a bad eventTime:
    400), stored raw and processed asynchronously: 201 means stored, 200 that this team
    sent the same event before. It is attributed to the key's team and verified when that
    team claims the job namespace. The body may be gzip-compressed (``Content-Encoding:
    gzip``); as sent and inflated it is bounded by ``TIDEMARK_LINEAGE_MAX_EVENT_BYTES``
    (413 beyond).
    """

    required_scope = {
        "POST": ApiKey.Scope.LINEAGE,
        "GET": (ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE),
    }
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `job_namespace_of_another_team`.",
            422: "`invalid_openlineage_event`, naming the field.",
        }
    }
    parser_classes = [OpenLineageJSONParser]

    def get_permissions(self):
        # GET is Marquez's lineage graph, which shares this path: Marquez read access.
        if self.request.method in ("GET", "HEAD"):
            return [MarquezRead()]
        return super().get_permissions()

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        """Marquez's ``GET /api/v1/lineage?nodeId=&depth=`` (``api.views.marquez``)."""
        return marquez.lineage_graph_get(request)

    @extend_schema(
        request=s.OpenLineageEventSerializer,
        responses={
            201: s.LineageEventReceivedOutputSerializer,
            200: s.LineageEventReceivedOutputSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        """Receive an OpenLineage event."""
        if request.stream is None:
            raise ParseError("the body is empty: send one OpenLineage event as JSON")
        payload = request.data
        actor = actor_of(request)
        result = receiving.lineage_event_receive(
            actor=actor,
            payload=payload,
            content_encoding=request.headers.get("Content-Encoding", "").strip().lower(),
            body_bytes=_content_length(request),
            now=timezone.now(),
        )
        event = result.event
        # The output serializer's shape, built directly: this is the ingest hot path, and
        # instantiating the serializer (a deep copy of its fields) cost more than the rest
        # of the response; tests compare the body with the serializer's.
        data = {
            "id": event.pk,
            "kind": event.kind,
            "event_type": event.event_type or None,
            "event_time": _datetime_json(event.event_time),
            "event_time_assumed_utc": event.event_time_assumed_utc,
            "run_id": str(event.run_id) if event.run_id is not None else None,
            "job": {"namespace": event.job_namespace, "name": event.job_name}
            if event.job_namespace
            else None,
            "team": actor.team.slug,
            "verified": event.verified,
            "duplicate": not result.created,
            "problems": event.problems,
        }
        return Response(data, status=201 if result.created else 200)


def _datetime_json(value: datetime) -> str:
    """``value`` as DRF's DateTimeField renders it here (UTC, ``Z`` for +00:00)."""
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _content_length(request: Request) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


class RunListApi(APIView):
    """Runs of one job (``job_namespace`` and ``job_name`` as query parameters, exactly as
    the events named them), newest first: the caller's team's runs, or every team's with
    the ``governance`` scope."""

    required_scope = (ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE)

    @extend_schema(
        parameters=[s.RunListFilterSerializer], responses=s.RunOutputSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        """List a job's runs."""
        filters = s.RunListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        queryset = selectors.run_list(
            team=actor_of(request).team,
            everything=request.auth.has_scope(ApiKey.Scope.GOVERNANCE),
            job_namespace=f["job_namespace"],
            job_name=f["job_name"],
            state=f.get("state"),
        )
        return paginate(self, request, queryset, s.RunOutputSerializer, ("-id",))


class RunEventListApi(APIView):
    """The raw OpenLineage events received for one run (by its ``runId``), in event-time
    order, with how each was processed."""

    required_scope = (ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE)

    @extend_schema(responses=s.LineageEventOutputSerializer(many=True))
    def get(self, request: Request, run_id: uuid.UUID) -> Response:
        """List a run's raw events."""
        run = selectors.run_get(
            team=actor_of(request).team,
            everything=request.auth.has_scope(ApiKey.Scope.GOVERNANCE),
            run_id=run_id,
        )
        queryset = selectors.run_event_list(run=run)
        return paginate(
            self, request, queryset, s.LineageEventOutputSerializer, ("event_time", "id")
        )


class LineageGraphApi(APIView):
    """The lineage graph around one dataset (``namespace`` + ``name``) or one job
    (``job_namespace`` + ``job_name``): datasets and jobs as nodes, reads (dataset -> job)
    and writes (job -> dataset) as edges, to ``depth`` job hops (default 2, at most 5)
    ``upstream``, ``downstream`` or ``both`` (default), from observed usage of every team.
    Verified edges only unless ``include_unverified=true``."""

    required_scope = (ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE)
    problem_statuses = {"GET": {404: "`lineage_node_not_found`."}}

    @extend_schema(
        parameters=[s.LineageGraphFilterSerializer], responses=s.LineageGraphOutputSerializer
    )
    def get(self, request: Request) -> Response:
        """The lineage graph around a dataset or job."""
        filters = s.LineageGraphFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        result = catalog_selectors.lineage_graph(
            dataset=(f["namespace"], f["name"]) if "namespace" in f else None,
            job=(f["job_namespace"], f["job_name"]) if "job_namespace" in f else None,
            depth=f["depth"],
            direction=f["direction"],
            include_unverified=f["include_unverified"],
        )
        return Response(s.LineageGraphOutputSerializer(result).data)
