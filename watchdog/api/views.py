"""The watchdog API's views of monitors, channels and incidents. Thin: rules live in
``monitors``."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
)
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from .. import monitors
from ..models import Channel, Incident, Monitor
from .base import WatchdogApiView, caller_label, monitor_or_404
from .serializers import (
    ChannelCreatedOutputSerializer,
    ChannelSerializer,
    IncidentSerializer,
    MonitorDetailOutputSerializer,
    MonitorInputSerializer,
    MonitorOutputSerializer,
)


class MonitorListCreateApi(WatchdogApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("owner", description="Only this owner's monitors (exact)."),
            OpenApiParameter("external_id", description="The monitor a managing system knows."),
            OpenApiParameter("state", description="Only monitors in this stored state."),
        ],
        responses=MonitorOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """List monitors

        Every monitor, oldest first, at most 500, narrowed by the exact `owner`,
        `external_id` or `state` given.
        """
        queryset = Monitor.objects.prefetch_related("channels").order_by("id")
        for name in ("owner", "external_id", "state"):
            if name in request.query_params:
                queryset = queryset.filter(**{name: request.query_params[name]})
        return Response(MonitorOutputSerializer(queryset[:500], many=True).data)

    @extend_schema(request=MonitorInputSerializer, responses={201: MonitorDetailOutputSerializer})
    def post(self, request: Request) -> Response:
        """Create a monitor

        A period (`period_seconds`) or cron (`cron`, `timezone`) monitor with its grace,
        channels and links; the answer has its `ping_url`, next deadlines and warnings
        about its crons.
        """
        data = MonitorInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        channels = fields.pop("channel_ids", None)
        monitor = monitors.monitor_create(channels=channels, now=timezone.now(), **fields)
        return Response(MonitorDetailOutputSerializer(monitor).data, status=201)


class MonitorDetailApi(WatchdogApiView):
    @extend_schema(responses=MonitorDetailOutputSerializer)
    def get(self, request: Request, monitor_id: int) -> Response:
        """Read a monitor

        Its definition, state, schedule in words, next deadlines and open incidents.
        """
        return Response(MonitorDetailOutputSerializer(monitor_or_404(monitor_id)).data)

    @extend_schema(request=MonitorInputSerializer, responses=MonitorDetailOutputSerializer)
    def patch(self, request: Request, monitor_id: int) -> Response:
        """Change a monitor

        Fields left out stay as they are; `channel_ids` replaces the channels.
        """
        monitor = monitor_or_404(monitor_id)
        data = MonitorInputSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        channels = fields.pop("channel_ids", None)
        monitor = monitors.monitor_update(monitor, channels=channels, now=timezone.now(), **fields)
        return Response(MonitorDetailOutputSerializer(monitor).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, monitor_id: int) -> Response:
        """Delete a monitor

        With its pings and incidents.
        """
        monitor_or_404(monitor_id).delete()
        return Response(status=204)


class MonitorPauseApi(WatchdogApiView):
    @extend_schema(request=None, responses=MonitorDetailOutputSerializer)
    def post(self, request: Request, monitor_id: int) -> Response:
        """Pause a monitor

        A paused monitor is not judged and pages nobody until resumed; `paused_by` names
        the token.
        """
        monitor = monitors.monitor_pause(
            monitor_or_404(monitor_id), now=timezone.now(), by=caller_label(request)
        )
        return Response(MonitorDetailOutputSerializer(monitor).data)


class MonitorResumeApi(WatchdogApiView):
    @extend_schema(request=None, responses=MonitorDetailOutputSerializer)
    def post(self, request: Request, monitor_id: int) -> Response:
        """Resume a paused monitor

        It is judged again from now on.
        """
        monitor = monitors.monitor_resume(monitor_or_404(monitor_id), now=timezone.now())
        return Response(MonitorDetailOutputSerializer(monitor).data)


class ChannelListCreateApi(WatchdogApiView):
    @extend_schema(responses=ChannelSerializer(many=True))
    def get(self, request: Request) -> Response:
        """List channels

        Where monitors page or notify (PagerDuty, Slack, webhook, email), oldest first.
        """
        return Response(ChannelSerializer(Channel.objects.order_by("id"), many=True).data)

    @extend_schema(request=ChannelSerializer, responses={201: ChannelCreatedOutputSerializer})
    def post(self, request: Request) -> Response:
        """Create a channel

        Its `target` is checked for its `kind` (a routing key, a Slack webhook URL, an
        allowed address); a webhook channel's signing secret is in this answer only.
        """
        data = ChannelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        channel, secret = monitors.channel_create(**data.validated_data)
        body = ChannelSerializer(channel).data
        if secret:
            body["signing_secret"] = secret  # shown once
        return Response(body, status=201)


class IncidentListApi(WatchdogApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("open", description="`1` or `true`: only unresolved incidents."),
            OpenApiParameter("monitor_id", OpenApiTypes.INT, description="One monitor's."),
        ],
        responses=IncidentSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """List incidents

        Newest first, at most 500.
        """
        queryset = Incident.objects.select_related("monitor").order_by("-opened_at")
        if request.query_params.get("open") in ("1", "true"):
            queryset = queryset.filter(resolved_at__isnull=True)
        if "monitor_id" in request.query_params:
            try:
                queryset = queryset.filter(monitor_id=int(request.query_params["monitor_id"]))
            except ValueError as exc:
                raise exceptions.ValidationError({"monitor_id": "must be an integer"}) from exc
        return Response(IncidentSerializer(queryset[:500], many=True).data)
