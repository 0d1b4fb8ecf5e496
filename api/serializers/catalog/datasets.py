"""Shapes of datasets: declaring and changing one, what it looks like (with who needs it by
when and its next deadlines), declaring a team's catalog at once, and its audit log."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from catalog import selectors, sla_schedule
from catalog.models import Dataset
from httpkit.fields import ChoiceField
from schedules import local_and_utc

from ...openapi_examples import catalog as examples_catalog
from .base import StrictSerializer

_ACCEPTS_FUTURE_PARTITIONS = (
    "false (the default): a publish or poll find of a partition whose period starts after "
    "now plus the clock-skew allowance is refused (422 partition_in_future); true for "
    "datasets with future periods (forecasts, schedules). The latest ready partition and "
    "freshness count only periods that have started either way."
)


_SLA_CALENDAR = (
    "none (the default): every cron firing is a deadline; business_days: only firings "
    "whose local date in sla_timezone is a business day (not a weekend day, not a public "
    "holiday of sla_holidays_country)."
)
_SLA_HOLIDAYS_COUNTRY = (
    "ISO 3166-1 alpha-2 code whose public holidays (and weekend) apply with business_days, "
    "e.g. DE; blank: Saturday and Sunday off, no holidays."
)
_SLA_HOLIDAYS_SUBDIVISION = (
    "The country's subdivision code (state, province) for its regional holidays, e.g. BY; "
    "blank: national holidays only."
)
_SLA_NON_BUSINESS_DAY = (
    "What was due at a firing on a non-business day: next_business_day (the default) makes "
    "it due at the next business-day deadline; skip means it is not owed at all."
)


class _DatasetFields(StrictSerializer):
    description = serializers.CharField(max_length=10_000, allow_blank=True, required=False)
    criticality = ChoiceField(Dataset.Criticality.choices, required=False)
    partitioning = ChoiceField(Dataset.Partitioning.choices, required=False)
    partition_timezone = serializers.CharField(max_length=64, required=False)
    completion_signal = ChoiceField(Dataset.CompletionSignal.choices, required=False)
    success_marker = serializers.CharField(max_length=255, required=False)
    manifest_name = serializers.CharField(max_length=255, required=False)
    storage_source = serializers.CharField(max_length=64, allow_blank=True, required=False)
    location_template = serializers.CharField(max_length=1024, allow_blank=True, required=False)
    sla_cron = serializers.CharField(max_length=128, allow_blank=True, required=False)
    sla_timezone = serializers.CharField(max_length=64, required=False)
    sla_grace_seconds = serializers.IntegerField(
        min_value=0, max_value=Dataset.MAX_SLA_GRACE_SECONDS, required=False
    )
    sla_calendar = ChoiceField(Dataset.SlaCalendar.choices, required=False, help_text=_SLA_CALENDAR)
    sla_holidays_country = serializers.CharField(
        max_length=8, allow_blank=True, required=False, help_text=_SLA_HOLIDAYS_COUNTRY
    )
    sla_holidays_subdivision = serializers.CharField(
        max_length=64, allow_blank=True, required=False, help_text=_SLA_HOLIDAYS_SUBDIVISION
    )
    sla_non_business_day = ChoiceField(
        Dataset.NonBusinessDay.choices, required=False, help_text=_SLA_NON_BUSINESS_DAY
    )
    change_notice_days = serializers.IntegerField(
        min_value=0, max_value=Dataset.MAX_CHANGE_NOTICE_DAYS, required=False
    )
    accepts_future_partitions = serializers.BooleanField(
        required=False,
        help_text=_ACCEPTS_FUTURE_PARTITIONS,
    )


@extend_schema_serializer(examples=examples_catalog.DATASET_CREATE_INPUT)
class DatasetCreateInputSerializer(_DatasetFields):
    namespace = serializers.CharField(max_length=255, trim_whitespace=False)
    name = serializers.CharField(max_length=1024, trim_whitespace=False)


@extend_schema_serializer(examples=examples_catalog.DATASET_UPDATE_INPUT)
class DatasetUpdateInputSerializer(_DatasetFields):
    lifecycle = ChoiceField(
        Dataset.Lifecycle.choices,
        required=False,
        help_text="deprecated needs sunset_at at least change_notice_days away; becoming "
        "deprecated or retired needs a deprecation or retirement change notice in effect "
        "(or override_reason).",
    )
    sunset_at = serializers.DateTimeField(allow_null=True, required=False)
    override_reason = serializers.CharField(
        max_length=2000,
        allow_blank=True,
        required=False,
        help_text="Why the lifecycle changes without a change notice in effect; audited.",
    )


@extend_schema_serializer(examples=examples_catalog.DATASET_OUTPUT)
class DatasetOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    owner = serializers.CharField(source="owner.slug")
    description = serializers.CharField()
    criticality = serializers.CharField()
    partitioning = serializers.CharField()
    partition_timezone = serializers.CharField()
    completion_signal = serializers.CharField()
    success_marker = serializers.CharField()
    manifest_name = serializers.CharField()
    storage_source = serializers.CharField()
    location_template = serializers.CharField()
    sla_cron = serializers.CharField()
    sla_timezone = serializers.CharField()
    sla_grace_seconds = serializers.IntegerField()
    sla_calendar = serializers.CharField(help_text=_SLA_CALENDAR)
    sla_holidays_country = serializers.CharField(help_text=_SLA_HOLIDAYS_COUNTRY)
    sla_holidays_subdivision = serializers.CharField(help_text=_SLA_HOLIDAYS_SUBDIVISION)
    sla_non_business_day = serializers.CharField(help_text=_SLA_NON_BUSINESS_DAY)
    next_deadline_at = serializers.DateTimeField(
        allow_null=True, help_text="The next SLA deadline to judge; null without an SLA."
    )
    change_notice_days = serializers.IntegerField()
    accepts_future_partitions = serializers.BooleanField(help_text=_ACCEPTS_FUTURE_PARTITIONS)
    lifecycle = serializers.CharField()
    sunset_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    badge_url = serializers.URLField(
        read_only=True,
        required=False,
        help_text="Only for the owner team: a status badge that needs no API key.",
    )
    pipeline_ping_url = serializers.URLField(
        read_only=True,
        required=False,
        help_text="Only for the owner team of a critical dataset: the watchdog URL its "
        "pipeline's last task pings (/start and /fail work too).",
    )


class DeadlineOutputSerializer(serializers.Serializer):
    local = serializers.CharField(
        help_text="ISO 8601 with the UTC offset of the schedule's own zone at that instant."
    )
    utc = serializers.CharField(help_text="The same instant, ISO 8601 in UTC (ending in Z).")


class FieldWarningOutputSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Stable snake_case: every_minute_of_fixed_hour (minute '*' with a fixed "
        "hour fires 60 times), day_of_month_or_day_of_week (both restricted: cron fires on "
        "days matching either), not_every_year (some years have no deadline)."
    )
    field = serializers.CharField(help_text="The input field, e.g. sla_cron.")
    message = serializers.CharField(help_text="What it does, and what to write instead.")


class NeededByOutputSerializer(serializers.Serializer):
    subscription = serializers.IntegerField(source="subscription.id")
    team = serializers.CharField(help_text="The consumer team.")
    job = serializers.DictField(
        child=serializers.CharField(), allow_null=True, help_text="The job it names; null: none."
    )
    need_by_cron = serializers.CharField(source="subscription.need_by_cron")
    need_by_timezone = serializers.CharField(source="subscription.need_by_timezone")
    next_need_by = serializers.SerializerMethodField(
        help_text="The next need-by deadline, in need_by_timezone and UTC."
    )
    sla_deadline_at = serializers.DateTimeField(
        allow_null=True,
        help_text="The SLA deadline compared with (of the same period as need_by_at); "
        "null without an SLA.",
    )
    need_by_at = serializers.DateTimeField(
        allow_null=True, help_text="The need-by of that period; null without an SLA."
    )
    earlier_than_sla = serializers.BooleanField(
        allow_null=True,
        help_text="Whether the team needs a partition before the producer promises it, "
        "over the next 3 SLA deadlines; null without an SLA.",
    )
    gap_minutes = serializers.IntegerField(
        allow_null=True,
        help_text="sla_deadline_at - need_by_at in minutes (positive: needed earlier).",
    )

    @extend_schema_field(DeadlineOutputSerializer(allow_null=True))
    def get_next_need_by(self, obj) -> dict[str, str] | None:
        if obj.next_need_by_at is None:
            return None
        return local_and_utc(obj.next_need_by_at, obj.subscription.need_by_timezone)


@extend_schema_serializer(examples=examples_catalog.DATASET_DETAIL_OUTPUT)
class DatasetDetailOutputSerializer(DatasetOutputSerializer):
    needed_by = serializers.SerializerMethodField(
        help_text="Who needs it by when: the subscriptions with a need-by, by team."
    )
    next_deadlines = serializers.SerializerMethodField(
        help_text="The next 3 SLA deadlines (none without an SLA), in sla_timezone and UTC."
    )
    warnings = serializers.SerializerMethodField(
        help_text="The SLA cron is accepted but probably means something else."
    )

    @extend_schema_field(NeededByOutputSerializer(many=True))
    def get_needed_by(self, obj) -> list[dict]:
        rows = selectors.dataset_needed_by(dataset=obj, now=self.context["now"])
        return NeededByOutputSerializer(rows, many=True).data

    @extend_schema_field(DeadlineOutputSerializer(many=True))
    def get_next_deadlines(self, obj) -> list[dict[str, str]]:
        return sla_schedule.next_deadlines(obj, now=self.context["now"])

    @extend_schema_field(FieldWarningOutputSerializer(many=True))
    def get_warnings(self, obj) -> list[dict[str, str]]:
        return [w.as_dict() for w in sla_schedule.sla_warnings(obj)]


class CatalogApplyQuerySerializer(StrictSerializer):
    dry_run = serializers.BooleanField(
        default=True, help_text="true (the default): only show the plan; false: apply it."
    )


class FieldChangeOutputSerializer(serializers.Serializer):
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)


class DeclaredDatasetOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    action = ChoiceField(["create", "update", "unchanged"])
    changes = serializers.DictField(child=FieldChangeOutputSerializer())
    warnings = FieldWarningOutputSerializer(
        many=True, help_text="About the declared fields, e.g. an SLA cron's (whatever the action)."
    )


@extend_schema_serializer(examples=examples_catalog.CATALOG_PLAN_OUTPUT)
class CatalogPlanOutputSerializer(serializers.Serializer):
    team = serializers.CharField()
    dry_run = serializers.BooleanField()
    changed = serializers.BooleanField(help_text="Whether any declared dataset differs.")
    datasets = DeclaredDatasetOutputSerializer(many=True)
    not_declared = serializers.ListField(
        child=serializers.CharField(),
        help_text="namespace/name of the team's datasets the declaration leaves alone.",
    )


class DatasetListFilterSerializer(StrictSerializer):
    owner = serializers.SlugField(required=False)
    namespace = serializers.CharField(max_length=255, required=False)
    name = serializers.CharField(max_length=1024, required=False)
    criticality = ChoiceField(Dataset.Criticality.choices, required=False)
    lifecycle = ChoiceField(Dataset.Lifecycle.choices, required=False)
    q = serializers.CharField(max_length=200, required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


@extend_schema_serializer(examples=examples_catalog.AUDIT_ENTRY_OUTPUT)
class AuditEntryOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    actor = serializers.CharField()
    action = serializers.CharField()
    changes = serializers.JSONField()
    created_at = serializers.DateTimeField()
