"""Shapes of claims and governance reports."""

from __future__ import annotations

from rest_framework import serializers

from catalog.models import Claim

from .catalog import StrictSerializer


class ClaimCreateInputSerializer(StrictSerializer):
    kind = serializers.ChoiceField(Claim.Kind.choices, default=Claim.Kind.JOB_NAMESPACE)
    pattern = serializers.CharField(
        max_length=255,
        trim_whitespace=False,
        help_text="For job_namespace: the OpenLineage job namespace, matched exactly.",
    )


class ClaimOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    kind = serializers.CharField()
    pattern = serializers.CharField()
    created_at = serializers.DateTimeField()


class UndeclaredReadsFilterSerializer(StrictSerializer):
    verified = serializers.ChoiceField(
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
