"""Admin pages for the watchdog's monitors, channels, incidents and pages.

A monitor edited here goes through the same rules as the REST API: its fields are checked
by ``monitors.validate`` (errors shown on the form) and a changed schedule re-plans its next
deadline and start from now. A channel's target is checked as the API checks it. Incidents
and pages are shown, never changed.

Operators of the on-call pages are made with ``manage.py create_operator`` (which sets the
password); here their labels can be changed and an account deactivated (its sessions end
at once).
"""

from django import forms
from django.contrib import admin
from django.utils import timezone

from problems import ValidationProblem

from . import channels, monitors, operators
from .models import Channel, Incident, Monitor, Operator, Page


class MonitorForm(forms.ModelForm):
    """The admin's monitor form (its fields come from ``MonitorAdmin``)."""

    def _post_clean(self):
        super()._post_clean()
        try:
            monitors.validate(self.instance)
        except ValidationProblem as problem:
            for error in problem.errors:
                field = error.field if error.field in self.fields else None
                self.add_error(field, error.detail)


@admin.register(Monitor)
class MonitorAdmin(admin.ModelAdmin):
    form = MonitorForm
    list_display = ("name", "owner", "kind", "state", "deadline_at", "last_ping_at")
    list_filter = ("state", "kind", "owner")
    search_fields = ("name", "owner", "external_id")
    readonly_fields = (
        "ping_key",
        *monitors.STATE_FIELDS,
        "last_start_at",
        "rate_window_start",
        "rate_count",
    )
    filter_horizontal = ("channels",)

    def save_model(self, request, obj, form, change):
        if not change or monitors.SCHEDULE_FIELDS & set(form.changed_data):
            monitors.reschedule(obj, now=timezone.now(), keep_owed=change)
        super().save_model(request, obj, form, change)


class ChannelForm(forms.ModelForm):
    """The admin's channel form: the target is checked as the REST API checks it
    (``channels.target_refusal``)."""

    def clean(self):
        cleaned = super().clean()
        kind, target = cleaned.get("kind"), cleaned.get("target")
        if kind and target:
            refusal = channels.target_refusal(kind=kind, target=target)
            if refusal is not None:
                self.add_error("target", channels.refusal_detail(refusal, target=target))
        return cleaned


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = ("name", "kind", "owner")
    exclude = ("secret_encrypted",)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown, never added, edited or deleted here: an incident resolved or a page changed
    past ``incidents`` and ``paging`` would leave on-call paged with no resolve sent (an
    incident resolves when its data lands, or by pausing its monitor on the on-call pages,
    which pages the resolve)."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    list_display = (
        "summary",
        "reason",
        "deadline_at",
        "opened_at",
        "resolved_at",
        "held_under",
        "released_at",
    )
    list_filter = ("reason",)
    list_select_related = ("held_under",)
    raw_id_fields = ("part_of", "held_under", "held_via")


@admin.register(Page)
class PageAdmin(ReadOnlyAdmin):
    list_display = ("incident", "channel", "action", "state", "attempts", "last_status")
    list_filter = ("state", "action")


class OperatorForm(forms.ModelForm):
    """Labels and the active flag of an operator, checked as ``create_operator`` does."""

    def clean(self):
        cleaned = super().clean()
        labels = cleaned.get("labels") or []
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            self.add_error("labels", 'a list of owner labels, e.g. ["orders"]')
            return cleaned
        try:
            operators.validate_labels(labels, all_labels=cleaned.get("all_labels", False))
        except ValidationProblem as problem:
            for error in problem.errors:
                self.add_error(error.field if error.field in self.fields else None, error.detail)
        return cleaned


@admin.register(Operator)
class OperatorAdmin(admin.ModelAdmin):
    form = OperatorForm
    list_display = ("username", "all_labels", "labels", "is_active", "last_login_at")
    list_filter = ("is_active", "all_labels")
    search_fields = ("username",)
    fields = ("username", "is_active", "all_labels", "labels", "created_at", "last_login_at")
    readonly_fields = ("username", "created_at", "last_login_at")

    def has_add_permission(self, request):
        return False  # manage.py create_operator, which takes the password safely
