"""Admin pages for the watchdog's monitors, channels, incidents and pages."""

from django.contrib import admin

from .models import Channel, Incident, Monitor, Page


@admin.register(Monitor)
class MonitorAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "kind", "state", "deadline_at", "last_ping_at")
    list_filter = ("state", "kind", "owner")
    search_fields = ("name", "owner", "external_id")
    readonly_fields = ("ping_key", "deadline_at", "check_at", "last_ping_at", "last_success_at")
    filter_horizontal = ("channels",)


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "owner")
    exclude = ("secret_encrypted",)


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = ("summary", "reason", "deadline_at", "opened_at", "resolved_at")
    list_filter = ("reason",)


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ("incident", "channel", "action", "state", "attempts", "last_status")
    list_filter = ("state", "action")
