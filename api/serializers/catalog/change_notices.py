"""Shapes of change notices: announcing a change to a dataset, and its acknowledgements."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from catalog.models import ChangeNotice
from httpkit.fields import ChoiceField

from ...openapi_examples import catalog as examples_catalog
from .base import StrictSerializer


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
