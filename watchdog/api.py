"""The watchdog's small REST API (``/api/v1/...`` on the watchdog's own server): monitors,
channels and incidents, behind ``Authorization: Bearer wd_...`` tokens kept in the
watchdog's own database. Thin views: rules live in ``monitors``."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import exceptions, serializers
from rest_framework.exceptions import ErrorDetail
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from httpkit.client_address import client_address
from httpkit.exceptions import problem_exception_handler
from httpkit.fields import ChoiceField, TypedStrings
from problems import NotFound, Problem
from schedules import local_and_utc

from . import api_examples, monitors, pings
from .auth import TokenAuthentication
from .channels import refusal_detail, target_refusal
from .models import Channel, Incident, Monitor, Ping
from .openapi import WatchdogAutoSchema


class WatchdogApiView(APIView):
    """Base view: the watchdog's own auth and error format, whatever the host settings."""

    authentication_classes = [TokenAuthentication]
    permission_classes = [IsAuthenticated]
    schema = WatchdogAutoSchema()
    pagination_class = None  # lists are plain arrays (at most 500 items)

    def get_exception_handler(self):
        return problem_exception_handler


class TooEarly(Problem):
    status = 425
    code = "monitor_not_provisioned"
    title = "The monitor does not exist yet"


class PingProblem(Problem):
    """The ping URLs' refusals, for the API ping: a partition of another format (400),
    a partition whose period has not started (422: ``rule`` ``partition_started``,
    ``partition``, ``starts_at``, ``newest_accepted_partition``, ``clock_skew_seconds``),
    or over the monitor's rate (429)."""

    code = "ping_rejected"
    title = "The ping was not accepted"

    def __init__(self, detail: str, *, status: int, extra: dict | None = None):
        super().__init__(detail, extra=extra)
        self.status = status


# --- serializers ------------------------------------------------------------------------


class ModelSerializer(TypedStrings, serializers.ModelSerializer):
    """A model's choices are ``httpkit.fields.ChoiceField``: an invalid one lists them; a
    number for a string is refused (``TypedStrings``)."""

    serializer_choice_field = ChoiceField


def _target_checked(attrs: dict) -> dict:
    """Refuse a channel's target by ``channels.target_refusal``, as an error of ``target``
    carrying the rule."""
    refusal = target_refusal(kind=attrs["kind"], target=attrs["target"])
    if refusal is not None:
        detail = refusal_detail(refusal, target=attrs["target"])
        raise serializers.ValidationError({"target": ErrorDetail(detail, code=refusal.rule)})
    return attrs


@extend_schema_serializer(examples=api_examples.CHANNEL)
class ChannelSerializer(ModelSerializer):
    class Meta:
        model = Channel
        fields = ["id", "name", "kind", "target", "owner", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate(self, attrs):
        return _target_checked(attrs)


@extend_schema_serializer(examples=api_examples.CHANNEL_CREATED)
class ChannelCreatedOutputSerializer(ChannelSerializer):
    """Documents a created channel: a webhook channel's signing secret is shown once."""

    signing_secret = serializers.CharField(
        read_only=True,
        required=False,
        help_text="A webhook channel's signing secret: only in the response that created it.",
    )

    class Meta(ChannelSerializer.Meta):
        fields = [*ChannelSerializer.Meta.fields, "signing_secret"]


# What a monitor's managers set; the rest is the watchdog's own state.
DEFINITION_FIELDS = [
    "name",
    "owner",
    "slug",
    "external_id",
    "kind",
    "period_seconds",
    "cron",
    "timezone",
    "partitioning",
    "partition_timezone",
    "grace_seconds",
    "calendar",
    "holidays_country",
    "holidays_subdivision",
    "non_business_day",
    "max_runtime_seconds",
    "start_cron",
    "start_grace_seconds",
    "storage_source",
    "storage_template",
    "storage_marker",
    "post_only",
    "system",
    "severity",
    "links",
    "depends_on",
]


class LinkSerializer(TypedStrings, serializers.Serializer):
    """A page's link: an http(s) address and the text shown for it."""

    href = serializers.CharField(max_length=2048, help_text="An http(s) URL with a host.")
    text = serializers.CharField(
        max_length=200, required=False, allow_blank=True, help_text="Shown for the link."
    )


# At most this many upstream monitors per monitor (``depends_on``).
MAX_DEPENDS_ON = 100


@extend_schema_serializer(examples=api_examples.MONITOR_INPUT)
class MonitorInputSerializer(ModelSerializer):
    channel_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=50
    )
    period_seconds = serializers.IntegerField(
        min_value=1, max_value=366 * 86400, required=False, allow_null=True
    )
    grace_seconds = serializers.IntegerField(min_value=0, max_value=31 * 86400, required=False)
    start_grace_seconds = serializers.IntegerField(
        min_value=0, max_value=31 * 86400, required=False, allow_null=True
    )
    # A limit of the rule's, not the column's: the column's range depends on the database.
    max_runtime_seconds = serializers.IntegerField(
        min_value=0, max_value=31 * 86400, required=False, allow_null=True
    )
    links = LinkSerializer(
        many=True,
        required=False,
        max_length=monitors.LINKS_MAX,
        help_text="Pages about the monitor link to each (e.g. a dataset's page).",
    )
    depends_on = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=MAX_DEPENDS_ON,
        help_text="External ids of the monitors whose missed deadlines cause this one's: "
        "while one has an open incident paging for a partition this monitor's missing "
        "partition needs, this monitor's page is held under it (one late root, one page).",
    )

    class Meta:
        model = Monitor
        fields = [*DEFINITION_FIELDS, "channel_ids"]
        # A slug unique per owner is ``monitors.validate``'s rule (``slug_taken``), checked
        # on the watchdog's database with the rest of the definition.
        validators: list = []

    def validate_channel_ids(self, ids):
        found = {c.pk: c for c in Channel.objects.filter(pk__in=ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise serializers.ValidationError(f"no such channels: {missing}")
        return [found[i] for i in ids]


@extend_schema_serializer(examples=api_examples.MONITOR_OUTPUT)
class MonitorOutputSerializer(ModelSerializer):
    ping_url = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField()
    schedule = serializers.SerializerMethodField()
    channels = ChannelSerializer(many=True)
    open_incidents = serializers.SerializerMethodField()

    class Meta:
        model = Monitor
        fields = [
            "id",
            *DEFINITION_FIELDS,
            "ping_url",
            "schedule",
            *monitors.STATE_FIELDS,
            "channels",
            "open_incidents",
            "created_at",
        ]
        # Served, never read: no input limits (the columns' ranges differ by database).
        read_only_fields = fields

    def get_ping_url(self, obj) -> str:
        return f"{settings.WATCHDOG_PUBLIC_URL.rstrip('/')}/ping/{obj.ping_key}"

    def get_state(self, obj) -> str:
        return monitors.display_state(obj, now=timezone.now())

    def get_schedule(self, obj) -> str:
        from . import schedule

        return schedule.describe(obj)

    def get_open_incidents(self, obj) -> int:
        return obj.incidents.filter(resolved_at__isnull=True).count()


@extend_schema_serializer(examples=api_examples.MONITOR_DETAIL)
class MonitorDetailOutputSerializer(MonitorOutputSerializer):
    """A monitor with its next deadlines in its own zone and in UTC, and warnings about its
    cron expressions (what the monitor endpoints answer, except the list)."""

    next_deadlines = serializers.SerializerMethodField()
    warnings = serializers.SerializerMethodField()

    class Meta(MonitorOutputSerializer.Meta):
        fields = [*MonitorOutputSerializer.Meta.fields, "next_deadlines", "warnings"]
        read_only_fields = fields

    def get_next_deadlines(self, obj) -> list[dict[str, str]]:
        from . import schedule

        return [
            local_and_utc(at, obj.timezone)
            for at in schedule.upcoming_deadlines(obj, now=timezone.now())
        ]

    def get_warnings(self, obj) -> list[dict[str, str]]:
        return [w.as_dict() for w in monitors.warnings(obj)]


@extend_schema_serializer(examples=[*api_examples.INCIDENT, *api_examples.HELD_INCIDENT])
class IncidentSerializer(ModelSerializer):
    monitor = serializers.CharField(source="monitor.name")
    monitor_id = serializers.IntegerField()
    dedup_key = serializers.CharField()

    class Meta:
        model = Incident
        fields = [
            "id",
            "monitor",
            "monitor_id",
            "reason",
            "deadline_at",
            "partition",
            "summary",
            "dedup_key",
            "opened_at",
            "resolved_at",
            "part_of",
            "held_under",
            "held_at",
            "released_at",
        ]


# --- views -------------------------------------------------------------------------------


def _monitor(monitor_id: int) -> Monitor:
    monitor = Monitor.objects.filter(pk=monitor_id).first()
    if monitor is None:
        raise NotFound(f"no monitor {monitor_id}")
    return monitor


def _caller(request: Request) -> str:
    """Who made an API call, as a monitor's ``paused_by`` names it."""
    return f"API token {request.auth.name}" if request.auth is not None else "API"


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
        return Response(MonitorDetailOutputSerializer(_monitor(monitor_id)).data)

    @extend_schema(request=MonitorInputSerializer, responses=MonitorDetailOutputSerializer)
    def patch(self, request: Request, monitor_id: int) -> Response:
        """Change a monitor

        Fields left out stay as they are; `channel_ids` replaces the channels.
        """
        monitor = _monitor(monitor_id)
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
        _monitor(monitor_id).delete()
        return Response(status=204)


class MonitorPauseApi(WatchdogApiView):
    @extend_schema(request=None, responses=MonitorDetailOutputSerializer)
    def post(self, request: Request, monitor_id: int) -> Response:
        """Pause a monitor

        A paused monitor is not judged and pages nobody until resumed; `paused_by` names
        the token.
        """
        monitor = monitors.monitor_pause(
            _monitor(monitor_id), now=timezone.now(), by=_caller(request)
        )
        return Response(MonitorDetailOutputSerializer(monitor).data)


class MonitorResumeApi(WatchdogApiView):
    @extend_schema(request=None, responses=MonitorDetailOutputSerializer)
    def post(self, request: Request, monitor_id: int) -> Response:
        """Resume a paused monitor

        It is judged again from now on.
        """
        monitor = monitors.monitor_resume(_monitor(monitor_id), now=timezone.now())
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


class ChannelSpecSerializer(TypedStrings, serializers.Serializer):
    kind = ChoiceField(Channel.Kind.choices)
    target = serializers.CharField(max_length=2048)
    name = serializers.CharField(max_length=200, required=False)

    def validate(self, attrs):
        return _target_checked(attrs)


# At most this many partitions travel with one definition (``ready_partitions``).
MAX_READY_PARTITIONS = 1000


@extend_schema_serializer(examples=api_examples.EXTERNAL_MONITOR_INPUT)
class ExternalMonitorInputSerializer(MonitorInputSerializer):
    version = serializers.CharField(max_length=64, required=False, allow_blank=True)
    ready_partitions = serializers.ListField(
        child=serializers.CharField(max_length=32),
        required=False,
        max_length=MAX_READY_PARTITIONS,
        help_text="Partition keys already ready, recorded as success pings with the "
        "definition (each once).",
    )
    channels = ChannelSpecSerializer(many=True, required=False)
    active = serializers.BooleanField(required=False, default=True)
    ping_key = serializers.UUIDField(
        required=False, allow_null=True, help_text="Chosen by the managing system, if given."
    )

    class Meta(MonitorInputSerializer.Meta):
        fields = [
            *(f for f in DEFINITION_FIELDS if f != "external_id"),
            *("version", "channels", "active", "ping_key", "ready_partitions"),
        ]


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
            external_id, request.data, now=timezone.now(), by=_caller(request)
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
