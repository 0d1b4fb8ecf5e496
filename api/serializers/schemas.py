"""Shapes of dataset schema observations."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from catalog.models import SchemaObservation
from httpkit.fields import ChoiceField

from ..openapi_examples import governance as examples_governance
from .catalog import StrictSerializer
from .lineage import JobRefSerializer


class SchemaObservationFilterSerializer(StrictSerializer):
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


@extend_schema_serializer(examples=examples_governance.SCHEMA_OBSERVATION_OUTPUT)
class SchemaObservationOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    fields = serializers.JSONField(
        help_text='The columns: [{"name", "type" (null: none given), "fields"? (nested)}].'
    )
    fingerprint = serializers.CharField(help_text="SHA-256 of the columns, whatever their order.")
    observed_at = serializers.DateTimeField(help_text="When this schema was first seen.")
    last_seen_at = serializers.DateTimeField(
        help_text="When it was last seen (moved by steps of an hour at least)."
    )
    source = ChoiceField(SchemaObservation.Source.choices)
    team = serializers.SerializerMethodField(help_text="The team whose event showed it.")
    job = serializers.SerializerMethodField(help_text="The lineage job; null: a publish.")
    run_id = serializers.UUIDField(allow_null=True)
    readiness_event_id = serializers.IntegerField(allow_null=True)

    def get_team(self, obj) -> str | None:
        return obj.team.slug if obj.team_id else None

    @extend_schema_field(JobRefSerializer(allow_null=True))
    def get_job(self, obj) -> dict | None:
        if not obj.job_namespace:
            return None
        return {"namespace": obj.job_namespace, "name": obj.job_name}
