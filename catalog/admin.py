"""Operator views of the catalog. Secrets never appear: keys are digests, webhook secrets
stay encrypted and are excluded."""

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.utils import timezone

from problems import Problem

from . import endpoint_actions, errors
from .actors import Actor
from .models import (
    ApiKey,
    AuditEntry,
    ChangeNotice,
    ChangeNoticeAcknowledgement,
    Claim,
    Dataset,
    DatasetAlias,
    DatasetTransfer,
    DatasetUsage,
    Delivery,
    DeliveryAttempt,
    Endpoint,
    Job,
    Membership,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    Restatement,
    RunConflict,
    SchemaChange,
    SchemaObservation,
    Subscription,
    SubscriptionEndpoint,
    Team,
    UnclaimedUsage,
)
from .services import datasets as dataset_services


class MembershipInline(admin.TabularInline):
    """The team's people (who may log in to its web pages) and their roles."""

    model = Membership
    extra = 0
    raw_id_fields = ("user",)


class TeamForm(forms.ModelForm):
    """A team's contact Slack webhook follows the rules of consumer webhooks."""

    contact_slack_webhook = forms.URLField(required=False, max_length=200, assume_scheme="https")

    def clean_contact_slack_webhook(self) -> str:
        url = self.cleaned_data["contact_slack_webhook"]
        refusal = endpoint_actions.slack_webhook_refusal(url) if url else None
        if refusal:
            raise forms.ValidationError(refusal, code="slack_webhook")
        return url


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    form = TeamForm
    list_display = ("slug", "name", "contact_email", "created_at")
    search_fields = ("slug", "name")
    inlines = [MembershipInline]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = (
        "public_id",
        "team",
        "name",
        "scopes",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )
    list_filter = ("team",)
    exclude = ("digest",)
    readonly_fields = ("public_id", "last_used_at")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown, never added, edited or deleted here: the rules (notice periods, overrides,
    who may acknowledge, URL and secret rules for endpoints, a partition's revisions and
    the notices they send, the outbox's claims) live in the services the API and the web
    pages call, and a row written past them would be a notice never sent or sent wrong."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_readonly_fields(self, request, obj=None):
        hidden = set(self.exclude or ())  # secrets stay out of sight
        return [f.name for f in self.model._meta.fields if f.name not in hidden]


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    """Datasets are added and changed through the same services as the API, so a dataset
    made or edited here is judged, forecast, polled and watched like any other: its next
    deadline, forecast and poll group are recomputed, the watchdog's monitor follows and
    the change is audited (as ``user:<username>``, acting for the owner team). What the
    services refuse is shown as an error and nothing is saved.

    ``lifecycle`` and ``sunset_at`` are read-only: deprecation and retirement follow the
    lifecycle rules (a change notice, its notice period, consumers told) in the services
    the API calls. An existing dataset's identity and ``owner`` too: the owner changes
    through a two-sided, audited ownership transfer that respects prefix claims. The
    schedule fields are Tidemark's own bookkeeping, shown but never edited."""

    list_display = ("namespace", "name", "owner", "criticality", "partitioning", "lifecycle")
    list_filter = ("criticality", "partitioning", "lifecycle", "owner")
    search_fields = ("namespace", "name", "description")

    LIFECYCLE_FIELDS = ("lifecycle", "sunset_at")
    SCHEDULE_FIELDS = (
        "poll_group",
        "next_deadline_at",
        "next_check_at",
        "unusual_check_key",
        "next_unusual_check_at",
        "next_forecast_at",
    )
    IDENTITY_FIELDS = ("namespace", "name", "owner")

    def get_readonly_fields(self, request, obj=None):
        fixed = (*self.LIFECYCLE_FIELDS, *self.SCHEDULE_FIELDS)
        if obj is None:
            return fixed
        return (*fixed, *self.IDENTITY_FIELDS)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except Problem as exc:
            # The admin's transaction has rolled back: nothing of the change was written.
            fields = "; ".join(f"{e.field}: {e.detail}" for e in exc.errors)
            told = f"Not saved: {exc.detail}" + (f" ({fields})" if fields else "")
            self.message_user(request, told, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def save_model(self, request, obj, form, change):
        actor = Actor(team=obj.owner, username=request.user.get_username())
        if change:
            changes = {f: form.cleaned_data[f] for f in form.changed_data}
            saved = dataset_services.dataset_update(actor=actor, dataset=obj, **changes)
        else:
            fields = {f: v for f, v in form.cleaned_data.items() if f not in self.IDENTITY_FIELDS}
            saved = dataset_services.dataset_register(
                actor=actor, namespace=obj.namespace, name=obj.name, **fields
            )
        # The admin logs and links to the row the services wrote (the identity normalised).
        obj.__dict__.update(
            {f.attname: getattr(saved, f.attname) for f in Dataset._meta.concrete_fields}
        )


class RevisionInline(admin.TabularInline):
    model = PartitionRevision
    extra = 0
    fields = ("version", "state", "ready_at", "detected_by", "code_version", "restatement")
    readonly_fields = fields


@admin.register(Partition)
class PartitionAdmin(ReadOnlyAdmin):
    list_display = ("dataset", "key", "start_at", "current_revision")
    search_fields = ("dataset__name", "key")
    inlines = [RevisionInline]
    raw_id_fields = ("dataset", "current_revision")


@admin.register(ReadinessEvent)
class ReadinessEventAdmin(ReadOnlyAdmin):
    list_display = ("dataset", "partition", "state", "source", "published_by", "received_at")
    list_filter = ("state", "source")
    raw_id_fields = ("dataset", "partition", "revision", "api_key")


class SubscriptionEndpointInline(admin.TabularInline):
    """The subscription's endpoints besides its first (``endpoint``)."""

    model = SubscriptionEndpoint
    extra = 0
    raw_id_fields = ("endpoint",)


@admin.register(Subscription)
class SubscriptionAdmin(ReadOnlyAdmin):
    list_display = ("team", "dataset", "job_namespace", "job_name", "endpoint", "created_at")
    list_filter = ("team",)
    raw_id_fields = ("dataset", "endpoint")
    inlines = (SubscriptionEndpointInline,)


@admin.register(Endpoint)
class EndpointAdmin(ReadOnlyAdmin):
    list_display = ("team", "kind", "url", "is_active", "disabled_reason", "failing_since")
    list_filter = ("kind", "is_active", "team")
    exclude = ("secret_encrypted", "previous_secrets")


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    fields = (
        "number",
        "started_at",
        "duration_ms",
        "status_code",
        "decision",
        "error_kind",
        "error",
    )
    readonly_fields = fields


@admin.action(description="Replay the selected dead letters (same webhook-id)")
def replay(modeladmin, request, queryset):
    replayed = 0
    for row in queryset:
        try:
            endpoint_actions.delivery_replay(delivery=row, now=timezone.now())
            replayed += 1
        except errors.NotADeadLetter:
            continue
    modeladmin.message_user(request, f"{replayed} delivery(ies) replayed", messages.SUCCESS)


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "notification",
        "endpoint",
        "state",
        "attempts",
        "next_attempt_at",
        "last_status_code",
    )
    list_filter = ("state",)
    raw_id_fields = ("notification", "endpoint")
    inlines = [AttemptInline]
    actions = [replay]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("dataset", "action", "actor", "created_at")
    list_filter = ("action",)
    readonly_fields = ("dataset", "team", "actor", "action", "changes", "created_at")


class AcknowledgementInline(admin.TabularInline):
    model = ChangeNoticeAcknowledgement
    extra = 0
    fields = ("team", "acknowledged_by", "acknowledged_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ChangeNotice)
class ChangeNoticeAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "dataset",
        "kind",
        "effective_at",
        "emergency",
        "require_acknowledgements",
        "state",
        "announced_by",
    )
    list_filter = ("kind", "state", "emergency")
    search_fields = ("dataset__namespace", "dataset__name", "description")
    raw_id_fields = ("dataset",)
    inlines = [AcknowledgementInline]


@admin.register(ChangeNoticeAcknowledgement)
class ChangeNoticeAcknowledgementAdmin(ReadOnlyAdmin):
    list_display = ("notice", "team", "acknowledged_by", "acknowledged_at")
    list_filter = ("team",)
    raw_id_fields = ("notice",)


@admin.register(Claim)
class ClaimAdmin(ReadOnlyAdmin):
    list_display = ("kind", "pattern", "team", "created_at")
    list_filter = ("kind", "team")
    search_fields = ("pattern",)


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "name", "team", "first_seen_at", "last_seen_at")
    list_filter = ("team",)
    search_fields = ("namespace", "name")


@admin.register(DatasetUsage)
class DatasetUsageAdmin(ReadOnlyAdmin):
    list_display = (
        "job",
        "direction",
        "dataset_namespace",
        "dataset_name",
        "team",
        "verified",
        "run_count",
        "last_seen_at",
    )
    list_filter = ("direction", "verified", "team")
    search_fields = ("dataset_namespace", "dataset_name", "job__name")
    raw_id_fields = ("job", "dataset")


@admin.register(Restatement)
class RestatementAdmin(ReadOnlyAdmin):
    """Read-only: restatements are opened, promoted and abandoned through the API, which
    checks the range and promotes in one transaction."""

    list_display = ("dataset", "version", "first_partition", "last_partition", "state")
    list_filter = ("state",)
    search_fields = ("dataset__name", "version")


@admin.register(DatasetTransfer)
class DatasetTransferAdmin(ReadOnlyAdmin):
    """Read-only: a transfer is proposed, accepted and cancelled through the API, by the
    two teams, and audited."""

    list_display = ("id", "dataset", "from_team", "to_team", "state", "created_at", "decided_at")
    list_filter = ("state",)
    search_fields = ("dataset__namespace", "dataset__name", "from_team__slug", "to_team__slug")
    list_select_related = ("dataset", "from_team", "to_team")


@admin.register(DatasetAlias)
class DatasetAliasAdmin(ReadOnlyAdmin):
    """Read-only, and never deleted here: usage of a symlink alias was recorded under its
    dataset's identity (``catalog.services.aliases``), which removing the alias would not
    undo."""

    list_display = ("alias_namespace", "alias_name", "kind", "namespace", "name", "declared_by")
    list_filter = ("kind",)
    search_fields = ("alias_namespace", "alias_name", "namespace", "name")

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SchemaObservation)
class SchemaObservationAdmin(ReadOnlyAdmin):
    list_display = ("dataset", "observed_at", "last_seen_at", "source", "job_name", "team")
    list_filter = ("source",)
    search_fields = ("dataset__namespace", "dataset__name", "job_name")
    list_select_related = ("dataset", "team")


@admin.register(SchemaChange)
class SchemaChangeAdmin(ReadOnlyAdmin):
    list_display = ("dataset", "observed_at", "removed", "retyped", "covered_by")
    search_fields = ("dataset__namespace", "dataset__name")
    list_select_related = ("dataset",)


@admin.register(RunConflict)
class RunConflictAdmin(ReadOnlyAdmin):
    """Lineage events kept out of a run they named (the run conflicts report)."""

    list_display = ("run_id", "reason", "event_team", "event_job", "run_job", "detected_at")
    list_filter = ("reason",)
    search_fields = ("event_team__slug", "run_team__slug")
    list_select_related = ("event_team", "event_job", "run_job")


@admin.register(UnclaimedUsage)
class UnclaimedUsageAdmin(ReadOnlyAdmin):
    """What collectors saw unclaimed database roles access, until a team claims them."""

    list_display = ("pattern", "direction", "dataset_namespace", "dataset_name", "access_count")
    search_fields = ("pattern", "dataset_name")
