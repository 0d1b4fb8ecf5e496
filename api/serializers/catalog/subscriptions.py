"""Shapes of subscriptions: a consumer team declaring what it reads, where to be told,
and by when it needs each partition."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from catalog import endpoint_actions
from catalog.event_types import subscriber_event_type_names
from catalog.models import Notification
from httpkit.fields import ChoiceField, InstantField
from problems import REQUIRED_DETAIL

from ...openapi_examples import catalog as examples_catalog
from .base import StrictSerializer


def _required() -> serializers.ErrorDetail:
    """A missing field's error, as DRF words it (a rule across fields noticed it)."""
    return serializers.ErrorDetail(REQUIRED_DETAIL, code="required")


NEWEST_ONLY_HELP = (
    "Tell this subscription about the newest partitions only: no backfills (a partition.ready "
    "whose backfill is true) and no partition.restated of a partition older than the newest "
    "ready one. For consumers that read the latest data only."
)


# The types a subscription can receive: owner notices and watchdog events never go to one.
SUBSCRIBER_TYPES = [
    (value, label)
    for value, label in Notification.Type.choices
    if value in set(subscriber_event_type_names())
]
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
        child=ChoiceField(SUBSCRIBER_TYPES),
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
    since = InstantField(
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
        refusal = endpoint_actions.webhook_url_refusal(url) if url else None
        if refusal is not None:
            raise serializers.ValidationError(
                {"endpoint_url": ErrorDetail(f"{url[:200]!r} {refusal.detail}", refusal.rule)}
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
        child=ChoiceField(SUBSCRIBER_TYPES),
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
    message = serializers.CharField(
        source="detail",
        help_text="The same text as detail, so that every warning of the API reads as "
        "{code, field, message}.",
    )
    sunset_at = serializers.DateTimeField(allow_null=True)
    field = serializers.CharField(
        allow_null=True, required=False, help_text="The input field it is about, if one."
    )


class SubscriptionEndpointRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The endpoint's id in /api/v1/endpoints.")
    url = serializers.CharField()


@extend_schema_serializer(examples=examples_catalog.SUBSCRIPTION_OUTPUT)
class SubscriptionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    dataset = serializers.SerializerMethodField()
    job_namespace = serializers.CharField()
    job_name = serializers.CharField()
    endpoint_url = serializers.SerializerMethodField(
        help_text="Its first endpoint's URL (the one its declaration named); null: none."
    )
    endpoints = serializers.SerializerMethodField(
        help_text="Every webhook endpoint it delivers to, its first one first: each "
        "notification its filters let through is delivered to each of them, with its own "
        "retries, signed with that endpoint's secret, with the same webhook-id."
    )
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

    @extend_schema_field(SubscriptionEndpointRefSerializer(many=True))
    def get_endpoints(self, obj) -> list[dict]:
        first = [obj.endpoint] if obj.endpoint else []
        # In the order they were added; prefetched by the list (no query per row).
        links = sorted(obj.more_endpoints.all(), key=lambda link: link.pk)
        return [{"id": e.pk, "url": e.url} for e in first + [link.endpoint for link in links]]


@extend_schema_serializer(examples=examples_catalog.SUBSCRIPTION_ENDPOINT_ADD_INPUT)
class SubscriptionEndpointAddInputSerializer(StrictSerializer):
    url = serializers.URLField(
        max_length=2048,
        help_text="The webhook to deliver to as well: an https URL without credentials. "
        "Your team's endpoint at this URL is reused (secret, health, rate limit), or "
        "created with a new signing secret.",
    )
    since = InstantField(
        required=False,
        help_text="Also deliver the dataset's notifications since then to this endpoint "
        "(<= 30 days), as a declaration's since does.",
    )

    def validate_url(self, value: str) -> str:
        refusal = endpoint_actions.webhook_url_refusal(value)
        if refusal is not None:
            raise serializers.ValidationError(
                ErrorDetail(f"{value[:200]!r} {refusal.detail}", refusal.rule)
            )
        return value


@extend_schema_serializer(examples=examples_catalog.SUBSCRIPTION_ENDPOINT_OUTPUT)
class SubscriptionEndpointOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The endpoint's id in /api/v1/endpoints.")
    url = serializers.CharField()
    subscription_id = serializers.IntegerField()
    endpoint_secret = serializers.CharField(
        read_only=True,
        required=False,
        help_text="The endpoint's Standard Webhooks signing secret: only in the response "
        "that created the endpoint.",
    )
    caught_up = serializers.IntegerField(
        help_text="Deliveries queued to it for `since`; 0 without one."
    )
