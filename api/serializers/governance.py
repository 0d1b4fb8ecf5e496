"""Shapes of claims and governance reports."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from catalog.models import Claim, DatasetTransfer, RunConflict, SchemaObservation
from httpkit.fields import ChoiceField

from ..openapi_examples import governance as examples_governance
from .catalog import StrictSerializer
from .lineage import JobRefSerializer


@extend_schema_serializer(examples=examples_governance.CLAIM_CREATE_INPUT)
class ClaimCreateInputSerializer(StrictSerializer):
    kind = ChoiceField(Claim.Kind.choices, default=Claim.Kind.JOB_NAMESPACE)
    pattern = serializers.CharField(
        max_length=255,
        trim_whitespace=False,
        help_text="For job_namespace: the OpenLineage job namespace, matched exactly. "
        "For db_role: <server dataset namespace>/<role>. For dataset_prefix: a dataset "
        "namespace and the start of a name (s3://lake/sales/), normalised like a dataset's "
        "identity and matched as a prefix of namespace/name.",
    )


@extend_schema_serializer(examples=examples_governance.CLAIM_OUTPUT)
class ClaimOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    kind = serializers.CharField()
    pattern = serializers.CharField()
    created_at = serializers.DateTimeField()


@extend_schema_serializer(examples=examples_governance.DATASET_TRANSFER_CREATE_INPUT)
class DatasetTransferCreateInputSerializer(StrictSerializer):
    to_team = serializers.SlugField(max_length=64, help_text="The receiving team's slug.")


@extend_schema_serializer(examples=examples_governance.DATASET_TRANSFER_OUTPUT)
class DatasetTransferOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    dataset = serializers.IntegerField(source="dataset_id")
    from_team = serializers.CharField(source="from_team.slug")
    to_team = serializers.CharField(source="to_team.slug")
    state = ChoiceField(DatasetTransfer.State.choices)
    proposed_by = serializers.CharField()
    decided_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class DatasetTransferListFilterSerializer(StrictSerializer):
    state = ChoiceField(
        DatasetTransfer.State.choices, required=False, help_text="Only transfers in this state."
    )
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


@extend_schema_serializer(examples=examples_governance.DATASET_TRANSFER_LIST_OUTPUT)
class DatasetTransferListOutputSerializer(DatasetTransferOutputSerializer):
    namespace = serializers.CharField(source="dataset.namespace", help_text="The dataset's.")
    name = serializers.CharField(source="dataset.name", help_text="The dataset's.")


class UndeclaredReadsFilterSerializer(StrictSerializer):
    verified = ChoiceField(
        ["true", "false", "all"],
        default="true",
        help_text="true (default): verified reads only; false: only the unverified ones, "
        "shown apart; all: both, each row saying which.",
    )
    team = serializers.SlugField(
        required=False, help_text="With the governance scope: only this team's reads."
    )
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


@extend_schema_serializer(examples=examples_governance.UNDECLARED_READ_OUTPUT)
class UndeclaredReadOutputSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug", help_text="The reading team.")
    job = serializers.SerializerMethodField()
    dataset = serializers.SerializerMethodField()
    first_seen_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    runs = serializers.IntegerField(source="run_count", help_text="Runs that read it.")
    verified = serializers.BooleanField()

    def get_job(self, obj) -> dict:
        return {"namespace": obj.job.namespace, "name": obj.job.name}

    def get_dataset(self, obj) -> dict:
        return {
            "id": obj.dataset_id,
            "namespace": obj.dataset.namespace,
            "name": obj.dataset.name,
            "owner": obj.dataset.owner.slug,
        }


class _DatasetField(serializers.Serializer):
    id = serializers.IntegerField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    owner = serializers.CharField(source="owner.slug")


class ReportFilterSerializer(StrictSerializer):
    team = serializers.SlugField(
        required=False, help_text="With the governance scope: only this team's rows."
    )
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=500, required=False)


class StaleDeclarationsFilterSerializer(ReportFilterSerializer):
    days = serializers.IntegerField(
        min_value=1,
        max_value=3650,
        required=False,
        help_text="The window in days (default: TIDEMARK_STALE_DECLARATION_DAYS, 30).",
    )


@extend_schema_serializer(examples=examples_governance.STALE_DECLARATION_OUTPUT)
class StaleDeclarationOutputSerializer(serializers.Serializer):
    subscription = serializers.IntegerField(source="id", help_text="The subscription's id.")
    team = serializers.CharField(source="team.slug", help_text="The subscribing team.")
    job = serializers.SerializerMethodField(help_text="The job it names; null: none.")
    dataset = _DatasetField()
    created_at = serializers.DateTimeField(help_text="When it was declared.")
    last_read_at = serializers.DateTimeField(
        allow_null=True,
        help_text="The team's latest verified read of the dataset; null: never seen.",
    )

    @extend_schema_field(JobRefSerializer(allow_null=True))
    def get_job(self, obj) -> dict | None:
        if not obj.job_namespace and not obj.job_name:
            return None
        return {"namespace": obj.job_namespace, "name": obj.job_name}


@extend_schema_serializer(examples=examples_governance.UNDECLARED_WRITE_OUTPUT)
class UndeclaredWriteOutputSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug", help_text="The writing team.")
    job = JobRefSerializer()
    dataset = _DatasetField()
    first_seen_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    runs = serializers.IntegerField(source="run_count", help_text="Runs that wrote it.")


class _UsageParty(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    job = JobRefSerializer()
    last_seen_at = serializers.DateTimeField()
    runs = serializers.IntegerField(source="run_count")


@extend_schema_serializer(examples=examples_governance.UNCATALOGUED_DATASET_OUTPUT)
class UncataloguedDatasetOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField(source="dataset_namespace", help_text="Normalised.")
    name = serializers.CharField(source="dataset_name", help_text="Normalised.")
    first_seen_at = serializers.DateTimeField(source="first_seen")
    last_seen_at = serializers.DateTimeField(source="last_seen")
    runs = serializers.IntegerField(help_text="Runs that read or wrote it, per job summed.")
    readers = _UsageParty(many=True, help_text="Teams and jobs seen reading it.")
    writers = _UsageParty(many=True, help_text="Teams and jobs seen writing it.")


# "from" is a Python keyword, so the class is built with type().
RetypedColumnSerializer = type(
    "RetypedColumnSerializer",
    (serializers.Serializer,),
    {
        "name": serializers.CharField(help_text="The column's dotted path."),
        "from": serializers.CharField(help_text="Its type before."),
        "to": serializers.CharField(help_text="Its type now."),
    },
)


@extend_schema_serializer(examples=examples_governance.UNANNOUNCED_CHANGE_OUTPUT)
class UnannouncedChangeOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    dataset = _DatasetField()
    observed_at = serializers.DateTimeField(
        help_text="When the new schema was first seen (the event's time)."
    )
    previous_observed_at = serializers.DateTimeField(
        source="previous.observed_at", help_text="When the schema before it was first seen."
    )
    removed = serializers.ListField(child=serializers.CharField(), help_text="Columns gone.")
    retyped = RetypedColumnSerializer(many=True, help_text="Columns whose type changed.")
    added = serializers.ListField(
        child=serializers.CharField(), help_text="Columns new (not breaking; for context)."
    )
    source = ChoiceField(
        SchemaObservation.Source.choices,
        source="observation.source",
        help_text="What showed the new schema: a lineage event or a readiness publish.",
    )
    job = serializers.SerializerMethodField(help_text="The lineage job; null: a publish.")
    run_id = serializers.UUIDField(source="observation.run_id", allow_null=True)
    readiness_event_id = serializers.IntegerField(
        source="observation.readiness_event_id", allow_null=True
    )
    created_at = serializers.DateTimeField(help_text="When Tidemark detected it.")

    @extend_schema_field(JobRefSerializer(allow_null=True))
    def get_job(self, obj) -> dict | None:
        if not obj.observation.job_namespace:
            return None
        return {"namespace": obj.observation.job_namespace, "name": obj.observation.job_name}


class _RunSide(serializers.Serializer):
    job = JobRefSerializer(source="run_job")
    team = serializers.CharField(source="run_team.slug", help_text="Whose events made the run.")
    verified = serializers.BooleanField(
        source="run_verified", help_text="Verified events of its job made the run."
    )


class _ConflictingEventSide(serializers.Serializer):
    id = serializers.IntegerField(
        source="event_id", help_text="The raw event's id (under the run's events)."
    )
    team = serializers.CharField(source="event_team.slug", help_text="The sending team.")
    job = JobRefSerializer(source="event_job", help_text="The job the event named.")
    verified = serializers.BooleanField(source="event_verified")
    event_type = serializers.SerializerMethodField()
    event_time = serializers.DateTimeField()

    def get_event_type(self, obj) -> str | None:
        return obj.event_type or None


@extend_schema_serializer(examples=examples_governance.RUN_CONFLICT_OUTPUT)
class RunConflictOutputSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    run = _RunSide(source="*", help_text="Whose the run is.")
    event = _ConflictingEventSide(source="*", help_text="The event kept out of it.")
    reason = ChoiceField(
        RunConflict.Reason.choices,
        help_text="other_job: it names another job than the run's; unverified: it is "
        "unverified and the run's events are verified; other_team: another team's "
        "unverified report of the run's job.",
    )
    detected_at = serializers.DateTimeField(help_text="When processing found it.")


@extend_schema_serializer(examples=examples_governance.NEEDED_EARLIER_OUTPUT)
class NeededEarlierOutputSerializer(serializers.Serializer):
    subscription = serializers.IntegerField(source="subscription.id")
    dataset = _DatasetField(help_text="The dataset, with its owner (the producer).")
    team = serializers.CharField(help_text="The consumer team.")
    job = serializers.DictField(
        child=serializers.CharField(), allow_null=True, help_text="The job it names; null: none."
    )
    sla_deadline_at = serializers.DateTimeField(
        allow_null=True,
        help_text="The producer's next SLA deadline where the need-by comes furthest before "
        "it (over the next 3).",
    )
    need_by_at = serializers.DateTimeField(
        allow_null=True, help_text="The consumer's need-by of the same period."
    )
    gap_minutes = serializers.IntegerField(
        allow_null=True, help_text="sla_deadline_at - need_by_at, in minutes."
    )
