"""The catalog's record of change: the audit trail, change notices with their
acknowledgements, and the schemas datasets were seen with and the changes between them."""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import Q

from .datasets import Dataset
from .partitions import ReadinessEvent
from .teams import Team


class AuditEntry(models.Model):
    """A rule-relevant change: who, when, and each field's old and new value."""

    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_entries"
    )
    team = models.ForeignKey(Team, null=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.CharField(max_length=200, help_text="Who: 'key:<public id>' or 'user:<name>'.")
    action = models.CharField(max_length=64)
    changes = models.JSONField(default=dict, help_text="{field: [old, new]}")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["dataset", "-created_at"], name="audit_dataset_recent")]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor}"


class ChangeNotice(models.Model):
    """A change its owner team announces on a dataset, effective at ``effective_at``.

    ``effective_at`` is at least the dataset's ``change_notice_days`` after
    ``announced_at`` unless ``emergency`` (then ``override_reason`` says why). Consumer
    teams are told on announcement, reminded before ``effective_at`` until they
    acknowledge, and told again when it takes effect; ``next_step_at`` (indexed) is when
    the scheduler next has something to send for it.
    """

    class Kind(models.TextChoices):
        BREAKING_SCHEMA_CHANGE = "breaking_schema_change", "breaking schema change"
        SEMANTIC_CHANGE = "semantic_change", "semantic change"
        DEPRECATION = "deprecation", "deprecation"
        LOCATION_MOVE = "location_move", "location move"
        RETIREMENT = "retirement", "retirement"

    class State(models.TextChoices):
        ANNOUNCED = "announced"
        EFFECTIVE = "effective"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="change_notices")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    description = models.TextField()
    schema_diff = models.JSONField(null=True, blank=True)
    link = models.URLField(max_length=2048, blank=True)
    announced_by = models.CharField(
        max_length=200, help_text="Who: 'key:<public id>' or 'user:<name>'."
    )
    announced_at = models.DateTimeField(help_text="Server time of the announcement.")
    effective_at = models.DateTimeField()
    emergency = models.BooleanField(
        default=False, help_text="Announced with less than the dataset's notice period."
    )
    override_reason = models.TextField(blank=True)
    require_acknowledgements = models.BooleanField(
        default=False,
        help_text="May take effect early (apply-early) once every consumer team acknowledged.",
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.ANNOUNCED)
    took_effect_at = models.DateTimeField(null=True, blank=True)
    # The next reminder or the effective time not yet handled; None once in effect.
    next_step_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(emergency=False) | ~Q(override_reason=""),
                name="change_notice_emergency_has_reason",
            ),
            models.CheckConstraint(
                condition=Q(effective_at__gte=models.F("announced_at")),
                name="change_notice_effective_after_announced",
            ),
            models.CheckConstraint(
                condition=Q(state="announced") | Q(took_effect_at__isnull=False),
                name="change_notice_effective_has_took_effect_at",
            ),
        ]
        indexes = [
            models.Index(fields=["dataset", "-announced_at"], name="change_notice_recent"),
            models.Index(
                fields=["next_step_at"],
                name="change_notice_next_step",
                condition=Q(next_step_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} of {self.dataset_id} effective {self.effective_at}"

    @property
    def applied_early(self) -> bool:
        """True when it took effect before ``effective_at`` (apply-early)."""
        return self.took_effect_at is not None and self.took_effect_at < self.effective_at

    def in_effect(self, now: datetime) -> bool:
        """True once it took effect, or its ``effective_at`` has passed at ``now`` (aware
        UTC) even if the scheduler has not run since."""
        return self.state == self.State.EFFECTIVE or self.effective_at <= now


class ChangeNoticeAcknowledgement(models.Model):
    """A consumer team's acknowledgement of a change notice: who and when, once per team."""

    notice = models.ForeignKey(
        ChangeNotice, on_delete=models.CASCADE, related_name="acknowledgements"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    acknowledged_by = models.CharField(
        max_length=200, help_text="Who: 'key:<public id>' or 'user:<name>'."
    )
    acknowledged_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["notice", "team"], name="uniq_change_notice_acknowledgement"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team_id} acknowledged {self.notice_id}"


class SchemaObservation(models.Model):
    """A dataset's schema as lineage or a readiness event showed it (``catalog.schemas``):
    one row per change on the dataset's timeline, not per sighting.

    ``observed_at`` is the event time of the first sighting of this schema after a
    different one; ``last_seen_at`` the latest sighting before the next change. A
    sighting of the same schema (same ``fingerprint``) as the observation just before it
    only widens that row. ``source`` says what showed it: a lineage event (``job_*``,
    ``run_id`` and ``lineage_event_id``) or a readiness event (``readiness_event``)."""

    class Source(models.TextChoices):
        LINEAGE = "lineage"
        READINESS = "readiness"

    dataset = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, related_name="schema_observations"
    )
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the canonical fields.")
    fields = models.JSONField(help_text='[{"name", "type", "fields"?}] as first seen.')
    observed_at = models.DateTimeField(help_text="Event time of the first sighting, UTC.")
    last_seen_at = models.DateTimeField(help_text="Event time of the latest sighting, UTC.")
    source = models.CharField(max_length=16, choices=Source.choices)
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The team whose event showed it.",
    )
    job_namespace = models.CharField(max_length=255, blank=True)
    job_name = models.CharField(max_length=1024, blank=True)
    run_id = models.UUIDField(null=True, blank=True)
    lineage_event_id = models.BigIntegerField(
        null=True, blank=True, help_text="The lineage event (lineage app) that showed it."
    )
    readiness_event = models.ForeignKey(
        ReadinessEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["dataset", "-observed_at", "-id"], name="schema_observation_recent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id} schema {self.fingerprint[:12]} @ {self.observed_at}"


class SchemaChange(models.Model):
    """A breaking change between two consecutive schema observations of a dataset: columns
    removed or retyped (``catalog.schemas.diff``). ``covered_by`` is the breaking schema
    change notice that announced it (``catalog.schema_changes`` says which notice covers
    which date); without one it is *unannounced*: the owner team is told once and the
    governance report lists it. One row per (observation, previous)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="schema_changes")
    observation = models.ForeignKey(
        SchemaObservation, on_delete=models.CASCADE, related_name="changes"
    )
    previous = models.ForeignKey(SchemaObservation, on_delete=models.CASCADE, related_name="+")
    observed_at = models.DateTimeField(help_text="When the new schema was first seen, UTC.")
    removed = models.JSONField(default=list, help_text="Column paths gone.")
    retyped = models.JSONField(default=list, help_text='[{"name", "from", "to"}]')
    added = models.JSONField(default=list, help_text="Column paths new (not breaking).")
    covered_by = models.ForeignKey(
        ChangeNotice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["observation", "previous"], name="uniq_schema_change"),
        ]
        indexes = [
            models.Index(
                fields=["-observed_at", "-id"],
                name="schema_change_unannounced",
                condition=Q(covered_by__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id} schema change @ {self.observed_at}"
