"""Shapes of the catalog API: input serializers validate types, output ones render."""

from __future__ import annotations

import threading

from django.utils.functional import cached_property
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from catalog import delivery, selectors, sla_schedule
from catalog.models import (
    ApiKey,
    ChangeNotice,
    Dataset,
    Delivery,
    Notification,
    PartitionRevision,
    Restatement,
)
from httpkit.fields import ChoiceField, TypedStrings
from problems import REQUIRED_DETAIL
from schedules import local_and_utc

from ..openapi_examples import catalog as examples_catalog
from ..openapi_examples import delivery as examples_delivery


class StrictSerializer(TypedStrings, serializers.Serializer):
    """Reject unknown fields instead of silently dropping them (a typo should be a 400),
    and numbers for strings (``TypedStrings``)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {
                        name: [serializers.ErrorDetail("unknown field", code="unknown")]
                        for name in unknown
                    }
                )
        return super().to_internal_value(data)


def _required() -> serializers.ErrorDetail:
    """A missing field's error, as DRF words it (a rule across fields noticed it)."""
    return serializers.ErrorDetail(REQUIRED_DETAIL, code="required")


_field_sets = threading.local()  # per thread: serializer class -> its bound fields


class FieldsOncePerThread(serializers.Serializer):
    """Builds its fields once per thread instead of once per instance.

    DRF deep-copies every declared field for each new serializer, re-running each field's
    ``__init__``: on the publish endpoint that cost more than the validation itself. Input
    fields keep no per-request state (values and errors live in locals and on the
    serializer), so instances can share one set, bound to a data-less instance of the
    class; one set per thread, so concurrent requests never share a field. Only for
    serializers used without ``partial`` or ``context``, which their fields would read
    from that data-less instance.
    """

    @cached_property
    def fields(self):
        by_class = _field_sets.__dict__.setdefault("by_class", {})
        fields = by_class.get(type(self))
        if fields is None:
            holder = type(self)()  # never validates anything: it only owns the fields
            fields = by_class[type(self)] = super(FieldsOncePerThread, holder).fields
        return fields


# --- datasets ---------------------------------------------------------------------------


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


# --- readiness and partitions -----------------------------------------------------------


class ManifestSerializer(StrictSerializer):
    expected_files = serializers.IntegerField(min_value=0, max_value=10_000_000)
    row_count = serializers.IntegerField(min_value=0, required=False)
    files = serializers.ListField(child=serializers.DictField(), max_length=100_000, required=False)


# Validated on every publish, hence its fields are built once per thread. (A comment: a
# docstring would replace StrictSerializer's as the OpenAPI schema's description.)
@extend_schema_serializer(examples=examples_catalog.READINESS_PUBLISH_INPUT)
class ReadinessPublishInputSerializer(StrictSerializer, FieldsOncePerThread):
    namespace = serializers.CharField(max_length=255, trim_whitespace=False)
    name = serializers.CharField(max_length=1024, trim_whitespace=False)
    partition = serializers.CharField(
        max_length=32,
        allow_blank=True,
        default="",
        help_text="Key in the dataset's partitioning format (empty when unpartitioned). A "
        "period that starts after now plus the clock-skew allowance (5 minutes by default) "
        "is refused with 422 partition_in_future, naming the newest key accepted now, "
        "unless the dataset accepts_future_partitions.",
    )
    version = serializers.CharField(max_length=128, required=False)
    state = ChoiceField(
        [PartitionRevision.State.READY, PartitionRevision.State.FAILED],
        default=PartitionRevision.State.READY,
    )
    manifest = ManifestSerializer(required=False)
    metadata = serializers.DictField(
        required=False,
        help_text="Free-form, kept on the revision. A 'schema' member holding an object is "
        "the dataset's schema in the OpenLineage SchemaDatasetFacet shape "
        '({"fields": [{"name": ..., "type": ..., "fields": [...]}]}): a ready publish '
        "records it as a schema observation, which may reveal an unannounced breaking "
        "change (400 schema_invalid when malformed).",
    )
    code_version = serializers.CharField(max_length=128, allow_blank=True, default="")
    restatement = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="Stage the revision in this staged restatement of the dataset: ready but "
        "not current (readers, freshness and consumers see nothing) until it is promoted.",
    )


@extend_schema_serializer(examples=examples_catalog.READINESS_PUBLISH_OUTPUT)
class ReadinessPublishOutputSerializer(serializers.Serializer):
    """Documents the publish response (built by the service, identical on every repeat)."""

    dataset = serializers.DictField()
    partition = serializers.CharField()
    logical_start = serializers.DateTimeField(allow_null=True)
    logical_end = serializers.DateTimeField(allow_null=True)
    version = serializers.CharField(allow_null=True)
    state = serializers.CharField()
    ready_at = serializers.DateTimeField(allow_null=True)
    current_version = serializers.CharField(allow_null=True)
    event_id = serializers.IntegerField(allow_null=True)
    restatement = serializers.IntegerField(
        required=False, help_text="The restatement the revision is staged in, if any."
    )


class RevisionOutputSerializer(serializers.Serializer):
    version = serializers.SerializerMethodField()
    state = serializers.CharField()
    ready_at = serializers.DateTimeField(allow_null=True)
    detected_by = serializers.CharField()
    code_version = serializers.CharField()
    manifest = serializers.JSONField(allow_null=True)
    metadata = serializers.JSONField()

    def get_version(self, obj) -> str | None:
        return obj.version or None  # "" is the revision published without a version


@extend_schema_serializer(examples=examples_catalog.PARTITION_OUTPUT)
class PartitionOutputSerializer(serializers.Serializer):
    key = serializers.CharField()
    logical_start = serializers.DateTimeField(source="start_at", allow_null=True)
    logical_end = serializers.DateTimeField(source="end_at", allow_null=True)
    state = serializers.SerializerMethodField()
    current_revision = RevisionOutputSerializer(allow_null=True)
    updated_at = serializers.DateTimeField()

    def get_state(self, obj) -> str:
        return obj.current_revision.state if obj.current_revision else "missing"


class PartitionListFilterSerializer(StrictSerializer):
    state = ChoiceField([*PartitionRevision.State.values, "missing"], required=False)
    logical_from = serializers.DateTimeField(required=False)
    logical_to = serializers.DateTimeField(required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)

    def validate(self, attrs):
        start, end = attrs.get("logical_from"), attrs.get("logical_to")
        if start and end and start >= end:
            raise serializers.ValidationError({"logical_to": "must be after logical_from"})
        return attrs


# --- subscriptions ----------------------------------------------------------------------


NEWEST_ONLY_HELP = (
    "Tell this subscription about the newest partitions only: no backfills (a partition.ready "
    "whose backfill is true) and no partition.restated of a partition older than the newest "
    "ready one. For consumers that read the latest data only."
)


EVENT_TYPES_HELP = (
    "Notification types to receive; empty: every type except dataset.unusually_late, "
    "which is received only when listed."
)


NEED_BY_CRON_HELP = (
    "When your team needs each partition: a five-field cron read in need_by_timezone, "
    "checked as an SLA cron is. A partition not ready at its need-by (the first firing at "
    "or after its period's end; no grace) is told to this subscription alone as "
    "dataset.late (judged_at need_by), without paging the producer. Blank: no need-by."
)
NEED_BY_TIMEZONE_HELP = "IANA time zone of need_by_cron (default UTC)."


@extend_schema_serializer(examples=examples_catalog.SUBSCRIPTION_CREATE_INPUT)
class SubscriptionCreateInputSerializer(StrictSerializer):
    dataset_id = serializers.IntegerField(min_value=1, max_value=2**63 - 1, required=False)
    namespace = serializers.CharField(max_length=255, required=False, trim_whitespace=False)
    name = serializers.CharField(max_length=1024, required=False, trim_whitespace=False)
    job_namespace = serializers.CharField(max_length=255, allow_blank=True, default="")
    job_name = serializers.CharField(max_length=1024, allow_blank=True, default="")
    endpoint_url = serializers.URLField(max_length=2048, allow_blank=True, required=False)
    event_types = serializers.ListField(
        child=ChoiceField(Notification.Type.choices),
        max_length=20,
        default=list,
        help_text=EVENT_TYPES_HELP,
    )
    partition_pattern = serializers.CharField(max_length=64, allow_blank=True, default="")
    newest_only = serializers.BooleanField(default=False, help_text=NEWEST_ONLY_HELP)
    need_by_cron = serializers.CharField(
        max_length=128, allow_blank=True, default="", help_text=NEED_BY_CRON_HELP
    )
    need_by_timezone = serializers.CharField(
        max_length=64, default="UTC", help_text=NEED_BY_TIMEZONE_HELP
    )
    since = serializers.DateTimeField(
        required=False,
        help_text="Also deliver the dataset's notifications since then (<= 30 days).",
    )

    def validate(self, attrs):
        by_identity = "namespace" in attrs or "name" in attrs
        if "dataset_id" in attrs and by_identity:
            raise serializers.ValidationError(
                {"dataset_id": "give either dataset_id, or namespace and name, not both"}
            )
        if not by_identity and "dataset_id" not in attrs:
            raise serializers.ValidationError(
                {
                    "dataset_id": serializers.ErrorDetail(
                        f"{REQUIRED_DETAIL} (or give namespace and name)", code="required"
                    )
                }
            )
        missing = [f for f in ("namespace", "name") if by_identity and f not in attrs]
        if missing:
            raise serializers.ValidationError({f: _required() for f in missing})
        url = attrs.get("endpoint_url")
        if url and not delivery.webhook_url_acceptable(url):
            raise serializers.ValidationError(
                {"endpoint_url": "must be an https URL without credentials"}
            )
        if bool(attrs["job_namespace"]) != bool(attrs["job_name"]):
            missing = "job_name" if attrs["job_namespace"] else "job_namespace"
            raise serializers.ValidationError(
                {
                    missing: serializers.ErrorDetail(
                        f"{REQUIRED_DETAIL} (job_namespace and job_name go together)",
                        code="required",
                    )
                }
            )
        return attrs


@extend_schema_serializer(examples=examples_catalog.SUBSCRIPTION_UPDATE_INPUT)
class SubscriptionUpdateInputSerializer(StrictSerializer):
    event_types = serializers.ListField(
        child=ChoiceField(Notification.Type.choices),
        max_length=20,
        required=False,
        help_text=EVENT_TYPES_HELP,
    )
    partition_pattern = serializers.CharField(max_length=64, allow_blank=True, required=False)
    newest_only = serializers.BooleanField(required=False, help_text=NEWEST_ONLY_HELP)
    need_by_cron = serializers.CharField(
        max_length=128, allow_blank=True, required=False, help_text=NEED_BY_CRON_HELP
    )
    need_by_timezone = serializers.CharField(
        max_length=64, required=False, help_text=NEED_BY_TIMEZONE_HELP
    )


class WarningOutputSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Stable snake_case, e.g. dataset_deprecated, need_by_before_sla (your "
        "need-by comes before the producer's SLA deadline), or a need-by cron's warning "
        "(as an SLA cron's, e.g. every_minute_of_fixed_hour)."
    )
    detail = serializers.CharField()
    sunset_at = serializers.DateTimeField(allow_null=True)
    field = serializers.CharField(
        allow_null=True, required=False, help_text="The input field it is about, if one."
    )


@extend_schema_serializer(examples=examples_catalog.SUBSCRIPTION_OUTPUT)
class SubscriptionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    dataset = serializers.SerializerMethodField()
    job_namespace = serializers.CharField()
    job_name = serializers.CharField()
    endpoint_url = serializers.SerializerMethodField()
    event_types = serializers.ListField(child=serializers.CharField())
    partition_pattern = serializers.CharField()
    newest_only = serializers.BooleanField(help_text=NEWEST_ONLY_HELP)
    need_by_cron = serializers.CharField(help_text=NEED_BY_CRON_HELP)
    need_by_timezone = serializers.CharField(help_text=NEED_BY_TIMEZONE_HELP)
    need_by_next_at = serializers.DateTimeField(
        allow_null=True,
        help_text="The next need-by deadline to judge (UTC); null without a need-by.",
    )
    created_at = serializers.DateTimeField()
    endpoint_secret = serializers.CharField(
        read_only=True,
        required=False,
        help_text="The webhook's Standard Webhooks signing secret: only in the response "
        "that created the endpoint.",
    )
    warnings = WarningOutputSerializer(
        many=True,
        read_only=True,
        required=False,
        help_text="Only in the response to a declaration or a change: e.g. "
        "dataset_deprecated, need_by_before_sla.",
    )

    def get_dataset(self, obj) -> dict:
        return {"id": obj.dataset_id, "namespace": obj.dataset.namespace, "name": obj.dataset.name}

    def get_endpoint_url(self, obj) -> str | None:
        return obj.endpoint.url if obj.endpoint else None


@extend_schema_serializer(examples=examples_catalog.API_KEY_OUTPUT)
class ApiKeyOutputSerializer(serializers.Serializer):
    public_id = serializers.CharField()
    name = serializers.CharField()
    scopes = serializers.ListField(child=ChoiceField(ApiKey.Scope.choices))
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)


class TeamRefOutputSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()


@extend_schema_serializer(examples=examples_catalog.ME_OUTPUT)
class MeOutputSerializer(serializers.Serializer):
    """Documents ``GET /api/v1/me``: the key's team and the key itself."""

    team = TeamRefOutputSerializer(help_text="The team the key acts for.")
    key = ApiKeyOutputSerializer(help_text="The key presented (never its secret).")


@extend_schema_serializer(examples=examples_catalog.API_KEY_CREATE_INPUT)
class ApiKeyCreateInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(
        child=ChoiceField(ApiKey.Scope.choices), min_length=1, max_length=5
    )
    expires_at = serializers.DateTimeField(required=False, allow_null=True)


@extend_schema_serializer(examples=examples_catalog.API_KEY_CREATED_OUTPUT)
class ApiKeyCreatedOutputSerializer(ApiKeyOutputSerializer):
    token = serializers.CharField(help_text="The key itself, shown only in this response.")


# --- endpoints and deliveries -----------------------------------------------------------


@extend_schema_serializer(examples=examples_delivery.ENDPOINT_OUTPUT)
class EndpointOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    url = serializers.CharField()
    is_active = serializers.BooleanField()
    disabled_reason = serializers.CharField()
    failing_since = serializers.DateTimeField(allow_null=True)
    disabled_at = serializers.DateTimeField(
        allow_null=True, help_text="When it was disabled; null while it is active."
    )
    outage_started_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When the failing streak that last disabled it began (kept after it is "
        "enabled): a natural `since` for POST /endpoints/{id}/recover.",
    )
    previous_secret_expires_at = serializers.DateTimeField(allow_null=True)
    rate_limit_per_second = serializers.IntegerField(
        allow_null=True,
        help_text="Most deliveries sent to it per second; null: the deployment's default "
        "(TIDEMARK_DELIVERY_ENDPOINT_RATE). Set it with PATCH /endpoints/{id}.",
    )
    throttled_until = serializers.DateTimeField(
        allow_null=True,
        help_text="Nothing is sent to it before this time: it answered 429 or 503 with "
        "Retry-After (honoured up to an hour). In the past or null: not throttled.",
    )
    created_at = serializers.DateTimeField()
    deliveries = serializers.SerializerMethodField()

    def get_deliveries(self, obj) -> dict:
        succeeded, dead = obj.n_succeeded, obj.n_dead_letters
        finished = succeeded + dead
        return {
            "succeeded": succeeded,
            "waiting": obj.n_waiting,
            "dead_letters": dead,
            "success_rate": round(succeeded / finished, 4) if finished else None,
        }


@extend_schema_serializer(examples=examples_delivery.SECRET_OUTPUT)
class SecretOutputSerializer(serializers.Serializer):
    secret = serializers.CharField(help_text="The new signing secret, shown only here.")
    previous_secret_expires_at = serializers.DateTimeField(
        allow_null=True, help_text="Until then the old secret also signs."
    )


@extend_schema_serializer(examples=examples_delivery.REPLAY_OUTPUT)
class ReplayOutputSerializer(serializers.Serializer):
    replayed = serializers.IntegerField()


class DeliveryAttemptOutputSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()
    status_code = serializers.IntegerField(allow_null=True)
    decision = serializers.CharField()
    error_kind = serializers.CharField()
    error = serializers.CharField()
    response_excerpt = serializers.CharField()
    next_attempt_in_seconds = serializers.FloatField(allow_null=True)


@extend_schema_serializer(examples=examples_delivery.DELIVERY_OUTPUT)
class DeliveryOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    webhook_id = serializers.UUIDField(source="notification_id")
    type = serializers.CharField(source="notification.type")
    endpoint_id = serializers.IntegerField()
    endpoint_url = serializers.CharField(source="endpoint.url")
    state = serializers.CharField()
    attempts = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField()
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error_kind = serializers.CharField()
    last_error = serializers.CharField()
    finished_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


@extend_schema_serializer(examples=examples_delivery.DELIVERY_DETAIL_OUTPUT)
class DeliveryDetailOutputSerializer(DeliveryOutputSerializer):
    payload = serializers.JSONField(source="notification.payload")
    attempt_log = DeliveryAttemptOutputSerializer(many=True)


class DeliveryListFilterSerializer(StrictSerializer):
    state = ChoiceField(
        [*Delivery.State.values, "dead_letter"],
        required=False,
        help_text="dead_letter: rejected or dead.",
    )
    endpoint_id = serializers.IntegerField(min_value=1, max_value=2**63 - 1, required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


class StorageSweepOutputSerializer(serializers.Serializer):
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField()
    full = serializers.BooleanField(help_text="Listed every partition prefix, no lookback.")
    listing = ChoiceField(
        ["delimiter", "flat"],
        help_text="delimiter: partition prefixes, then inside those not yet ready; flat: the "
        "objects themselves, markers included, with no listing inside.",
    )
    objects_per_partition = serializers.FloatField(
        allow_null=True, help_text="Objects listed per partition prefix, when measured."
    )
    list_calls = serializers.IntegerField(help_text="Listings made (each may span pages).")
    pages = serializers.IntegerField(help_text="List requests (pages of up to 1,000 entries).")
    objects_seen = serializers.IntegerField(help_text="Prefixes and objects listed.")
    partitions_checked = serializers.IntegerField(help_text="Not-ready partitions listed inside.")
    partitions_found = serializers.IntegerField(help_text="Recorded ready by this sweep.")
    missed_events = serializers.IntegerField(
        help_text="Found partitions of datasets that otherwise publish events."
    )
    incomplete = serializers.IntegerField(help_text="Manifest partitions still missing files.")
    recent_pass = serializers.BooleanField(
        help_text="Also re-read the markers of the recent ready partitions (hourly)."
    )
    partitions_restated = serializers.IntegerField(
        help_text="Ready partitions whose rewritten marker or manifest this sweep told as "
        "partition.restated."
    )
    error = serializers.CharField()


@extend_schema_serializer(examples=examples_catalog.POLL_OUTPUT)
class PollOutputSerializer(serializers.Serializer):
    polled = serializers.BooleanField(help_text="Whether the fallback poll watches the dataset.")
    storage_source = serializers.CharField()
    location_template = serializers.CharField()
    group_prefix = serializers.CharField(allow_null=True, help_text="Parent prefix listed.")
    mode = ChoiceField(["adaptive", "safety_net"], allow_null=True)
    interval_seconds = serializers.IntegerField(allow_null=True)
    next_sweep_at = serializers.DateTimeField(allow_null=True)
    last_swept_at = serializers.DateTimeField(allow_null=True)
    last_found_at = serializers.DateTimeField(allow_null=True)
    recent_sweeps = StorageSweepOutputSerializer(many=True)


class ArrivalQuantilesOutputSerializer(serializers.Serializer):
    periods = serializers.IntegerField(help_text="Arrivals in this group of periods.")
    p50_seconds = serializers.IntegerField(
        allow_null=True,
        help_text=(
            "Half of these periods were ready within this many seconds of their end "
            "(negative: before it). Null while the group has fewer arrivals than "
            "TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS."
        ),
    )
    p90_seconds = serializers.IntegerField(
        allow_null=True, help_text="Ready within this many seconds on 90% of them; null as p50."
    )
    p99_seconds = serializers.IntegerField(
        allow_null=True,
        help_text=(
            "Ready within this many seconds on 99% of them (with fewer than 100 arrivals, "
            "the latest seen); null as p50."
        ),
    )


class ArrivalWeekdaysOutputSerializer(serializers.Serializer):
    monday = ArrivalQuantilesOutputSerializer()
    tuesday = ArrivalQuantilesOutputSerializer()
    wednesday = ArrivalQuantilesOutputSerializer()
    thursday = ArrivalQuantilesOutputSerializer()
    friday = ArrivalQuantilesOutputSerializer()
    saturday = ArrivalQuantilesOutputSerializer()
    sunday = ArrivalQuantilesOutputSerializer()


class SlaSuggestionOutputSerializer(serializers.Serializer):
    direction = ChoiceField(
        ["earlier", "later"],
        help_text=(
            "earlier: on 95% of the periods the partition was ready more than an hour (and "
            "more than half its own arrival time) before the deadline; later: fewer than "
            "95% were ready by deadline plus grace."
        ),
    )
    periods = serializers.IntegerField(help_text="Arrivals judged against the SLA.")
    percent = serializers.IntegerField(help_text="The share the suggestion speaks of (95).")
    ready_by_seconds = serializers.IntegerField(
        help_text="percent % of the partitions were ready within this many seconds of "
        "their period's end."
    )
    deadline_seconds = serializers.IntegerField(
        help_text="Median seconds from a period's end to its deadline (without grace)."
    )
    met_percent = serializers.IntegerField(
        help_text="Whole percentage of the periods ready by deadline plus grace."
    )
    words = serializers.CharField(help_text="The suggestion in words, as the page says it.")


class ArrivalProfileOutputSerializer(serializers.Serializer):
    window_periods = serializers.IntegerField(
        help_text="The profile reads the last this-many closed periods."
    )
    since = serializers.DateTimeField(help_text="Start of the first period read.")
    periods = serializers.IntegerField(
        help_text="Partitions counted: first ready (published or found by the poll) in the window."
    )
    backfills = serializers.IntegerField(
        help_text="Partitions left out: they became ready after a newer partition was ready."
    )
    all_days = ArrivalQuantilesOutputSerializer(help_text="Every arrival counted.")
    business_days = ArrivalQuantilesOutputSerializer(
        help_text="Periods ending Monday to Friday, in the partition time zone."
    )
    weekends = ArrivalQuantilesOutputSerializer(
        help_text="Periods ending on Saturday or Sunday, in the partition time zone."
    )
    weekdays = ArrivalWeekdaysOutputSerializer(
        help_text="Per weekday on which the period ends, in the partition time zone."
    )
    sla_suggestion = SlaSuggestionOutputSerializer(
        allow_null=True,
        help_text=(
            "With an SLA and at least TIDEMARK_SLA_SUGGESTION_MIN_PERIODS arrivals: how far "
            "the SLA is from them, when it is far either way; null otherwise."
        ),
    )


class ForecastDatasetOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()


class ForecastUpstreamOutputSerializer(serializers.Serializer):
    dataset = ForecastDatasetOutputSerializer()
    partition = serializers.CharField()


class ForecastOutputSerializer(serializers.Serializer):
    partition = serializers.CharField(help_text="A partition due at the next deadline, not ready.")
    deadline_at = serializers.DateTimeField(help_text="The next deadline.")
    estimate_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When it is expected; null when a failed upstream partition blocks it.",
    )
    basis = serializers.CharField(
        help_text="What set the estimate: p90 or overdue (the dataset's own arrival profile), "
        "upstream_lag (an upstream later than usual plus the learned lag), failed, now."
    )
    at_risk = serializers.BooleanField(
        help_text="Expected after the deadline, or blocked: dataset.at_risk is sent once."
    )
    blocked = serializers.BooleanField(help_text="A failed upstream partition holds it up.")
    via = ForecastUpstreamOutputSerializer(
        allow_null=True, help_text="The direct upstream partition that set the estimate."
    )
    cause = ForecastUpstreamOutputSerializer(
        allow_null=True, help_text="The partition furthest up the chain that holds it up."
    )


class CausedByOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField(help_text="The upstream dataset's namespace.")
    name = serializers.CharField(help_text="The upstream dataset's name.")
    partition = serializers.CharField(help_text="The upstream partition this one needs.")
    since = serializers.DateTimeField(
        help_text="Late: its deadline plus grace; failed: when its failure was received."
    )
    state = ChoiceField(["late", "failed"])


class BlastRadiusDatasetOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()


class BlastRadiusOutputSerializer(serializers.Serializer):
    partitions_count = serializers.IntegerField(
        help_text="Open late partitions downstream whose root cause is this dataset."
    )
    datasets_count = serializers.IntegerField(help_text="Their datasets.")
    datasets = BlastRadiusDatasetOutputSerializer(
        many=True, help_text="The first 20 of them, by namespace and name."
    )
    teams_count = serializers.IntegerField(help_text="Consumer teams subscribed to those datasets.")
    teams = serializers.ListField(
        child=serializers.CharField(), help_text="The first 20 of their slugs, in order."
    )


@extend_schema_serializer(examples=examples_catalog.FRESHNESS_OUTPUT)
class FreshnessOutputSerializer(serializers.Serializer):
    state = ChoiceField(
        ["fresh", "awaiting", "due", "late", "no_sla"],
        help_text=(
            "At the moment of the request, whether or not an evaluation has run since: "
            "late (a partition missed its deadline plus grace and is not ready), due (one "
            "is missing inside its grace), fresh (everything due at the last deadline is "
            "ready), awaiting (a partition due at the last deadline is missing, but that "
            "deadline passed before the SLA was set and is not judged), no_sla."
        ),
    )
    sla = serializers.CharField(allow_null=True, help_text="The SLA in words.")
    latest_ready = serializers.CharField(allow_null=True, help_text="Newest ready partition.")
    partition_due = serializers.CharField(
        allow_null=True, help_text="The partition that is due or late (the oldest if several)."
    )
    deadline_at = serializers.DateTimeField(
        allow_null=True,
        help_text="Late or due: the deadline of partition_due; fresh: the last deadline.",
    )
    late_seconds = serializers.IntegerField(
        allow_null=True, help_text="Late: seconds since partition_due's deadline plus grace."
    )
    next_deadline_at = serializers.DateTimeField(allow_null=True)
    arrival_profile = ArrivalProfileOutputSerializer(
        allow_null=True,
        help_text=(
            "When partitions usually become ready, in seconds after their period ends, "
            "learned from the dataset's own history (restatements and backfills left "
            "out). Null for an unpartitioned dataset."
        ),
    )
    forecast = ForecastOutputSerializer(
        allow_null=True,
        help_text=(
            "When the partition due at the next deadline is expected, from the dataset's "
            "own arrival profile and its upstream datasets (verified lineage): the first "
            "at risk, else the oldest not ready. Null without an SLA or when every "
            "partition due at the next deadline is ready."
        ),
    )
    caused_by = CausedByOutputSerializer(
        allow_null=True,
        help_text=(
            "Late: the root cause found when partition_due was judged late, the upstream "
            "partition furthest up verified lineage that was late or failed for the period "
            "it needs (as dataset.late's caused_by). Null otherwise, or when none was."
        ),
    )
    blast_radius = BlastRadiusOutputSerializer(
        help_text="The lateness this dataset causes downstream now: open late partitions "
        "whose root cause it is, their datasets and the consumer teams subscribed to them."
    )


# --- change notices -----------------------------------------------------------------------


@extend_schema_serializer(examples=examples_catalog.CHANGE_NOTICE_CREATE_INPUT)
class ChangeNoticeCreateInputSerializer(StrictSerializer):
    kind = ChoiceField(ChangeNotice.Kind.choices)
    description = serializers.CharField(max_length=10_000)
    schema_diff = serializers.JSONField(
        required=False, allow_null=True, help_text="Any JSON describing the schema change."
    )
    link = serializers.URLField(max_length=2048, allow_blank=True, default="")
    effective_at = serializers.DateTimeField(
        help_text="At least the dataset's change_notice_days from now, unless emergency."
    )
    emergency = serializers.BooleanField(
        default=False, help_text="Override the notice period; needs override_reason."
    )
    override_reason = serializers.CharField(max_length=2000, allow_blank=True, default="")
    require_acknowledgements = serializers.BooleanField(
        default=False,
        help_text="The notice may then take effect early (apply-early) once every consumer "
        "team has acknowledged it.",
    )


@extend_schema_serializer(examples=examples_catalog.CHANGE_NOTICE_ACKNOWLEDGEMENT_OUTPUT)
class ChangeNoticeAcknowledgementOutputSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    acknowledged_by = serializers.CharField(help_text="'key:<public id>' or 'user:<name>'.")
    acknowledged_at = serializers.DateTimeField()


@extend_schema_serializer(examples=examples_catalog.CHANGE_NOTICE_OUTPUT)
class ChangeNoticeOutputSerializer(serializers.Serializer):
    """Needs ``consumers`` (the dataset's consumer team slugs) in its context."""

    id = serializers.IntegerField()
    dataset_id = serializers.IntegerField()
    kind = ChoiceField(ChangeNotice.Kind.choices)
    description = serializers.CharField()
    schema_diff = serializers.JSONField(allow_null=True)
    link = serializers.CharField()
    announced_by = serializers.CharField()
    announced_at = serializers.DateTimeField()
    effective_at = serializers.DateTimeField()
    emergency = serializers.BooleanField(
        help_text="Announced with less than the notice period (see override_reason)."
    )
    override_reason = serializers.CharField()
    require_acknowledgements = serializers.BooleanField()
    state = ChoiceField(ChangeNotice.State.choices)
    took_effect_at = serializers.DateTimeField(allow_null=True)
    applied_early = serializers.BooleanField()
    acknowledgements = ChangeNoticeAcknowledgementOutputSerializer(
        source="acknowledgements.all", many=True
    )
    pending_acknowledgements = serializers.SerializerMethodField(
        help_text="Consumer teams (slugs) that have not acknowledged."
    )

    def get_pending_acknowledgements(self, obj) -> list[str]:
        acknowledged = {a.team.slug for a in obj.acknowledgements.all()}
        return [slug for slug in self.context["consumers"] if slug not in acknowledged]


# --- restatements -------------------------------------------------------------------------


@extend_schema_serializer(examples=examples_catalog.RESTATEMENT_OPEN_INPUT)
class RestatementOpenInputSerializer(StrictSerializer):
    version = serializers.CharField(max_length=128, help_text="The new version's label.")
    first_partition = serializers.CharField(max_length=32)
    last_partition = serializers.CharField(max_length=32, help_text="Inclusive.")
    code_version = serializers.CharField(
        max_length=128,
        allow_blank=True,
        default="",
        help_text="What produces the new version (e.g. the commit of the logic fix).",
    )
    reason = serializers.CharField(max_length=2000, allow_blank=True, default="")


class RestatementPartitionOutputSerializer(serializers.Serializer):
    partition = serializers.CharField()
    state = serializers.CharField(help_text="missing, pending, ready or failed.")
    current = serializers.BooleanField(help_text="The staged revision is current (promoted).")
    code_version = serializers.CharField(allow_null=True)
    ready_at = serializers.DateTimeField(allow_null=True)


@extend_schema_serializer(examples=examples_catalog.RESTATEMENT_OUTPUT)
class RestatementOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    dataset_id = serializers.IntegerField()
    version = serializers.CharField()
    code_version = serializers.CharField()
    first_partition = serializers.CharField()
    last_partition = serializers.CharField()
    reason = serializers.CharField()
    state = ChoiceField(Restatement.State.choices)
    opened_by = serializers.CharField()
    opened_at = serializers.DateTimeField()
    closed_by = serializers.CharField(help_text="Who promoted or abandoned it.")
    closed_at = serializers.DateTimeField(allow_null=True)
    partitions_total = serializers.SerializerMethodField()
    partitions_ready = serializers.SerializerMethodField()
    partitions = serializers.SerializerMethodField()

    def get_partitions_total(self, obj) -> int:
        return len(obj.partition_keys)

    def get_partitions_ready(self, obj) -> int:
        return sum(1 for rev in obj.staged if rev.state == PartitionRevision.State.READY)

    @extend_schema_field(RestatementPartitionOutputSerializer(many=True))
    def get_partitions(self, obj) -> list[dict]:
        rows = selectors.restatement_progress(obj)
        return RestatementPartitionOutputSerializer(rows, many=True).data
