"""The event catalog's output: one notification type with its schema and example."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from ..openapi_examples import lineage as examples_lineage


@extend_schema_serializer(examples=examples_lineage.EVENT_TYPE_OUTPUT)
class EventTypeOutputSerializer(serializers.Serializer):
    type = serializers.CharField(source="name", help_text="e.g. partition.ready")
    audience = serializers.ListField(
        child=serializers.ChoiceField(["subscribers", "owners", "consumers", "watchdog"]),
        help_text="Who receives it: subscribers' webhooks, the contacts of the team owning "
        "the dataset or endpoint, consumer teams' contacts, or the watchdog.",
    )
    description = serializers.CharField()
    schema = serializers.JSONField(
        help_text="JSON Schema (draft 2020-12) of the whole payload (id, type, timestamp, "
        "data). Objects do not forbid fields they do not list: ignore unknown ones."
    )
    example = serializers.JSONField(help_text="A payload of this type.")


@extend_schema_serializer(examples=examples_lineage.EVENT_TYPE_LIST_OUTPUT)
class EventTypeListOutputSerializer(serializers.Serializer):
    results = EventTypeOutputSerializer(many=True)
