"""Datasets and their identity: the dataset row itself, the other spellings and symlinks
that name it (``DatasetAlias``), and proposals to hand it to another team
(``DatasetTransfer``)."""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models import Q

from schedules import calendars, periods

from .teams import Team


def _badge_token() -> str:
    return secrets.token_urlsafe(32)


class Dataset(models.Model):
    """A registered dataset, identified by its normalised OpenLineage namespace + name."""

    class Criticality(models.TextChoices):
        LOW = "low"
        MEDIUM = "medium"
        HIGH = "high"
        CRITICAL = "critical"

    class Partitioning(models.TextChoices):
        NONE = periods.NONE
        HOURLY = periods.HOURLY
        DAILY = periods.DAILY
        MONTHLY = periods.MONTHLY

    class CompletionSignal(models.TextChoices):
        EVENT = "event", "readiness event"
        SUCCESS_MARKER = "success_marker", "success marker file"
        MANIFEST = "manifest", "manifest with expected file count"
        OPENLINEAGE = "openlineage", "OpenLineage run events"

    # Signals the fallback poll can see in storage.
    POLLED_SIGNALS = (CompletionSignal.SUCCESS_MARKER, CompletionSignal.MANIFEST)

    class SlaCalendar(models.TextChoices):
        NONE = "none", "every day"
        BUSINESS_DAYS = "business_days", "business days"

    class NonBusinessDay(models.TextChoices):
        NEXT_BUSINESS_DAY = calendars.NEXT_BUSINESS_DAY, "due on the next business day"
        SKIP = calendars.SKIP, "not owed"

    class Lifecycle(models.TextChoices):
        ACTIVE = "active"
        DEPRECATED = "deprecated"
        RETIRED = "retired"

    namespace = models.CharField(max_length=255)
    name = models.CharField(max_length=1024)
    owner = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="datasets")
    description = models.TextField(blank=True)
    criticality = models.CharField(
        max_length=16, choices=Criticality.choices, default=Criticality.MEDIUM
    )
    partitioning = models.CharField(
        max_length=16, choices=Partitioning.choices, default=Partitioning.DAILY
    )
    partition_timezone = models.CharField(max_length=64, default="UTC")
    completion_signal = models.CharField(
        max_length=16, choices=CompletionSignal.choices, default=CompletionSignal.EVENT
    )
    success_marker = models.CharField(max_length=255, default="_SUCCESS")
    manifest_name = models.CharField(max_length=255, default="_manifest.json")
    storage_source = models.CharField(max_length=64, blank=True)
    location_template = models.CharField(max_length=1024, blank=True)
    # Forecasts and schedules publish periods that have not started; any other dataset's
    # future partition is a mistyped key and is refused (catalog.future_partitions).
    accepts_future_partitions = models.BooleanField(
        default=False,
        help_text="Accept partitions whose period has not started (forecasts, schedules).",
    )
    poll_group = models.ForeignKey(
        "StorageGroup",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="datasets",
        help_text="Set from storage_source + location_template for marker/manifest datasets.",
    )
    sla_cron = models.CharField(max_length=128, blank=True)
    sla_timezone = models.CharField(max_length=64, default="UTC")
    sla_grace_seconds = models.PositiveIntegerField(default=0)
    # Business days only (schedules.calendars): deadlines on other local dates in
    # sla_timezone move to the next business-day deadline or are skipped.
    # Database defaults too: rows written without these columns (a process of the
    # previous release during a rolling deploy, bulk SQL loads) get the same values.
    sla_calendar = models.CharField(
        max_length=16,
        choices=SlaCalendar.choices,
        default=SlaCalendar.NONE,
        db_default=SlaCalendar.NONE,
    )
    sla_holidays_country = models.CharField(
        max_length=8,
        blank=True,
        default="",
        db_default="",
        help_text="ISO 3166-1 alpha-2; blank: weekends only.",
    )
    sla_holidays_subdivision = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="The country's subdivision; blank: national.",
    )
    sla_non_business_day = models.CharField(
        max_length=24,
        choices=NonBusinessDay.choices,
        default=NonBusinessDay.NEXT_BUSINESS_DAY,
        db_default=NonBusinessDay.NEXT_BUSINESS_DAY,
    )
    # The earliest SLA deadline not yet judged, and when to judge it (deadline + grace).
    next_deadline_at = models.DateTimeField(null=True, blank=True)
    next_check_at = models.DateTimeField(null=True, blank=True)
    # Without an SLA: the partition awaited against its usual arrival, and when it becomes
    # later than usual (catalog.unusually_late); an empty key asks the pass to plan.
    unusual_check_key = models.CharField(max_length=64, blank=True, default="", db_default="")
    next_unusual_check_at = models.DateTimeField(null=True, blank=True)
    # With an SLA: when the at-risk pass next forecasts it (catalog.at_risk's rule).
    next_forecast_at = models.DateTimeField(null=True, blank=True)
    change_notice_days = models.PositiveIntegerField(default=14)
    lifecycle = models.CharField(max_length=16, choices=Lifecycle.choices, default=Lifecycle.ACTIVE)
    sunset_at = models.DateTimeField(null=True, blank=True)
    # The status badge's URL holds this unguessable token instead of needing an API key.
    badge_token = models.CharField(max_length=43, unique=True, default=_badge_token)
    # The ping key of the watchdog's pipeline monitor for a critical dataset: chosen here
    # so the owner can be shown its ping URL; the producer's last task calls it.
    pipeline_ping_key = models.UUIDField(null=True, blank=True, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Bounds of the integer rules, the one place defining them: the services refuse
    # values outside (``services.datasets._validate_dataset_fields``); the API's serializers, the
    # web form and the declarations file use the same numbers.
    MAX_SLA_GRACE_SECONDS = 31 * 86400
    MAX_CHANGE_NOTICE_DAYS = 365
    INTEGER_BOUNDS = {
        "sla_grace_seconds": (0, MAX_SLA_GRACE_SECONDS),
        "change_notice_days": (0, MAX_CHANGE_NOTICE_DAYS),
    }

    # Changes to these are rule-relevant and go to the audit trail.
    AUDITED_FIELDS = (
        "completion_signal",
        "success_marker",
        "manifest_name",
        "storage_source",
        "location_template",
        "sla_cron",
        "sla_timezone",
        "sla_grace_seconds",
        "sla_calendar",
        "sla_holidays_country",
        "sla_holidays_subdivision",
        "sla_non_business_day",
        "change_notice_days",
        "criticality",
        "partitioning",
        "partition_timezone",
        "accepts_future_partitions",
        "lifecycle",
        "sunset_at",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="uniq_dataset_identity"),
        ]
        indexes = [
            models.Index(fields=["owner", "namespace"], name="dataset_owner_ns"),
            models.Index(
                fields=["next_check_at"],
                name="dataset_next_check",
                condition=Q(next_check_at__isnull=False),
            ),
            models.Index(
                fields=["next_unusual_check_at"],
                name="dataset_next_unusual_check",
                condition=Q(next_unusual_check_at__isnull=False),
            ),
            models.Index(
                fields=["next_forecast_at"],
                name="dataset_next_forecast",
                condition=Q(next_forecast_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class DatasetAlias(models.Model):
    """Another identity (``alias_*``) of the dataset identity ``namespace`` + ``name``.

    ``spelling``: a spelling as received that normalises to it (``catalog.identity``),
    kept so what a job sent can be traced. ``symlink``: an identity the dataset's owner
    team declared for it in a verified lineage event's ``symlinks`` facet (a metastore
    table over a lake path, say), normalised; ``dataset`` is the registered dataset, and
    usage naming the alias is usage of that dataset. An identity is an alias of at most
    one dataset, the first to claim it (``catalog.services.aliases.dataset_symlinks_record`` says
    who may)."""

    class Kind(models.TextChoices):
        SPELLING = "spelling"
        SYMLINK = "symlink"

    alias_namespace = models.CharField(max_length=255)
    alias_name = models.CharField(max_length=1024)
    namespace = models.CharField(max_length=255)
    name = models.CharField(max_length=1024)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.SPELLING)
    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.CASCADE, related_name="aliases"
    )
    symlink_type = models.CharField(
        max_length=64, blank=True, help_text="The symlink's type as declared (TABLE ...)."
    )
    declared_by = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    first_seen_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "dataset aliases"
        constraints = [
            models.UniqueConstraint(
                fields=["alias_namespace", "alias_name"], name="uniq_dataset_alias"
            ),
            models.CheckConstraint(
                condition=Q(kind="spelling") | Q(dataset__isnull=False),
                name="dataset_alias_symlink_has_dataset",
            ),
        ]
        indexes = [models.Index(fields=["namespace", "name"], name="alias_identity")]

    def __str__(self) -> str:
        return f"{self.alias_namespace}/{self.alias_name} -> {self.namespace}/{self.name}"


class DatasetTransfer(models.Model):
    """A proposal by a dataset's owner team to hand it to another team: the receiving team
    accepts it (the owner changes) or either side cancels it. One open at a time."""

    class State(models.TextChoices):
        PROPOSED = "proposed"
        ACCEPTED = "accepted"
        CANCELLED = "cancelled"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="transfers")
    from_team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    to_team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PROPOSED)
    proposed_by = models.CharField(max_length=200)
    decided_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["dataset"],
                condition=Q(state="proposed"),
                name="uniq_open_dataset_transfer",
            ),
            models.CheckConstraint(
                condition=~Q(from_team=models.F("to_team")), name="transfer_to_another_team"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id}: {self.from_team_id} -> {self.to_team_id} ({self.state})"
