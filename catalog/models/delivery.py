"""Telling consumers: subscriptions and the endpoints they deliver to, and the outbox
(notifications, one delivery per endpoint, and each attempt), each endpoint's successes
per hour; plus the Idempotency-Key records that let a publish be retried safely."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import models
from django.db.models import Q

from .datasets import Dataset
from .teams import Team


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
    disabled_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was disabled; None while it is active."
    )
    outage_started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the failing streak that last disabled it began; kept after it is "
        "enabled again, as the default start of a recovery (catalog.recovery).",
    )
    rate_limit_per_second = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most deliveries sent to it per second (bursts of one second's worth); "
        "None: the TIDEMARK_DELIVERY_ENDPOINT_RATE setting.",
    )
    throttled_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Nothing is sent to it before then: set when it answered 429 or 503 with "
        "Retry-After (capped as every Retry-After is).",
    )
    # The rate limit's token bucket as one number (GCRA's "theoretical arrival time"), in
    # Unix seconds so the claim's SQL can do arithmetic with it on PostgreSQL and SQLite
    # alike: the endpoint has earned one send per 1/rate seconds since then, at most a
    # second's worth (catalog.endpoint_rates).
    rate_credit_from = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "kind", "url"], name="uniq_endpoint"),
            models.CheckConstraint(
                condition=Q(rate_limit_per_second__isnull=True) | Q(rate_limit_per_second__gte=1),
                name="endpoint_rate_limit_positive",
            ),
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
    newest_only = models.BooleanField(
        default=False,
        help_text="Told no backfills, nor restatements of partitions older than the newest "
        "ready one (catalog.notices.matching_endpoints).",
    )
    need_by_cron = models.CharField(
        max_length=128,
        blank=True,
        default="",
        db_default="",
        help_text="When the team needs each partition: a five-field cron read in "
        "need_by_timezone, judged as an SLA deadline is; blank: no need-by.",
    )
    need_by_timezone = models.CharField(max_length=64, default="UTC", db_default="UTC")
    need_by_next_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The first need-by deadline not judged yet (catalog.need_by_judging).",
    )
    need_by_gap_seconds = models.IntegerField(
        null=True,
        blank=True,
        help_text="How long before the producer's SLA deadline the need-by falls, at the "
        "most over the next deadlines (catalog.need_by.compare); positive: needed earlier "
        "than promised; null: no need-by or no SLA. Refreshed on every change and judging.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "dataset", "job_namespace", "job_name"], name="uniq_subscription"
            ),
        ]
        indexes = [
            # The need-by judging reads what is due, not every subscription.
            models.Index(
                fields=["need_by_next_at"],
                name="subscription_need_by_due",
                condition=models.Q(need_by_next_at__isnull=False),
            ),
            # The governance report lists the consumers needing data before it is promised.
            models.Index(
                fields=["need_by_gap_seconds"],
                name="subscription_need_by_early",
                condition=models.Q(need_by_gap_seconds__gt=0),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug} reads {self.dataset}"


class SubscriptionEndpoint(models.Model):
    """A webhook endpoint a subscription delivers to besides its first one
    (``Subscription.endpoint``): every notification the subscription's filters let
    through goes to each of its endpoints, as a delivery of its own (its own attempts,
    signed with its own secret, the notification's ``webhook-id``)."""

    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="more_endpoints"
    )
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subscription", "endpoint"], name="uniq_subscription_endpoint"
            ),
        ]

    def __str__(self) -> str:
        return f"subscription {self.subscription_id} -> endpoint {self.endpoint_id}"


class Notification(models.Model):
    """Something consumers are told about, with a stable id (the Standard Webhooks
    ``webhook-id``) and the exact payload every endpoint receives."""

    class Type(models.TextChoices):
        PARTITION_READY = "partition.ready"
        PARTITION_RESTATED = "partition.restated"
        PARTITION_FAILED = "partition.failed"
        ENDPOINT_DISABLED = "endpoint.disabled"
        ENDPOINT_ENABLED = "endpoint.enabled"
        ENDPOINT_RECOVERED = "endpoint.recovered"
        DATASET_LATE = "dataset.late"
        DATASET_RECOVERED = "dataset.recovered"
        DATASET_UNUSUALLY_LATE = "dataset.unusually_late"
        DATASET_AT_RISK = "dataset.at_risk"
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

    class Meta:
        indexes = [
            # Pruning takes the oldest first (catalog.retention): the ids are random.
            models.Index(fields=["created_at", "id"], name="notification_created"),
            # The late notices of a few datasets (catalog.need_by_judging.told_endpoints,
            # once per batch of the freshness pass): without it, every notification the
            # datasets had in the retention window (90 days of partition.ready) is read.
            models.Index(
                fields=["dataset"],
                name="notification_late_by_dataset",
                condition=Q(type="dataset.late"),
            ),
        ]

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
            # Due deliveries by endpoint: the claim takes each endpoint's oldest few, as
            # many as its rate limit allows (catalog.delivery.delivery_claim_due).
            models.Index(
                fields=["endpoint", "next_attempt_at"],
                name="delivery_due_by_endpoint",
                condition=Q(state__in=["pending", "retrying"]),
            ),
            # Dead letters by endpoint: /metrics counts them by team at every scrape, which
            # would otherwise read every delivery kept (30 days of them); with the id, the
            # team page picks its newest from the index alone.
            models.Index(
                fields=["endpoint", "id"],
                name="delivery_dead_letter_by_id",
                condition=Q(state__in=["rejected", "dead"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.notification_id} -> {self.endpoint_id} ({self.state})"


class EndpointSuccessHour(models.Model):
    """How many deliveries to an endpoint succeeded in one hour (UTC): its health (team
    page, GET /endpoints) reads a day of these, about 25 rows, instead of counting a day
    of its deliveries, which at hundreds a second would make the read cost grow with the
    throughput. Written where a delivery becomes succeeded (``catalog.success_counts``),
    in the same transaction."""

    # No index of its own: the unique constraint's, led by the endpoint, serves it.
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    hour = models.DateTimeField(help_text="Start of the hour, aware UTC, on the hour.")
    succeeded = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # Also the read's index: an endpoint's hours from the window's start on.
            models.UniqueConstraint(fields=["endpoint", "hour"], name="uniq_endpoint_success_hour"),
        ]
        indexes = [
            # Pruning takes the oldest hours of every endpoint first.
            models.Index(fields=["hour"], name="endpoint_success_hour_by_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint_id} {self.hour:%Y-%m-%dT%H} {self.succeeded}"


class DeliveryAttempt(models.Model):
    """One try of a delivery, append-only: what was sent when, and what came back."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    # The delivery's endpoint, copied so that an endpoint's delivery log is one index range
    # (newest first) at any history length; null only for rows a release before it wrote.
    endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
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
        indexes = [
            models.Index(fields=["endpoint", "-id"], name="attempt_log_by_endpoint"),
            # Its failures alone (``outcome=failed``): rare among a month of successes, they
            # would otherwise be found by reading every attempt the endpoint had.
            models.Index(
                fields=["endpoint", "-id"],
                name="attempt_failures_by_endpoint",
                condition=~Q(decision="succeeded"),
            ),
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
