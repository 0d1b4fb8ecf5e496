"""Claims (what a team owns in shared namespaces) and governance reports."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from catalog import selectors
from catalog.models import ApiKey, Team
from catalog.services import ownership

from ..pagination import CursorPagination
from ..serializers import governance as s
from .base import actor_of, paginate


class ClaimListCreateApi(APIView):
    """The caller's team's claims; claiming a job namespace makes the team's lineage
    events for its jobs verified."""

    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}
    problem_statuses = {"POST": {409: "`claim_taken`, `claim_over_datasets` or `prefix_claimed`."}}

    @extend_schema(responses=s.ClaimOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        """List your team's claims."""
        queryset = selectors.claim_list(team=actor_of(request).team)
        return paginate(self, request, queryset, s.ClaimOutputSerializer, ("-id",))

    @extend_schema(
        request=s.ClaimCreateInputSerializer,
        responses={201: s.ClaimOutputSerializer, 200: s.ClaimOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        """Claim a namespace, role or prefix."""
        data = s.ClaimCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        claim, created = ownership.claim_create(actor=actor_of(request), **data.validated_data)
        return Response(
            s.ClaimOutputSerializer(claim).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ClaimDeleteApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(responses={204: None})
    def delete(self, request: Request, claim_id: int) -> Response:
        """Release a claim.

        Needs the `manage` scope. Events already received keep the verification they were
        given when they arrived; the release is audited as `claim.released`. Another
        team's claim is a 404 (it is not revealed).
        """
        ownership.claim_release(actor=actor_of(request), claim_id=claim_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DatasetTransferListApi(APIView):
    """The ownership transfers the caller's team is party to, proposing or receiving,
    newest first; ``state`` narrows them (``proposed``: what awaits a decision)."""

    required_scope = ApiKey.Scope.READ

    @extend_schema(
        parameters=[s.DatasetTransferListFilterSerializer],
        responses=s.DatasetTransferListOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """List your team's ownership transfers."""
        filters = s.DatasetTransferListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        queryset = selectors.dataset_transfer_list(
            team=actor_of(request).team, state=filters.validated_data.get("state")
        )
        return paginate(
            self, request, queryset, s.DatasetTransferListOutputSerializer, ("-created_at", "-id")
        )


class DatasetTransferCreateApi(APIView):
    """The dataset's owner team proposes handing it to another team."""

    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `not_dataset_owner`.",
            409: "`transfer_pending`, or the receiving team owns it already.",
        }
    }

    @extend_schema(
        request=s.DatasetTransferCreateInputSerializer,
        responses={201: s.DatasetTransferOutputSerializer},
    )
    def post(self, request: Request, dataset_id: int) -> Response:
        """Propose an ownership transfer (owner team)."""
        data = s.DatasetTransferCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        transfer = ownership.dataset_transfer_propose(
            actor=actor_of(request), dataset=dataset, **data.validated_data
        )
        return Response(
            s.DatasetTransferOutputSerializer(transfer).data, status=status.HTTP_201_CREATED
        )


class DatasetTransferAcceptApi(APIView):
    """The receiving team accepts a transfer: the dataset becomes its own."""

    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope), or not the receiving team.",
            409: "`transfer_closed`.",
        }
    }

    @extend_schema(request=None, responses={200: s.DatasetTransferOutputSerializer})
    def post(self, request: Request, dataset_id: int, transfer_id: int) -> Response:
        """Accept an ownership transfer (receiving team)."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        ownership.dataset_transfer_accept(
            actor=actor_of(request), dataset=dataset, transfer_id=transfer_id
        )
        transfer = selectors.dataset_transfer_get(dataset=dataset, transfer_id=transfer_id)
        return Response(s.DatasetTransferOutputSerializer(transfer).data)


class DatasetTransferCancelApi(APIView):
    """Either side cancels an open transfer."""

    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope), or not a party to the transfer.",
            409: "`transfer_closed`.",
        }
    }

    @extend_schema(request=None, responses={200: s.DatasetTransferOutputSerializer})
    def post(self, request: Request, dataset_id: int, transfer_id: int) -> Response:
        """Cancel an ownership transfer."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        transfer = ownership.dataset_transfer_cancel(
            actor=actor_of(request), dataset=dataset, transfer_id=transfer_id
        )
        return Response(s.DatasetTransferOutputSerializer(transfer).data)


def _report_team(request: Request, slug: str | None):
    """The team whose rows a report shows: a team sees its own; a key with the
    ``governance`` scope sees every team's (None), or ``slug``'s when given.

    Raises:
        PermissionDenied: ``slug`` names another team and the key lacks ``governance``.
        TeamNotFound: no team ``slug`` (404).
    """
    own = actor_of(request).team
    governance = request.auth.has_scope(ApiKey.Scope.GOVERNANCE)
    if slug and slug != own.slug and not governance:
        raise PermissionDenied("only a key with the 'governance' scope sees other teams")
    return selectors.team_get(slug=slug) if slug else (None if governance else own)


def _report_filters(request: Request, serializer_class) -> tuple[dict, Team | None]:
    """A report's query parameters validated by ``serializer_class`` (a 400 naming the
    field otherwise), and the team whose rows it shows (``_report_team`` of ``team``)."""
    filters = serializer_class(data=request.query_params)
    filters.is_valid(raise_exception=True)
    return filters.validated_data, _report_team(request, filters.validated_data.get("team"))


_VERIFIED = {"true": True, "false": False, "all": None}


class _TeamReportApi(APIView):
    """What every governance report shares: the scopes, the problems, ``team`` and the
    other query parameters of ``filter_serializer`` (validated by ``_report_filters``),
    and one cursor page of ``rows()`` in ``ordering`` rendered with ``output_serializer``.

    A report subclasses it with its own docstring (the operation's description) and sets
    ``summary``, ``filter_serializer``, ``output_serializer`` and ``ordering``, and
    defines ``rows()``; its OpenAPI operation is annotated from these when the class is
    made, so no report repeats the ``get``.
    """

    required_scope = (ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE)
    problem_statuses = {
        "GET": {
            403: (
                "`permission_denied`: the scope, or `team` names another team without the "
                "`governance` scope."
            ),
            404: "`team_not_found`: no team has the slug given as `team`.",
        }
    }
    #: The operation's summary (OpenAPI), with no closing full stop.
    summary: str
    filter_serializer: type[Serializer] = s.ReportFilterSerializer
    output_serializer: type[Serializer]
    #: The cursor pagination's ordering: field names, ``-`` for descending.
    ordering: tuple[str, ...]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        extend_schema(
            summary=cls.summary,
            parameters=[cls.filter_serializer],
            responses=cls.output_serializer(many=True),
        )(cls)

    def rows(self, *, filters: dict, team: Team | None):
        """The report's rows (a QuerySet) for ``filters`` (the validated query
        parameters) and ``team`` (None: every team's)."""
        raise NotImplementedError

    def page_loaded(self, *, page: list, team: Team | None) -> list:
        """The rows to render for the page of ``rows()`` loaded: the page itself by
        default."""
        return page

    def get(self, request: Request) -> Response:
        filters, team = _report_filters(request, self.filter_serializer)
        paginator = CursorPagination()
        paginator.ordering = self.ordering
        page = paginator.paginate_queryset(
            self.rows(filters=filters, team=team), request, view=self
        )
        rendered = self.page_loaded(page=page, team=team)
        return paginator.get_paginated_response(self.output_serializer(rendered, many=True).data)


class UndeclaredReadsReportApi(_TeamReportApi):
    """Observed reads of registered datasets by a team with no subscription to them (per
    job), most recently seen first. A team sees its own rows; a key with the
    ``governance`` scope sees every team's (``team`` narrows them). Verified reads only by
    default; ``verified=false`` lists the unverified ones apart, ``verified=all`` both."""

    summary = "Report: reads without a subscription"
    filter_serializer = s.UndeclaredReadsFilterSerializer
    output_serializer = s.UndeclaredReadOutputSerializer
    ordering = ("-last_seen_at", "-id")

    def rows(self, *, filters, team):
        return selectors.undeclared_reads_list(team=team, verified=_VERIFIED[filters["verified"]])


class StaleDeclarationsReportApi(_TeamReportApi):
    """Stale declarations: subscriptions whose team has not been seen reading the dataset
    (verified usage by any of its jobs) for ``days`` days (``TIDEMARK_STALE_DECLARATION_DAYS``,
    30 by default), including those never seen once they are that old; oldest declaration
    first. A team sees its own rows; a ``governance`` key every team's (``team`` narrows)."""

    summary = "Report: subscriptions nobody reads"
    filter_serializer = s.StaleDeclarationsFilterSerializer
    output_serializer = s.StaleDeclarationOutputSerializer
    ordering = ("created_at", "id")

    def rows(self, *, filters, team):
        return selectors.stale_declarations_list(
            team=team,
            days=filters.get("days") or settings.TIDEMARK_STALE_DECLARATION_DAYS,
            now=timezone.now(),
        )


class UndeclaredWritesReportApi(_TeamReportApi):
    """Verified writes to a registered dataset by a team that does not own it (per job),
    most recently seen first. A team sees its own rows; a ``governance`` key every
    team's (``team`` narrows)."""

    summary = "Report: writes by other teams than the owner"
    output_serializer = s.UndeclaredWriteOutputSerializer
    ordering = ("-last_seen_at", "-id")

    def rows(self, *, filters, team):
        return selectors.undeclared_writes_list(team=team)


class UncataloguedDatasetsReportApi(_TeamReportApi):
    """Dataset identities seen in verified lineage that the catalog does not know, with
    the teams and jobs seen reading and writing each, most recently seen first: what is
    ready to register. A team sees the identities its own jobs used (and only its own
    usage); a ``governance`` key every team's (``team`` narrows)."""

    summary = "Report: datasets lineage saw that are not registered"
    output_serializer = s.UncataloguedDatasetOutputSerializer
    ordering = ("-last_seen", "dataset_namespace", "dataset_name")

    def rows(self, *, filters, team):
        return selectors.uncatalogued_datasets_list(team=team)

    def page_loaded(self, *, page, team):
        # Who read and wrote each identity is one query for the page, not one per row.
        selectors.uncatalogued_usage_attach(team=team, rows=page)
        return page


class UnannouncedChangesReportApi(_TeamReportApi):
    """Unannounced breaking schema changes: lineage or a readiness publish showed a
    dataset's schema lose or retype a column, and no breaking schema change notice of the
    dataset covered that date (announced before it, in effect at it, at most
    ``TIDEMARK_SCHEMA_NOTICE_COVERS_DAYS`` days past its effective time). Most recently
    observed first. A team sees its own datasets' changes; a ``governance`` key every
    team's (``team`` narrows to one owner team)."""

    summary = "Report: schema changes without a change notice"
    output_serializer = s.UnannouncedChangeOutputSerializer
    ordering = ("-observed_at", "-id")

    def rows(self, *, filters, team):
        return selectors.unannounced_schema_changes(teams=None if team is None else [team])


class RunConflictsReportApi(_TeamReportApi):
    """Run conflicts: lineage events kept out of a run they named (another job's event,
    an unverified event for a run verified events made, another team's unverified
    report), most recently detected first. Each event is kept and listed under the run's
    events; it changed nothing of the run. A team sees the conflicts it is party to (as
    sender or as the team the run is made of); a ``governance`` key every team's
    (``team`` narrows)."""

    summary = "Report: events kept out of their run"
    output_serializer = s.RunConflictOutputSerializer
    ordering = ("-detected_at", "-id")

    def rows(self, *, filters, team):
        return selectors.run_conflict_list(team=team)


class NeededEarlierReportApi(_TeamReportApi):
    """Datasets their consumers need earlier than their producers promise: subscriptions
    whose need-by falls before the dataset's SLA deadline for the same partition (over
    the next 3 deadlines), largest gap first. Such a consumer is told ``dataset.late`` at
    its own need-by; the producer is not paged before its SLA. A team sees the rows it is
    party to (as producer or consumer); a ``governance`` key every team's (``team``
    narrows)."""

    summary = "Report: consumers needing data before it is promised"
    output_serializer = s.NeededEarlierOutputSerializer
    ordering = ("-need_by_gap_seconds", "id")

    def rows(self, *, filters, team):
        return selectors.need_by_before_sla_list(team=team)

    def page_loaded(self, *, page, team):
        # Each row's next need-by and SLA deadline, computed for the page alone.
        return selectors.needed_by_rows(page, now=timezone.now())
