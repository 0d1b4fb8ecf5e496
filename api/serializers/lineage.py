"""Shapes of the lineage API: the OpenLineage event (documented, checked by lineage), runs
and raw events."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from catalog import lineage_graph as graph
from httpkit.fields import ChoiceField
from lineage.models import LineageRun
from lineage.openlineage import EVENT_TYPES

from ..openapi_examples import lineage as examples_lineage
from .catalog import StrictSerializer

# --- the OpenLineage event (documentation only: lineage.openlineage checks the body) ---


class OpenLineageJobSerializer(serializers.Serializer):
    namespace = serializers.CharField(max_length=255)
    name = serializers.CharField(max_length=1024)
    facets = serializers.DictField(required=False, help_text="Job facets, kept as sent.")


class OpenLineageRunSerializer(serializers.Serializer):
    runId = serializers.UUIDField()
    facets = serializers.DictField(
        required=False, help_text="Run facets, kept as sent; `parent` names the parent run."
    )


class OpenLineageDatasetSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    facets = serializers.DictField(required=False)
    inputFacets = serializers.DictField(required=False)
    outputFacets = serializers.DictField(required=False)


@extend_schema_serializer(examples=examples_lineage.OPEN_LINEAGE_EVENT_INPUT)
class OpenLineageEventSerializer(serializers.Serializer):
    """One OpenLineage event, spec 2-0-2 (https://openlineage.io/spec/2-0-2/OpenLineage.json):
    a RunEvent (``run`` and ``job``, ``eventType`` optional), a JobEvent (``job``, no
    ``run``) or a DatasetEvent (``dataset`` only). Unknown members and facets are kept."""

    eventTime = serializers.CharField(help_text="RFC 3339; without an offset it is read as UTC.")
    eventType = ChoiceField(EVENT_TYPES, required=False)
    run = OpenLineageRunSerializer(required=False)
    job = OpenLineageJobSerializer(required=False)
    inputs = OpenLineageDatasetSerializer(many=True, required=False)
    outputs = OpenLineageDatasetSerializer(many=True, required=False)
    dataset = OpenLineageDatasetSerializer(required=False)
    producer = serializers.URLField()
    schemaURL = serializers.URLField()


class FieldProblemSerializer(serializers.Serializer):
    field = serializers.CharField()
    rule = serializers.CharField()
    detail = serializers.CharField()


@extend_schema_serializer(examples=examples_lineage.LINEAGE_EVENT_RECEIVED_OUTPUT)
class LineageEventReceivedOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The stored event's id.")
    kind = ChoiceField(["run", "job", "dataset"])
    event_type = serializers.CharField(allow_null=True)
    event_time = serializers.DateTimeField()
    event_time_assumed_utc = serializers.BooleanField(
        help_text="eventTime had no offset and was read as UTC."
    )
    run_id = serializers.UUIDField(allow_null=True)
    job = serializers.DictField(allow_null=True)
    team = serializers.CharField(help_text="The team the event is attributed to (the key's).")
    verified = serializers.BooleanField(
        help_text="The team claims the job namespace; else the usage is kept apart."
    )
    duplicate = serializers.BooleanField(help_text="This team sent the same event before.")
    problems = FieldProblemSerializer(
        many=True, help_text="Flagged parts (malformed standard facets ...), kept but unused."
    )


# --- runs and raw events ----------------------------------------------------------------


class RunListFilterSerializer(StrictSerializer):
    job_namespace = serializers.CharField(max_length=255, trim_whitespace=False)
    job_name = serializers.CharField(max_length=1024, trim_whitespace=False)
    state = ChoiceField(LineageRun.State.values, required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


class JobRefSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()


@extend_schema_serializer(examples=examples_lineage.RUN_OUTPUT)
class RunOutputSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    job = JobRefSerializer()
    state = ChoiceField(LineageRun.State.values)
    started_at = serializers.DateTimeField(allow_null=True, help_text="The START's eventTime.")
    ended_at = serializers.DateTimeField(
        allow_null=True, help_text="The COMPLETE, FAIL or ABORT's eventTime."
    )
    last_event_at = serializers.DateTimeField(allow_null=True)
    parent_run_id = serializers.UUIDField(allow_null=True)
    parent_job = serializers.SerializerMethodField()
    team = serializers.CharField(
        source="team.slug", help_text="The team whose events the run is made of."
    )
    verified = serializers.BooleanField(
        help_text="Verified events of its job made the run: only they count for it."
    )

    def get_parent_job(self, obj) -> dict | None:
        if obj.parent_run_id is None:
            return None
        return {"namespace": obj.parent_job_namespace, "name": obj.parent_job_name}


@extend_schema_serializer(examples=examples_lineage.LINEAGE_EVENT_OUTPUT)
class LineageEventOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    event_type = serializers.SerializerMethodField()
    event_time = serializers.DateTimeField()
    event_time_assumed_utc = serializers.BooleanField()
    team = serializers.CharField(source="team.slug")
    verified = serializers.BooleanField()
    received_at = serializers.DateTimeField()
    content_encoding = serializers.CharField()
    state = serializers.CharField(help_text="Processing: pending, processed or failed.")
    conflict = serializers.CharField(
        allow_null=True,
        help_text="Why it was kept out of the run (other_job, unverified, other_team: see "
        "the run conflicts report); null when it was not.",
    )
    processed_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField()
    problems = FieldProblemSerializer(many=True)
    payload = serializers.JSONField(help_text="The event as received.")

    def get_event_type(self, obj) -> str | None:
        return obj.event_type or None


# --- the lineage graph --------------------------------------------------------------------


class LineageGraphFilterSerializer(StrictSerializer):
    """The graph's root, one dataset (``namespace`` + ``name``) or one job
    (``job_namespace`` + ``job_name``), and how far to walk."""

    namespace = serializers.CharField(max_length=255, required=False, trim_whitespace=False)
    name = serializers.CharField(max_length=1024, required=False, trim_whitespace=False)
    job_namespace = serializers.CharField(max_length=255, required=False, trim_whitespace=False)
    job_name = serializers.CharField(max_length=1024, required=False, trim_whitespace=False)
    depth = serializers.IntegerField(
        min_value=1,
        max_value=graph.MAX_DEPTH,
        default=graph.DEFAULT_DEPTH,
        help_text="Job hops to walk from the root (1 to 5).",
    )
    direction = ChoiceField(graph.DIRECTIONS, default=graph.BOTH)
    include_unverified = serializers.BooleanField(
        default=False, help_text="Add the unverified edges (each marked verified: false)."
    )

    def validate(self, attrs: dict) -> dict:
        dataset = "namespace" in attrs or "name" in attrs
        job = "job_namespace" in attrs or "job_name" in attrs
        if dataset == job:
            raise serializers.ValidationError(
                {"namespace": "give a dataset (namespace, name) or a job (job_namespace, job_name)"}
            )
        pair = ("namespace", "name") if dataset else ("job_namespace", "job_name")
        missing = [f for f in pair if f not in attrs]
        if missing:
            raise serializers.ValidationError({f: "This field is required." for f in missing})
        return attrs


class LineageGraphNodeSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="dataset:<namespace>:<name> or job:<namespace>:<name>")
    type = ChoiceField([graph.DATASET, graph.JOB])
    namespace = serializers.CharField()
    name = serializers.CharField()
    catalogued = serializers.BooleanField(
        required=False, help_text="Datasets: a registered dataset has this identity."
    )
    dataset_id = serializers.IntegerField(
        required=False, allow_null=True, help_text="Datasets: the registered dataset's id."
    )
    team = serializers.CharField(
        required=False, allow_null=True, help_text="Jobs: the verified owner team, if any."
    )

    def to_representation(self, instance: dict) -> dict:
        # A dataset node has no team, a job node no catalogued/dataset_id: leave them out.
        data = super().to_representation(instance)
        return {key: value for key, value in data.items() if key in instance}


class LineageGraphEdgeSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="A dataset's id for reads, the job's for writes.")
    target = serializers.CharField()
    direction = ChoiceField([graph.READ, graph.WRITE])
    run_count = serializers.IntegerField(help_text="Runs that used it, over reporting teams.")
    last_seen = serializers.DateTimeField()
    verified = serializers.BooleanField()


@extend_schema_serializer(examples=examples_lineage.LINEAGE_GRAPH_OUTPUT)
class LineageGraphOutputSerializer(serializers.Serializer):
    root = serializers.CharField(help_text="The root node's id.")
    truncated = serializers.BooleanField(
        help_text="The walk stopped widening past 500 nodes before reaching its depth."
    )
    nodes = LineageGraphNodeSerializer(many=True)
    edges = LineageGraphEdgeSerializer(many=True)
