"""Who acts in Tidemark: teams, their members and API keys, and the claims by which a team
owns a slice of a shared namespace (job namespaces, database roles, dataset prefixes)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from outbound import targets


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

    def clean(self) -> None:
        """Refuse a ``paging_routing_key`` that is not a PagerDuty Events API v2 routing
        key (``outbound.targets.routing_key_refusal``: 32 letters or digits), the rule the
        watchdog applies to the channel it becomes; its message names the value and rule.

        Raises:
            ValidationError: ``{"paging_routing_key": ...}`` with code
                ``pagerduty_routing_key``.
        """
        key = self.paging_routing_key
        refusal = targets.routing_key_refusal(key) if key else None
        if refusal is not None:
            message = f"{key!r}: {refusal.detail} (rule {refusal.rule})"
            raise ValidationError({"paging_routing_key": ValidationError(message, refusal.rule)})


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
