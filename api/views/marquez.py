"""The Marquez-compatible read API (Marquez's API v1 paths and shapes, for the
``marquez-python`` client and Marquez's web UI): each view checks its query parameters
and calls one read of ``lineage.marquez``. Not in Tidemark's OpenAPI document: Marquez's
own (``spec/openapi.yml``) describes these operations; the differences are listed in the
docs' Marquez page."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import ApiKey
from lineage.errors import MarquezNotFound
from lineage.marquez import graph, paths, reads
from lineage.marquez.facets import identity_of

from ..permissions import MarquezRead
from ..serializers import marquez as s


def viewer_of(request: Request) -> reads.Viewer:
    """Whose runs the caller sees: its team's (every team's with the ``governance``
    scope); a keyless caller, let in by ``TIDEMARK_MARQUEZ_API_PUBLIC``, every team's."""
    if request.auth is None:
        return reads.Viewer(team=None, everything=True)
    return reads.Viewer(
        team=request.user.actor.team,
        everything=request.auth.has_scope(ApiKey.Scope.GOVERNANCE),
    )


def _query(serializer_class, request: Request) -> dict:
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return query.validated_data


class MarquezApi(APIView):
    """Base of the Marquez-compatible views: Marquez read access, excluded from
    Tidemark's schema."""

    permission_classes = [MarquezRead]
    required_scope = (ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE)


@extend_schema(exclude=True)
class MarquezNamespaceListApi(MarquezApi):
    """``GET /api/v1/namespaces``: ``{namespaces: [...]}``."""

    def get(self, request: Request) -> Response:
        page = _query(s.MarquezPageSerializer, request)
        return Response({"namespaces": reads.namespace_list(**page)})


@extend_schema(exclude=True)
class MarquezNamespacePathApi(MarquezApi):
    """``GET /api/v1/namespaces/{namespace}[/datasets[/{name}[/versions[/{version}]]]
    |/jobs[/{name}[/runs]]]``: one route, since namespaces and names hold slashes (the
    route is read by ``lineage.marquez.paths``)."""

    def get(self, request: Request, rest: str) -> Response:
        route = _route(request, rest)
        page = _query(s.MarquezPageSerializer, request)
        viewer = viewer_of(request)
        ns, name = route.namespace, route.name
        if route.kind == paths.NAMESPACE:
            return Response(reads.namespace_get(name=ns))
        if route.kind in (paths.DATASETS, paths.JOBS) and not reads.namespace_exists(ns):
            raise MarquezNotFound(f"no namespace {ns!r} in lineage")
        if route.kind == paths.DATASETS:
            total, found = reads.dataset_list(namespace=ns, **page)
            return Response({"totalCount": total, "datasets": found})
        if route.kind == paths.DATASET:
            return Response(reads.dataset_get(namespace=ns, name=name))
        if route.kind == paths.DATASET_VERSIONS:
            total, found = reads.dataset_version_list(
                viewer=viewer, namespace=ns, name=name, **page
            )
            return Response({"totalCount": total, "versions": found})
        if route.kind == paths.DATASET_VERSION:
            return Response(
                reads.dataset_version_get(
                    viewer=viewer, namespace=ns, name=name, version=route.version
                )
            )
        if route.kind == paths.JOBS:
            total, found = reads.job_list(viewer=viewer, namespace=ns, **page)
            return Response({"totalCount": total, "jobs": found})
        if route.kind == paths.JOB:
            return Response(reads.job_get(viewer=viewer, namespace=ns, name=name))
        total, found = reads.job_run_list(viewer=viewer, namespace=ns, name=name, **page)
        return Response({"totalCount": total, "runs": found})


def _route(request: Request, rest: str) -> paths.Route:
    """The route the path names: split exactly when the server kept the path as sent,
    else the first reading whose namespace, dataset or job exists (the first reading when
    none does, so the 404 names it). A dataset is looked up by its normalised identity,
    and a namespace's datasets by the namespace normalised (``catalog.naming``)."""
    raw = request.META.get("RAW_URI") or request.META.get("REQUEST_URI") or ""
    candidates = paths.exact_routes(raw) or paths.candidate_routes(rest)
    routes = [_normalised(route) for route in candidates]
    if not routes:
        raise MarquezNotFound(f"no Marquez operation at {request.path[:200]!r}")
    return next((route for route in routes if _exists(route)), routes[0])


def _normalised(route: paths.Route) -> paths.Route:
    if route.kind == paths.DATASETS:  # a dataset namespace: s3a://lake lists s3://lake's
        identity = identity_of(route.namespace, "x")
        return route if identity is None else paths.Route(route.kind, identity[0])
    if route.kind not in (paths.DATASET, paths.DATASET_VERSIONS, paths.DATASET_VERSION):
        return route
    identity = identity_of(route.namespace, route.name)
    if identity is None:
        return route
    return paths.Route(route.kind, *identity, route.version)


def _exists(route: paths.Route) -> bool:
    if route.kind in (paths.NAMESPACE, paths.DATASETS, paths.JOBS):
        return reads.namespace_exists(route.namespace)
    if route.kind in (paths.JOB, paths.JOB_RUNS):
        return reads.job_exists(route.namespace, route.name)
    return reads.dataset_exists(route.namespace, route.name)


@extend_schema(exclude=True)
class MarquezJobListApi(MarquezApi):
    """``GET /api/v1/jobs``: every namespace's jobs, ``{totalCount, jobs}``."""

    def get(self, request: Request) -> Response:
        page = _query(s.MarquezPageSerializer, request)
        total, found = reads.job_list(viewer=viewer_of(request), namespace=None, **page)
        return Response({"totalCount": total, "jobs": found})


@extend_schema(exclude=True)
class MarquezRunApi(MarquezApi):
    """``GET /api/v1/jobs/runs/{id}``: one run."""

    def get(self, request: Request, run_id: uuid.UUID) -> Response:
        return Response(reads.run_get(viewer=viewer_of(request), run_id=run_id))


@extend_schema(exclude=True)
class MarquezRunFacetsApi(MarquezApi):
    """``GET /api/v1/jobs/runs/{id}/facets?type=run|job``: ``{runId, facets}``."""

    def get(self, request: Request, run_id: uuid.UUID) -> Response:
        query = _query(s.MarquezRunFacetsQuerySerializer, request)
        return Response(
            reads.run_facets(viewer=viewer_of(request), run_id=run_id, kind=query["type"])
        )


def lineage_graph_get(request: Request) -> Response:
    """``GET /api/v1/lineage?nodeId=&depth=``: ``{graph: [...]}`` (served by the
    OpenLineage endpoint's view, whose path it shares)."""
    query = _query(s.MarquezLineageQuerySerializer, request)
    return Response(
        graph.lineage(viewer=viewer_of(request), node=query["nodeId"], depth=query["depth"])
    )


@extend_schema(exclude=True)
class MarquezColumnLineageApi(MarquezApi):
    """``GET /api/v1/column-lineage?nodeId=&depth=&withDownstream=``."""

    def get(self, request: Request) -> Response:
        query = _query(s.MarquezColumnLineageQuerySerializer, request)
        return Response(
            graph.column_lineage(
                node=query["nodeId"], depth=query["depth"], with_downstream=query["withDownstream"]
            )
        )


@extend_schema(exclude=True)
class MarquezSearchApi(MarquezApi):
    """``GET /api/v1/search?q=&filter=&sort=&limit=&namespace=``."""

    def get(self, request: Request) -> Response:
        query = _query(s.MarquezSearchQuerySerializer, request)
        return Response(
            graph.search(
                q=query["q"],
                kind=query.get("filter"),
                sort=query["sort"],
                limit=query["limit"],
                namespace=query.get("namespace"),
            )
        )
