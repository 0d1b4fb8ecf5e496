"""Change notices on a dataset: announced by its owner team, acknowledged by its consumer
teams, readable by any key with ``read``."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import change_notices, selectors
from catalog.models import ApiKey, ChangeNotice, Dataset

from ..serializers import catalog as s
from .base import actor_of, paginate


def _context(dataset: Dataset) -> dict:
    """What ``ChangeNoticeOutputSerializer`` needs: the dataset's consumer team slugs."""
    consumers = selectors.dataset_consumer_teams(dataset=dataset).values_list("slug", flat=True)
    return {"consumers": list(consumers)}


def _notice_body(notice: ChangeNotice) -> dict:
    notice = selectors.change_notice_get(dataset=notice.dataset, notice_id=notice.pk)
    return s.ChangeNoticeOutputSerializer(notice, context=_context(notice.dataset)).data


class ChangeNoticeListCreateApi(APIView):
    """A dataset's change notices, newest first; its owner team announces new ones."""

    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `not_dataset_owner`.",
            422: "`notice_period_too_short` (with `earliest_effective_at`).",
        }
    }

    @extend_schema(
        description="The dataset's change notices, newest announcement first, each with "
        "who has and who has not acknowledged it.",
        responses=s.ChangeNoticeOutputSerializer(many=True),
    )
    def get(self, request: Request, dataset_id: int) -> Response:
        """List a dataset's change notices."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        queryset = selectors.change_notice_list(dataset=dataset)
        return paginate(
            self,
            request,
            queryset,
            s.ChangeNoticeOutputSerializer,
            ("-announced_at", "-id"),
            context=_context(dataset),
        )

    @extend_schema(
        description="Announce a change (the owner team, with a manage key). effective_at is "
        "at least the dataset's change_notice_days away, or the answer is 422 "
        "notice_period_too_short naming earliest_effective_at; an emergency override "
        "needs an override_reason and is audited and flagged.",
        request=s.ChangeNoticeCreateInputSerializer,
        responses={201: s.ChangeNoticeOutputSerializer},
    )
    def post(self, request: Request, dataset_id: int) -> Response:
        """Announce a change notice (owner team)."""
        data = s.ChangeNoticeCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        notice = change_notices.change_notice_announce(
            actor=actor_of(request), dataset=dataset, now=timezone.now(), **data.validated_data
        )
        return Response(_notice_body(notice), status=status.HTTP_201_CREATED)


class ChangeNoticeDetailApi(APIView):
    """One change notice, with who has and who has not acknowledged it."""

    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.ChangeNoticeOutputSerializer)
    def get(self, request: Request, dataset_id: int, notice_id: int) -> Response:
        """Read a change notice."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        notice = selectors.change_notice_get(dataset=dataset, notice_id=notice_id)
        return Response(s.ChangeNoticeOutputSerializer(notice, context=_context(dataset)).data)


class ChangeNoticeAcknowledgementListCreateApi(APIView):
    """Who acknowledged a change notice; a consumer team acknowledges it."""

    required_scope = {"GET": ApiKey.Scope.READ, "POST": ApiKey.Scope.MANAGE}
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `not_a_consumer`.",
            409: "`change_notice_in_effect` or `acknowledgements_not_required`.",
        }
    }

    @extend_schema(
        description="Who acknowledged the notice, earliest first.",
        responses=s.ChangeNoticeAcknowledgementOutputSerializer(many=True),
    )
    def get(self, request: Request, dataset_id: int, notice_id: int) -> Response:
        """List a notice's acknowledgements."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        notice = selectors.change_notice_get(dataset=dataset, notice_id=notice_id)
        queryset = selectors.change_notice_acknowledgement_list(notice=notice)
        return paginate(
            self,
            request,
            queryset,
            s.ChangeNoticeAcknowledgementOutputSerializer,
            ("acknowledged_at", "id"),
        )

    @extend_schema(
        description="Acknowledge the notice for your team, a consumer team of the dataset "
        "(it declared it reads it); 201 the first time, 200 with the first "
        "acknowledgement after that.",
        request=None,
        responses={
            201: s.ChangeNoticeAcknowledgementOutputSerializer,
            200: s.ChangeNoticeAcknowledgementOutputSerializer,
        },
    )
    def post(self, request: Request, dataset_id: int, notice_id: int) -> Response:
        """Acknowledge a change notice (consumer team)."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        notice = selectors.change_notice_get(dataset=dataset, notice_id=notice_id)
        acknowledgement, created = change_notices.change_notice_acknowledge(
            actor=actor_of(request), notice=notice, now=timezone.now()
        )
        return Response(
            s.ChangeNoticeAcknowledgementOutputSerializer(acknowledgement).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ChangeNoticeApplyEarlyApi(APIView):
    """The owner team makes a notice that requires acknowledgements take effect now,
    before its effective_at, once every consumer team has acknowledged it."""

    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            403: "`permission_denied` (scope) or `not_dataset_owner`.",
            409: (
                "`acknowledgements_pending`, `acknowledgements_not_required` or "
                "`change_notice_in_effect`."
            ),
        }
    }

    @extend_schema(request=None, responses=s.ChangeNoticeOutputSerializer)
    def post(self, request: Request, dataset_id: int, notice_id: int) -> Response:
        """Make a change notice take effect early."""
        dataset = selectors.dataset_get_by_id(dataset_id=dataset_id)
        notice = selectors.change_notice_get(dataset=dataset, notice_id=notice_id)
        notice = change_notices.change_notice_apply_early(
            actor=actor_of(request), notice=notice, now=timezone.now()
        )
        return Response(_notice_body(notice))
