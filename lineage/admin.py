"""Operator views of lineage: raw events (with their processing state), runs and
collector cursors."""

from django.contrib import admin

from .models import CollectorCursor, LineageEvent, LineageRun


@admin.register(LineageEvent)
class LineageEventAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "event_type",
        "job_namespace",
        "job_name",
        "event_time",
        "team",
        "verified",
        "state",
        "attempts",
        "received_at",
    )
    list_filter = ("state", "kind", "verified", "team")
    search_fields = ("job_namespace", "job_name", "run_id")
    raw_id_fields = ("api_key",)


@admin.register(LineageRun)
class LineageRunAdmin(admin.ModelAdmin):
    list_display = ("run_id", "job", "state", "started_at", "ended_at", "team")
    list_filter = ("state",)
    search_fields = ("run_id", "job__namespace", "job__name")
    raw_id_fields = ("job",)


@admin.register(CollectorCursor)
class CollectorCursorAdmin(admin.ModelAdmin):
    list_display = ("name", "runs", "last_run_at", "last_summary")
    readonly_fields = ("name", "state", "runs", "last_run_at", "last_summary")
