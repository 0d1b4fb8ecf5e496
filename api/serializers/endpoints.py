"""An endpoint's lifecycle: recovering its failed deliveries, and its delivery log."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from catalog.selectors import ATTEMPT_OUTCOMES
from httpkit.fields import ChoiceField, InstantField

from ..openapi_examples import delivery as examples_delivery
from .catalog import StrictSerializer


@extend_schema_serializer(examples=examples_delivery.ENDPOINT_UPDATE_INPUT)
class EndpointUpdateInputSerializer(StrictSerializer):
    rate_limit_per_second = serializers.IntegerField(
        min_value=1,
        max_value=100_000,
        allow_null=True,
        required=False,
        help_text="Most deliveries sent to the endpoint per second, in bursts of at most "
        "one second's worth; null: the deployment's default (TIDEMARK_DELIVERY_ENDPOINT_RATE, "
        "1000 by default: in effect unlimited). Absent: unchanged.",
    )


@extend_schema_serializer(examples=examples_delivery.ENDPOINT_RECOVER_INPUT)
class EndpointRecoverInputSerializer(StrictSerializer):
    since = InstantField(
        help_text="RFC 3339. Every delivery to the endpoint that failed (dead or "
        "rejected), of notifications made at or after this time, is sent again. At most "
        "now, and no more than the recovery window back (TIDEMARK_RECOVER_WINDOW_DAYS, "
        "14 days by default)."
    )


@extend_schema_serializer(examples=examples_delivery.ENDPOINT_RECOVER_OUTPUT)
class EndpointRecoverOutputSerializer(serializers.Serializer):
    queued = serializers.IntegerField(
        help_text="Failed deliveries queued again, each with its original webhook-id; 0 "
        "when none failed since `since`, or a recovery already queued them. At most "
        "TIDEMARK_RECOVER_MAX (10,000 by default)."
    )
    remaining = serializers.IntegerField(
        help_text="Failed deliveries since `since` left past that maximum: the same "
        "recovery again queues the next ones. 0: the recovery is complete."
    )
    since = serializers.DateTimeField()
    earliest_since = serializers.DateTimeField(
        help_text="The earliest `since` a recovery accepts now."
    )


class AttemptListFilterSerializer(StrictSerializer):
    outcome = ChoiceField(
        list(ATTEMPT_OUTCOMES),
        required=False,
        help_text="An attempt's decision (succeeded, retry, rejected, gone), or failed: "
        "any but succeeded.",
    )
    status_code = serializers.IntegerField(
        min_value=100, max_value=599, required=False, help_text="An HTTP status answered."
    )
    since = serializers.DateTimeField(
        required=False, help_text="RFC 3339: attempts started at or after this time."
    )
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


@extend_schema_serializer(examples=examples_delivery.ATTEMPT_LOG_OUTPUT)
class AttemptLogOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    delivery_id = serializers.IntegerField()
    webhook_id = serializers.UUIDField(source="delivery.notification_id")
    type = serializers.CharField(source="delivery.notification.type", help_text="Event type.")
    number = serializers.IntegerField(help_text="The delivery's attempt number, from 1.")
    attempted_at = serializers.DateTimeField(source="started_at", help_text="UTC.")
    status_code = serializers.IntegerField(
        allow_null=True, help_text="The HTTP status answered; null when none came back."
    )
    error_kind = serializers.CharField(
        help_text="Why no answer came, when none did: timeout, connect (refused or "
        "unreachable), deadline, protocol, blocked (refused by the SSRF guard), "
        "invalid_url, mail; empty otherwise."
    )
    error = serializers.CharField()
    outcome = serializers.CharField(
        source="decision", help_text="succeeded, retry, rejected or gone."
    )
    latency_ms = serializers.IntegerField(source="duration_ms")
    response_excerpt = serializers.CharField(
        help_text="The first KiB of the answer's body, as received."
    )
    next_attempt_in_seconds = serializers.FloatField(allow_null=True)
