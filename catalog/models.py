"""What Tidemark knows: teams, keys, datasets, partitions and their revisions, readiness
events, subscriptions, endpoints, notifications and their deliveries (the outbox), change
notices and their acknowledgements, claims, jobs and their observed usage of datasets (fed
by lineage)."""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q

from schedules import periods


def _badge_token() -> str:
    return secrets.token_urlsafe(32)


class Team(models.Model):
    """A producer and/or consumer team; owns datasets, keys, subscriptions and endpoints."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    contact_email = models.EmailField(blank=True, help_text="Human contact for owner notices.")
    contact_slack_webhook = models.URLField(blank=True)
    paging_routing_key = models.CharField(
        max_length=128, blank=True, help_text="On-call channel (PagerDuty routing key)."
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member"
        ADMIN = "admin"

    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="uniq_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class ApiKey(models.Model):
    """A team's API key. The token is shown once; only its public id and digest are kept."""

    class Scope(models.TextChoices):
        PUBLISH = "publish"
        LINEAGE = "lineage"
        READ = "read"
        MANAGE = "manage"
        GOVERNANCE = "governance"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    public_id = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    delegated_datasets = models.ManyToManyField(
        "Dataset",
        blank=True,
        related_name="delegated_keys",
        help_text="Datasets of other teams this key may publish readiness for.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.name} (tm_{self.public_id}_…)"

    def is_usable(self, now: datetime) -> bool:
        """True when the key is neither revoked nor expired at ``now`` (aware UTC)."""
        if self.revoked_at is not None and self.revoked_at <= now:
            return False
        return self.expires_at is None or self.expires_at > now

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


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

    # Signals the fallback poll can see in storage.
    POLLED_SIGNALS = (CompletionSignal.SUCCESS_MARKER, CompletionSignal.MANIFEST)

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
    # The earliest SLA deadline not yet judged, and when to judge it (deadline + grace).
    next_deadline_at = models.DateTimeField(null=True, blank=True)
    next_check_at = models.DateTimeField(null=True, blank=True)
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
    # values outside (``services._validate_dataset_fields``); the API's serializers, the
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
        "change_notice_days",
        "criticality",
        "partitioning",
        "partition_timezone",
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
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class Partition(models.Model):
    """One logical period (or slice) of a dataset; readers see its current revision."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="partitions")
    key = models.CharField(max_length=32)
    start_at = models.DateTimeField(null=True, blank=True, help_text="Logical start, UTC.")
    end_at = models.DateTimeField(null=True, blank=True, help_text="Logical end, UTC, exclusive.")
    current_revision = models.OneToOneField(
        "PartitionRevision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="current_of",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="uniq_partition_key"),
        ]
        indexes = [models.Index(fields=["dataset", "-start_at"], name="partition_newest")]

    def __str__(self) -> str:
        return f"{self.dataset}@{self.key or '-'}"


class Restatement(models.Model):
    """A new version of a range of a dataset's partitions, published as a batch.

    While ``staged`` its revisions are ready but not current: readers keep seeing the
    current revisions. Promotion repoints every partition of the range at once; an
    abandoned restatement changes nothing readers see.
    """

    class State(models.TextChoices):
        STAGED = "staged"
        PROMOTED = "promoted"
        ABANDONED = "abandoned"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="restatements")
    version = models.CharField(max_length=128)
    first_partition = models.CharField(max_length=32, help_text="First key of the range.")
    last_partition = models.CharField(max_length=32, help_text="Last key, inclusive.")
    partition_keys = models.JSONField(default=list, help_text="Every key of the range, in order.")
    code_version = models.CharField(max_length=128, blank=True)
    reason = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.STAGED)
    opened_by = models.CharField(max_length=200)
    opened_at = models.DateTimeField()
    closed_by = models.CharField(max_length=200, blank=True)
    closed_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was promoted or abandoned."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "version"], name="uniq_restatement_version"),
            models.CheckConstraint(
                condition=Q(state="staged", closed_at__isnull=True)
                | (~Q(state="staged") & Q(closed_at__isnull=False)),
                name="restatement_closed_has_closed_at",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset} {self.version} [{self.first_partition}..{self.last_partition}]"

    def covers(self, key: str) -> bool:
        """Whether partition ``key`` is inside the range (exact keys, not string order)."""
        return key in self.partition_keys


class PartitionRevision(models.Model):
    """One version of a partition's content. ``version`` is the producer's label;
    ``""`` is the revision published without one. A revision staged in a restatement
    (``restatement`` set) becomes current only when the restatement is promoted."""

    class State(models.TextChoices):
        PENDING = "pending"
        READY = "ready"
        FAILED = "failed"

    class DetectedBy(models.TextChoices):
        EVENT = "event"
        POLL = "poll"
        LINEAGE = "lineage"

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="revisions")
    version = models.CharField(max_length=128, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    manifest = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    code_version = models.CharField(max_length=128, blank=True)
    detected_by = models.CharField(
        max_length=16, choices=DetectedBy.choices, default=DetectedBy.EVENT
    )
    ready_at = models.DateTimeField(null=True, blank=True)
    restatement = models.ForeignKey(
        Restatement, null=True, blank=True, on_delete=models.PROTECT, related_name="revisions"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["partition", "version"], name="uniq_revision_version"),
            models.CheckConstraint(
                condition=~Q(state="ready") | Q(ready_at__isnull=False),
                name="revision_ready_has_ready_at",
            ),
        ]
        indexes = [models.Index(fields=["state"], name="revision_state")]

    def __str__(self) -> str:
        return f"{self.partition}#{self.version or '-'} ({self.state})"


class LatePartition(models.Model):
    """A partition that missed its deadline plus grace: opened once, told once as
    ``dataset.late``, closed once as ``dataset.recovered`` when it lands."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="late_partitions")
    partition_key = models.CharField(max_length=32)
    deadline_at = models.DateTimeField()
    late_at = models.DateTimeField(help_text="Deadline plus grace.")
    recovered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "partition_key"], name="uniq_late_partition"
            ),
        ]
        indexes = [
            models.Index(
                fields=["dataset"],
                name="late_partition_open",
                condition=Q(recovered_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset} {self.partition_key} late since {self.late_at}"


class ReadinessEvent(models.Model):
    """Immutable log of one change of a revision's state, as sent by a producer or found by
    the poll. At most one per (revision, state): repeats of a publish add nothing."""

    class Source(models.TextChoices):
        API = "api"
        POLL = "poll"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="events")
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="events")
    revision = models.ForeignKey(PartitionRevision, on_delete=models.CASCADE, related_name="events")
    state = models.CharField(max_length=16, choices=PartitionRevision.State.choices)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    published_by = models.ForeignKey(Team, null=True, on_delete=models.SET_NULL, related_name="+")
    api_key = models.ForeignKey(ApiKey, null=True, on_delete=models.SET_NULL, related_name="+")
    # None: not a restatement; "" : it replaced the unversioned revision.
    restated_version = models.CharField(  # noqa: DJ001
        max_length=128, null=True, blank=True, help_text="The version this one replaced."
    )
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["revision", "state"], name="uniq_event_per_state"),
        ]

    def __str__(self) -> str:
        return f"{self.partition} -> {self.state}"


class Endpoint(models.Model):
    """Where Tidemark sends notifications for a team."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        EMAIL = "email"
        SLACK = "slack"
        WATCHDOG = "watchdog"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="endpoints")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.WEBHOOK)
    url = models.CharField(max_length=2048)
    is_active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=255, blank=True)
    # Standard Webhooks signing secrets, encrypted (catalog.secrets): they must sign, so
    # they cannot be hashed. The previous one keeps signing until its overlap ends.
    secret_encrypted = models.TextField(blank=True)
    # [{"encrypted": ..., "expires_at": ISO 8601}]: every secret replaced less than an
    # overlap ago, so rotating twice in a row never strands a consumer on the first one.
    previous_secrets = models.JSONField(default=list, blank=True)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="First retryable failure since the last success."
    )
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "kind", "url"], name="uniq_endpoint"),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}:{self.kind}:{self.url}"

    @property
    def previous_secret_expires_at(self) -> datetime | None:
        """When the last replaced secret stops signing (None: none is signing)."""
        ends = [datetime.fromisoformat(p["expires_at"]) for p in self.previous_secrets]
        return max(ends) if ends else None


class Subscription(models.Model):
    """A consumer team's declaration that it (optionally one of its jobs) reads a dataset."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="subscriptions")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="subscriptions")
    job_namespace = models.CharField(max_length=255, blank=True)
    job_name = models.CharField(max_length=1024, blank=True)
    endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="subscriptions"
    )
    event_types = models.JSONField(default=list, blank=True, help_text="Empty: every type.")
    partition_pattern = models.CharField(
        max_length=64, blank=True, help_text="fnmatch pattern on partition keys; empty: all."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "dataset", "job_namespace", "job_name"], name="uniq_subscription"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug} reads {self.dataset}"


class Notification(models.Model):
    """Something consumers are told about, with a stable id (the Standard Webhooks
    ``webhook-id``) and the exact payload every endpoint receives."""

    class Type(models.TextChoices):
        PARTITION_READY = "partition.ready"
        PARTITION_RESTATED = "partition.restated"
        PARTITION_FAILED = "partition.failed"
        ENDPOINT_DISABLED = "endpoint.disabled"
        DATASET_LATE = "dataset.late"
        DATASET_RECOVERED = "dataset.recovered"
        WATCHDOG_MONITOR = "watchdog.monitor"
        WATCHDOG_PING = "watchdog.ping"
        CHANGE_NOTICE_ANNOUNCED = "change_notice.announced"
        CHANGE_NOTICE_REMINDER = "change_notice.reminder"
        CHANGE_NOTICE_EFFECTIVE = "change_notice.effective"
        DATASET_VERSION_PROMOTED = "dataset.version_promoted"
        SCHEMA_UNANNOUNCED_CHANGE = "schema.unannounced_change"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=64, choices=Type.choices)
    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    dedup_key = models.CharField(max_length=255, unique=True)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.type} {self.id}"


class Delivery(models.Model):
    """One notification to one endpoint: the outbox row a delivery worker claims."""

    class State(models.TextChoices):
        PENDING = "pending"
        RETRYING = "retrying"
        SUCCEEDED = "succeeded"
        REJECTED = "rejected"
        DEAD = "dead"
        CANCELLED = "cancelled"

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="deliveries"
    )
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0, help_text="Attempts ever made.")
    attempts_before_replay = models.PositiveIntegerField(
        default=0, help_text="Attempts made before the last replay; the budget restarts there."
    )
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error_kind = models.CharField(max_length=32, blank=True)
    last_error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["notification", "endpoint"], name="uniq_delivery"),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due",
                condition=Q(state__in=["pending", "retrying"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.notification_id} -> {self.endpoint_id} ({self.state})"


class DeliveryAttempt(models.Model):
    """One try of a delivery, append-only: what was sent when, and what came back."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    decision = models.CharField(max_length=16)
    error_kind = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    response_excerpt = models.TextField(blank=True)
    next_attempt_in_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="uniq_attempt_number"),
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id}#{self.number} {self.status_code or self.error_kind}"


class IdempotencyRecord(models.Model):
    """The first response to a request sent with an ``Idempotency-Key``, per team
    (IETF draft-ietf-httpapi-idempotency-key-header)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(null=True)
    response_body = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "key"], name="uniq_idempotency_key"),
        ]
        indexes = [models.Index(fields=["expires_at"], name="idempotency_expiry")]

    def __str__(self) -> str:
        return f"{self.team_id}:{self.key}"


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


class StorageGroup(models.Model):
    """Datasets whose partitions live under one parent prefix of one storage source: the
    fallback poll lists the parent once per sweep, with a delimiter, for all of them.

    ``interval_seconds`` is the current gap between sweeps: adaptive groups (some dataset
    sends no readiness events) start at the minimum and back off while nothing new
    appears; groups whose datasets all publish events are swept as an hourly safety net.
    """

    class Mode(models.TextChoices):
        ADAPTIVE = "adaptive", "poll-only: adaptive"
        SAFETY_NET = "safety_net", "events: hourly safety net"

    source = models.CharField(max_length=64)
    prefix = models.CharField(max_length=1024, help_text="Parent prefix, relative to the root.")
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.ADAPTIVE)
    interval_seconds = models.PositiveIntegerField(default=60)
    next_sweep_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    last_swept_at = models.DateTimeField(
        null=True, blank=True, help_text="When the last completed sweep started."
    )
    last_full_sweep_at = models.DateTimeField(null=True, blank=True)
    last_found_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "prefix"], name="uniq_storage_group"),
        ]
        indexes = [models.Index(fields=["next_sweep_at"], name="storage_group_due")]

    def __str__(self) -> str:
        return f"{self.source}:{self.prefix or '/'}"


class StorageSweep(models.Model):
    """One sweep of a storage group and what it cost (kept for a week)."""

    group = models.ForeignKey(StorageGroup, on_delete=models.CASCADE, related_name="sweeps")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    full = models.BooleanField(default=False, help_text="Listed every partition, no horizon.")
    list_calls = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)
    objects_seen = models.PositiveIntegerField(default=0)
    partitions_checked = models.PositiveIntegerField(default=0)
    partitions_found = models.PositiveIntegerField(default=0)
    missed_events = models.PositiveIntegerField(default=0)
    incomplete = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["group", "-started_at"], name="storage_sweep_recent")]

    def __str__(self) -> str:
        return f"{self.group} @ {self.started_at}"


class Claim(models.Model):
    """A team's claim on a slice of a shared namespace: the one mechanism by which a team
    owns part of one, matched exactly.

    ``job_namespace``: the team owns every job of that OpenLineage job namespace
    (``airflow://team-a``, ``dbt-sales``), so lineage events for those jobs sent with its
    keys are verified. ``db_role``: the team owns a database role (or user) of one server,
    named ``<dataset namespace of the server>/<role>`` (``postgres://db.example:5432/
    reporting``), so what lineage collectors see that role read counts as the team's.
    ``dataset_prefix``: the team owns every dataset whose location (``namespace/name``)
    starts with the normalised prefix (``s3://lake/sales/``, see
    ``catalog.identity.normalise_dataset_prefix``); no other team registers or receives
    one there, and two teams' prefixes never overlap."""

    class Kind(models.TextChoices):
        JOB_NAMESPACE = "job_namespace"
        DB_ROLE = "db_role"
        DATASET_PREFIX = "dataset_prefix"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="claims")
    kind = models.CharField(max_length=32, choices=Kind.choices, default=Kind.JOB_NAMESPACE)
    pattern = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "pattern"], name="uniq_claim"),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug} claims {self.kind} {self.pattern}"


class Job(models.Model):
    """A job seen in runtime lineage, by its OpenLineage ``namespace`` + ``name`` (kept as
    received: job identities are not normalised). ``team`` is its verified owner: the team
    that claimed the job namespace, set by the last verified event; None while only
    unverified events named the job."""

    namespace = models.CharField(max_length=255)
    name = models.CharField(max_length=1024)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    first_seen_at = models.DateTimeField(help_text="Earliest event time seen (UTC).")
    last_seen_at = models.DateTimeField(help_text="Latest event time seen (UTC).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="uniq_job_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class DatasetUsage(models.Model):
    """An observed edge: ``job`` read or wrote the dataset with this normalised identity,
    as reported by ``team``'s keys, aggregated over all runs.

    ``verified``: the reporting team claims the job's namespace; unverified edges are kept
    apart (their own rows) and never count as declarations. ``dataset`` links the catalog's
    row when one is registered with this identity (usage of unknown datasets is still
    recorded, by identity). ``run_count`` counts each run once.
    """

    class Direction(models.TextChoices):
        READ = "read"
        WRITE = "write"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="usages")
    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="usages"
    )
    dataset_namespace = models.CharField(max_length=255)
    dataset_name = models.CharField(max_length=1024)
    direction = models.CharField(max_length=8, choices=Direction.choices)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usages")
    verified = models.BooleanField(default=False)
    first_seen_at = models.DateTimeField(help_text="Earliest event time seen (UTC).")
    last_seen_at = models.DateTimeField(help_text="Latest event time seen (UTC).")
    run_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "job",
                    "dataset_namespace",
                    "dataset_name",
                    "direction",
                    "team",
                    "verified",
                ],
                name="uniq_dataset_usage",
            ),
        ]
        indexes = [
            models.Index(fields=["dataset_namespace", "dataset_name"], name="usage_identity"),
            models.Index(fields=["team", "direction", "verified"], name="usage_team"),
        ]

    def __str__(self) -> str:
        verified = "" if self.verified else " (unverified)"
        return (
            f"{self.job} {self.direction}s {self.dataset_namespace}/{self.dataset_name}"
            f" for {self.team_id}{verified}"
        )


class UnclaimedUsage(models.Model):
    """What a lineage collector saw a database role read or write while no team claimed
    the role (``Claim`` kind ``db_role``, ``pattern``): kept, attributed to no team, so
    that when a team claims the role it becomes that team's verified usage
    (``catalog.services.held_usage_attribute``) without collecting the history again.
    ``access_count`` adds up the accesses (they become the usage's ``run_count``)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="unclaimed_usages")
    pattern = models.CharField(max_length=255, help_text="The db_role claim pattern it awaits.")
    dataset_namespace = models.CharField(max_length=255)
    dataset_name = models.CharField(max_length=1024)
    direction = models.CharField(max_length=8, choices=DatasetUsage.Direction.choices)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    access_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["job", "dataset_namespace", "dataset_name", "direction"],
                name="uniq_unclaimed_usage",
            ),
        ]
        indexes = [models.Index(fields=["pattern"], name="unclaimed_usage_pattern")]

    def __str__(self) -> str:
        return (
            f"{self.job} {self.direction}s {self.dataset_namespace}/{self.dataset_name} (unclaimed)"
        )


class DatasetAlias(models.Model):
    """Another identity (``alias_*``) of the dataset identity ``namespace`` + ``name``.

    ``spelling``: a spelling as received that normalises to it (``catalog.identity``),
    kept so what a job sent can be traced. ``symlink``: an identity the dataset's owner
    team declared for it in a verified lineage event's ``symlinks`` facet (a metastore
    table over a lake path, say), normalised; ``dataset`` is the registered dataset, and
    usage naming the alias is usage of that dataset. An identity is an alias of at most
    one dataset, the first to claim it (``catalog.services.dataset_symlinks_record`` says
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
