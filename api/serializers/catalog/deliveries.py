"""Shapes of a team's webhook endpoints and their deliveries: the endpoint with its
delivery counts, its secret's rotation, replays, and each delivery with its attempts.
(Changing and recovering an endpoint, and its attempt log: ``api.serializers.endpoints``.)"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from catalog.models import Delivery
from httpkit.fields import ChoiceField

from ...openapi_examples import delivery as examples_delivery
from .base import StrictSerializer


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
    deliveries = serializers.SerializerMethodField(
        help_text="`succeeded` in the last day and `success_rate` over it (succeeded over "
        "succeeded plus dead letters that finished then; null when none did), `waiting` "
        "(pending or retrying), `dead_letters` (all kept). The last day is whole UTC "
        "hours, from the start of the hour that was 24 hours ago: 24 to 25 hours."
    )

    def get_deliveries(self, obj) -> dict:
        succeeded = obj.n_succeeded
        finished = succeeded + obj.n_dead_recent
        return {
            "succeeded": succeeded,
            "waiting": obj.n_waiting,
            "dead_letters": obj.n_dead_letters,
            "success_rate": round(succeeded / finished, 4) if finished else None,
        }


@extend_schema_serializer(examples=examples_delivery.SECRET_OUTPUT)
class SecretOutputSerializer(serializers.Serializer):
    endpoint_secret = serializers.CharField(
        help_text="The new signing secret, shown only here (named as when an endpoint is created)."
    )
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
