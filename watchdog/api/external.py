"""The API a managing system (the catalog) uses: its monitors by its own ids, created or
updated from a definition, and pinged."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from httpkit.client_address import client_address

from .. import monitors, pings
from ..models import Monitor, Ping
from . import examples as api_examples
from .base import PingProblem, TooEarly, WatchdogApiView, caller_label
from .serializers import (
    ExternalMonitorInputSerializer,
    MonitorDetailOutputSerializer,
)


class ExternalMonitorApi(WatchdogApiView):
    """Create or update the monitor a managing system (the catalog) knows by its own id.
    Its channels are given by kind and target and created on first use."""

    # The id is the managing system's: an unknown one is created, never a 404.
    problem_statuses = {"POST": {404: None}}

    @extend_schema(
        request=ExternalMonitorInputSerializer,
        responses={
            200: OpenApiResponse(MonitorDetailOutputSerializer, "created or updated"),
            208: OpenApiResponse(
                MonitorDetailOutputSerializer, "an older `version` arrived late: unchanged"
            ),
        },
    )
    def post(self, request: Request, external_id: str) -> Response:
        """Create or update a managed monitor

        The monitor a managing system (the catalog) knows as `external_id`, with its
        channels by kind and target; a definition whose `version` is older than the
        monitor's is answered 208 and changes nothing.
        """
        monitor, changed = external_monitor_apply(
            external_id, request.data, now=timezone.now(), by=caller_label(request)
        )
        return Response(MonitorDetailOutputSerializer(monitor).data, status=200 if changed else 208)


def external_monitor_apply(
    external_id: str, definition: object, *, now: datetime, by: str
) -> tuple[Monitor, bool]:
    """Validate a managing system's definition of its monitor ``external_id`` (the body
    ``ExternalMonitorApi`` takes) and create or update the monitor; ``active`` pauses it,
    or lifts a pause that a definition made (a person's pause sticks until resumed);
    ``ready_partitions`` (at most ``MAX_READY_PARTITIONS`` keys) are recorded as success
    pings in the same transaction.

    Args:
        now: aware UTC instant the change happens at.
        by: who changes it, kept as ``paused_by`` when it pauses the monitor.

    Returns:
        ``(monitor, changed)``; ``changed`` False when an older version arrived late.

    Raises:
        rest_framework's ValidationError: the definition breaks a field's rule (400).
        ValidationProblem: a schedule rule (400).
    """
    data = ExternalMonitorInputSerializer(data=definition)
    data.is_valid(raise_exception=True)
    fields = dict(data.validated_data)
    version = fields.pop("version", "")
    active = fields.pop("active")
    ready_partitions = fields.pop("ready_partitions", None)
    if fields.get("ping_key") is None:
        fields.pop("ping_key", None)
    owner = fields.get("owner", "")
    channels = [
        monitors.channel_for(
            kind=spec["kind"],
            target=spec["target"],
            owner=owner,
            name=spec.get("name") or f"{owner or 'tidemark'} {spec['kind']}",
        )
        for spec in fields.pop("channels", [])
    ]
    if fields.get("system"):
        channels += monitors.operators_channels()
    return monitors.monitor_upsert_external(
        external_id=external_id[:200],
        version=version,
        channels=channels,
        now=now,
        active=active,
        by=by,
        ready_partitions=ready_partitions,
        **fields,
    )


@extend_schema_serializer(examples=api_examples.PING_RESULT)
class PingResultSerializer(serializers.Serializer):
    """Documents a ping's answer."""

    result = serializers.CharField(help_text="What the ping did, e.g. `ok`.")


class ExternalPingApi(WatchdogApiView):
    """A success ping for the monitor known by ``external_id`` (the catalog's feed of ready
    partitions, ``?partition=``). 425 until the monitor exists, so a feed that overtook
    its monitor's creation is retried rather than dropped."""

    problem_statuses = {
        "POST": {
            400: "`ping_rejected`: a partition of another format than the monitor's.",
            422: "`ping_rejected`: the partition's period has not started (`rule` "
            "`partition_started`, `starts_at`, `newest_accepted_partition`).",
            425: "`monitor_not_provisioned`: no monitor has this `external_id` yet; retry.",
            429: "`ping_rejected`: over the monitor's ping rate; retry after `Retry-After`.",
        }
    }

    @extend_schema(
        request=None,
        parameters=[
            OpenApiParameter("partition", description="The partition that is ready, if any.")
        ],
        responses=PingResultSerializer,
    )
    def post(self, request: Request, external_id: str) -> Response:
        """Ping a managed monitor (success)."""
        monitor = Monitor.objects.filter(external_id=external_id).only("ping_key").first()
        if monitor is None:
            raise TooEarly(f"no monitor {external_id!r} yet")
        try:
            outcome = pings.record(
                ping_key=monitor.ping_key,
                ping=pings.PingInput(
                    kind=Ping.Kind.SUCCESS,
                    method="POST",
                    partition=request.query_params.get("partition", ""),
                    remote_addr=client_address(request),
                    user_agent=request.META.get("HTTP_USER_AGENT", ""),
                ),
                now=timezone.now(),
            )
        except pings.PingRejected as exc:
            response = self.handle_exception(
                PingProblem(str(exc), status=exc.status, extra=exc.extra)
            )
            if exc.retry_after is not None:
                response["Retry-After"] = str(exc.retry_after)
            return response
        return Response({"result": outcome})
