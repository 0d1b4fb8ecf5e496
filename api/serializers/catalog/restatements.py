"""Shapes of restatements: opening one over a range of partitions, and its progress."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from catalog import selectors
from catalog.models import PartitionRevision, Restatement
from httpkit.fields import ChoiceField

from ...openapi_examples import catalog as examples_catalog
from .base import StrictSerializer


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
