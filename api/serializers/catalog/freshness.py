"""Shapes of a dataset's freshness: its state now, its learned arrival profile, the
forecast of the partition due next, and the lateness it causes downstream."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from httpkit.fields import ChoiceField

from ...openapi_examples import catalog as examples_catalog


class ArrivalQuantilesOutputSerializer(serializers.Serializer):
    periods = serializers.IntegerField(help_text="Arrivals in this group of periods.")
    p50_seconds = serializers.IntegerField(
        allow_null=True,
        help_text=(
            "Half of these periods were ready within this many seconds of their end "
            "(negative: before it). Null while the group has fewer arrivals than "
            "TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS."
        ),
    )
    p90_seconds = serializers.IntegerField(
        allow_null=True, help_text="Ready within this many seconds on 90% of them; null as p50."
    )
    p99_seconds = serializers.IntegerField(
        allow_null=True,
        help_text=(
            "Ready within this many seconds on 99% of them (with fewer than 100 arrivals, "
            "the latest seen); null as p50."
        ),
    )


class ArrivalWeekdaysOutputSerializer(serializers.Serializer):
    monday = ArrivalQuantilesOutputSerializer()
    tuesday = ArrivalQuantilesOutputSerializer()
    wednesday = ArrivalQuantilesOutputSerializer()
    thursday = ArrivalQuantilesOutputSerializer()
    friday = ArrivalQuantilesOutputSerializer()
    saturday = ArrivalQuantilesOutputSerializer()
    sunday = ArrivalQuantilesOutputSerializer()


class SlaSuggestionOutputSerializer(serializers.Serializer):
    direction = ChoiceField(
        ["earlier", "later"],
        help_text=(
            "earlier: on 95% of the periods the partition was ready more than an hour (and "
            "more than half its own arrival time) before the deadline; later: fewer than "
            "95% were ready by deadline plus grace."
        ),
    )
    periods = serializers.IntegerField(help_text="Arrivals judged against the SLA.")
    percent = serializers.IntegerField(help_text="The share the suggestion speaks of (95).")
    ready_by_seconds = serializers.IntegerField(
        help_text="percent % of the partitions were ready within this many seconds of "
        "their period's end."
    )
    deadline_seconds = serializers.IntegerField(
        help_text="Median seconds from a period's end to its deadline (without grace)."
    )
    met_percent = serializers.IntegerField(
        help_text="Whole percentage of the periods ready by deadline plus grace."
    )
    words = serializers.CharField(help_text="The suggestion in words, as the page says it.")


class ArrivalProfileOutputSerializer(serializers.Serializer):
    window_periods = serializers.IntegerField(
        help_text="The profile reads the last this-many closed periods."
    )
    since = serializers.DateTimeField(help_text="Start of the first period read.")
    periods = serializers.IntegerField(
        help_text="Partitions counted: first ready (published or found by the poll) in the window."
    )
    backfills = serializers.IntegerField(
        help_text="Partitions left out: they became ready after a newer partition was ready."
    )
    all_days = ArrivalQuantilesOutputSerializer(help_text="Every arrival counted.")
    business_days = ArrivalQuantilesOutputSerializer(
        help_text="Periods ending Monday to Friday, in the partition time zone."
    )
    weekends = ArrivalQuantilesOutputSerializer(
        help_text="Periods ending on Saturday or Sunday, in the partition time zone."
    )
    weekdays = ArrivalWeekdaysOutputSerializer(
        help_text="Per weekday on which the period ends, in the partition time zone."
    )
    sla_suggestion = SlaSuggestionOutputSerializer(
        allow_null=True,
        help_text=(
            "With an SLA and at least TIDEMARK_SLA_SUGGESTION_MIN_PERIODS arrivals: how far "
            "the SLA is from them, when it is far either way; null otherwise."
        ),
    )


class ForecastDatasetOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()


class ForecastUpstreamOutputSerializer(serializers.Serializer):
    dataset = ForecastDatasetOutputSerializer()
    partition = serializers.CharField()


class ForecastOutputSerializer(serializers.Serializer):
    partition = serializers.CharField(help_text="A partition due at the next deadline, not ready.")
    deadline_at = serializers.DateTimeField(help_text="The next deadline.")
    estimate_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When it is expected; null when a failed upstream partition blocks it.",
    )
    basis = serializers.CharField(
        help_text="What set the estimate: p90 or overdue (the dataset's own arrival profile), "
        "upstream_lag (an upstream later than usual plus the learned lag), failed, now."
    )
    at_risk = serializers.BooleanField(
        help_text="Expected after the deadline, or blocked: dataset.at_risk is sent once."
    )
    blocked = serializers.BooleanField(help_text="A failed upstream partition holds it up.")
    via = ForecastUpstreamOutputSerializer(
        allow_null=True, help_text="The direct upstream partition that set the estimate."
    )
    cause = ForecastUpstreamOutputSerializer(
        allow_null=True, help_text="The partition furthest up the chain that holds it up."
    )


class CausedByOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField(help_text="The upstream dataset's namespace.")
    name = serializers.CharField(help_text="The upstream dataset's name.")
    partition = serializers.CharField(help_text="The upstream partition this one needs.")
    since = serializers.DateTimeField(
        help_text="Late: its deadline plus grace; failed: when its failure was received."
    )
    state = ChoiceField(["late", "failed"])


class BlastRadiusDatasetOutputSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()


class BlastRadiusOutputSerializer(serializers.Serializer):
    partitions_count = serializers.IntegerField(
        help_text="Open late partitions downstream whose root cause is this dataset."
    )
    datasets_count = serializers.IntegerField(help_text="Their datasets.")
    datasets = BlastRadiusDatasetOutputSerializer(
        many=True, help_text="The first 20 of them, by namespace and name."
    )
    teams_count = serializers.IntegerField(help_text="Consumer teams subscribed to those datasets.")
    teams = serializers.ListField(
        child=serializers.CharField(), help_text="The first 20 of their slugs, in order."
    )


@extend_schema_serializer(examples=examples_catalog.FRESHNESS_OUTPUT)
class FreshnessOutputSerializer(serializers.Serializer):
    state = ChoiceField(
        ["fresh", "awaiting", "due", "late", "no_sla"],
        help_text=(
            "At the moment of the request, whether or not an evaluation has run since: "
            "late (a partition missed its deadline plus grace and is not ready), due (one "
            "is missing inside its grace), fresh (everything due at the last deadline is "
            "ready), awaiting (a partition due at the last deadline is missing, but that "
            "deadline passed before the SLA was set and is not judged), no_sla."
        ),
    )
    sla = serializers.CharField(allow_null=True, help_text="The SLA in words.")
    latest_ready = serializers.CharField(allow_null=True, help_text="Newest ready partition.")
    partition_due = serializers.CharField(
        allow_null=True, help_text="The partition that is due or late (the oldest if several)."
    )
    deadline_at = serializers.DateTimeField(
        allow_null=True,
        help_text="Late or due: the deadline of partition_due; fresh: the last deadline.",
    )
    late_seconds = serializers.IntegerField(
        allow_null=True, help_text="Late: seconds since partition_due's deadline plus grace."
    )
    next_deadline_at = serializers.DateTimeField(allow_null=True)
    arrival_profile = ArrivalProfileOutputSerializer(
        allow_null=True,
        help_text=(
            "When partitions usually become ready, in seconds after their period ends, "
            "learned from the dataset's own history (restatements and backfills left "
            "out). Null for an unpartitioned dataset."
        ),
    )
    forecast = ForecastOutputSerializer(
        allow_null=True,
        help_text=(
            "When the partition due at the next deadline is expected, from the dataset's "
            "own arrival profile and its upstream datasets (verified lineage): the first "
            "at risk, else the oldest not ready. Null without an SLA or when every "
            "partition due at the next deadline is ready."
        ),
    )
    caused_by = CausedByOutputSerializer(
        allow_null=True,
        help_text=(
            "Late: the root cause found when partition_due was judged late, the upstream "
            "partition furthest up verified lineage that was late or failed for the period "
            "it needs (as dataset.late's caused_by). Null otherwise, or when none was."
        ),
    )
    blast_radius = BlastRadiusOutputSerializer(
        help_text="The lateness this dataset causes downstream now: open late partitions "
        "whose root cause it is, their datasets and the consumer teams subscribed to them."
    )
