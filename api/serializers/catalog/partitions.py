"""Shapes of readiness and partitions: publishing a partition ready or failed, the
partitions and their revisions, and the storage poll that finds what is not published."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from catalog.models import PartitionRevision
from httpkit.fields import ChoiceField

from ...openapi_examples import catalog as examples_catalog
from .base import FieldsOncePerThread, StrictSerializer


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
    narrow = serializers.BooleanField(
        help_text="Listed only the datasets with a partition due (poll-only datasets whose "
        "latest period is not ready, or whose SLA check is next); every dataset is listed "
        "at least hourly."
    )
    datasets_listed = serializers.IntegerField(help_text="Datasets whose names were listed.")
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
