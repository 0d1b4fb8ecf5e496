"""The watchdog API's serializers: channels, monitors (as defined and as served),
incidents, and a managing system's definition of its monitor."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import (
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from httpkit.fields import ChoiceField, TypedStrings
from schedules import local_and_utc

from .. import monitors
from ..channels import refusal_detail, target_refusal
from ..models import Channel, Incident, Monitor
from . import examples as api_examples


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
        from .. import schedule

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
        from .. import schedule

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
            "held_via",
            "held_at",
            "released_at",
        ]


# --- views -------------------------------------------------------------------------------


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
