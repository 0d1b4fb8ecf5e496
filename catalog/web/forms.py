"""Forms of the catalog's web pages: shapes and types only; rules live in the services,
whose problems are shown as form errors (``add_problem``)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from problems import Problem, choice_detail

from .. import endpoint_actions
from ..browse import FRESHNESS_FILTERS
from ..models import ApiKey, Dataset


class Form(forms.Form):
    """A form whose invalid choice names the field, the value and every choice, in the
    words the API uses (``problems.choice_detail``), instead of Django's "Select a valid
    choice"."""

    def full_clean(self):
        for name, field in self.fields.items():
            if isinstance(field, forms.ChoiceField):  # MultipleChoiceField too
                field.error_messages["invalid_choice"] = _choice_message(name, field.choices)
        super().full_clean()


def _choice_message(name: str, choices) -> str:
    """``choice_detail``'s sentence as a Django message (``%(value)s`` for the value)."""
    values = [str(value) for value, _ in choices]
    sentence = choice_detail(name, "\0", values).replace("%", "%%")
    return sentence.replace("\0", "%(value)s")


class DatasetFilterForm(Form):
    """The catalog page's filters (every one optional)."""

    q = forms.CharField(required=False, max_length=200, label="Search")
    team = forms.ChoiceField(required=False)
    namespace = forms.ChoiceField(required=False)
    criticality = forms.ChoiceField(
        required=False, choices=[("", "any"), *Dataset.Criticality.choices]
    )
    freshness = forms.ChoiceField(
        required=False,
        choices=[("", "any"), *FRESHNESS_FILTERS.items()],
    )
    lifecycle = forms.ChoiceField(required=False, choices=[("", "any"), *Dataset.Lifecycle.choices])

    def __init__(self, *args, teams: list[str], namespaces: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", "any")] + [(t, t) for t in teams]
        self.fields["namespace"].choices = [("", "any")] + [(n, n) for n in namespaces]


def add_problem(form: forms.Form, problem: Problem) -> None:
    """Show a service's problem on ``form``: each field error on its field when the form
    has it, the rest (and the detail when no field is named) above the form."""
    named = False
    for error in problem.errors:
        field = error.field if error.field in form.fields else None
        form.add_error(field, error.detail)
        named = True
    if not named:
        form.add_error(None, problem.detail or problem.title)


class DatasetEditForm(Form):
    """What an owner changes on the dataset page; ``dataset_update`` judges it."""

    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    criticality = forms.ChoiceField(choices=Dataset.Criticality.choices)
    completion_signal = forms.ChoiceField(choices=Dataset.CompletionSignal.choices)
    sla_cron = forms.CharField(required=False, max_length=128, label="SLA deadline (cron)")
    sla_timezone = forms.CharField(max_length=64, label="SLA time zone")
    sla_grace_seconds = forms.IntegerField(
        min_value=0, max_value=Dataset.MAX_SLA_GRACE_SECONDS, label="Grace (seconds)"
    )
    sla_calendar = forms.ChoiceField(
        required=False, choices=Dataset.SlaCalendar.choices, label="SLA applies on"
    )
    sla_holidays_country = forms.CharField(
        required=False,
        max_length=8,
        label="Holidays of (country)",
        help_text="ISO 3166-1 alpha-2, e.g. DE; blank: weekends only.",
    )
    sla_holidays_subdivision = forms.CharField(
        required=False,
        max_length=64,
        label="Holidays of (subdivision)",
        help_text="State or province code, e.g. BY; blank: national holidays.",
    )
    sla_non_business_day = forms.ChoiceField(
        required=False,
        choices=Dataset.NonBusinessDay.choices,
        label="What a deadline on another day owes is",
    )
    change_notice_days = forms.IntegerField(
        min_value=0, max_value=Dataset.MAX_CHANGE_NOTICE_DAYS, label="Change notice (days)"
    )
    accepts_future_partitions = forms.BooleanField(
        required=False,
        label="Accepts future partitions",
        help_text="Only for forecasts and schedules: otherwise a partition whose period has "
        "not started is refused as a mistyped key.",
    )
    lifecycle = forms.ChoiceField(choices=Dataset.Lifecycle.choices)
    sunset_at = forms.DateTimeField(required=False, label="Sunset (UTC, YYYY-MM-DD HH:MM)")
    override_reason = forms.CharField(
        required=False,
        max_length=2000,
        label="Lifecycle override reason",
        help_text="Only to change the lifecycle without a change notice in effect; audited.",
    )

    FIELDS = (
        "description",
        "criticality",
        "completion_signal",
        "sla_cron",
        "sla_timezone",
        "sla_grace_seconds",
        "sla_calendar",
        "sla_holidays_country",
        "sla_holidays_subdivision",
        "sla_non_business_day",
        "change_notice_days",
        "accepts_future_partitions",
        "lifecycle",
        "sunset_at",
    )

    @classmethod
    def for_dataset(cls, dataset: Dataset, data=None) -> DatasetEditForm:
        return cls(data, initial={f: getattr(dataset, f) for f in cls.FIELDS})

    # Blank (a page rendered before these fields existed) keeps the stored choice.
    KEPT_WHEN_BLANK = ("sla_calendar", "sla_non_business_day")

    def changes(self) -> dict:
        """The fields the owner changed, as ``dataset_update`` takes them."""
        return {
            f: self.cleaned_data[f]
            for f in self.FIELDS
            if f in self.changed_data
            and not (f in self.KEPT_WHEN_BLANK and self.cleaned_data[f] == "")
        }


class SubscribeForm(Form):
    """Declare that one of the person's teams (optionally one of its jobs) reads the
    dataset; ``subscription_create`` judges it."""

    team = forms.ChoiceField()
    job_namespace = forms.CharField(required=False, max_length=255)
    job_name = forms.CharField(required=False, max_length=1024)
    endpoint_url = forms.URLField(
        assume_scheme="https",
        required=False,
        max_length=2048,
        label="Webhook URL",
        help_text="Optional: where to notify your team (https).",
    )
    need_by_cron = forms.CharField(
        required=False,
        max_length=128,
        label="Needed by (cron)",
        help_text="Optional: when your team needs each partition, e.g. 0 7 * * *.",
    )
    need_by_timezone = forms.CharField(
        required=False, max_length=64, initial="UTC", label="Needed by time zone"
    )

    def __init__(self, *args, teams: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [(t, t) for t in teams]

    def clean_need_by_timezone(self) -> str:
        return self.cleaned_data["need_by_timezone"] or "UTC"

    def clean_endpoint_url(self) -> str | None:
        url = self.cleaned_data["endpoint_url"]
        refusal = endpoint_actions.webhook_url_refusal(url) if url else None
        if refusal is not None:
            raise forms.ValidationError(refusal.detail, code=refusal.rule)
        return url or None  # None keeps what an earlier declaration set

    def clean(self):
        data = super().clean()
        if bool(data.get("job_namespace")) != bool(data.get("job_name")):
            self.add_error("job_name", "job namespace and job name go together")
        return data


class TeamChoiceForm(Form):
    """Which of the person's teams acts (acknowledging a change notice)."""

    team = forms.ChoiceField()

    def __init__(self, *args, teams: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [(t, t) for t in teams]


def add_validation_error(form: forms.Form, error: ValidationError) -> None:
    """Show a model ``ValidationError`` (from ``full_clean``) on ``form``."""
    if hasattr(error, "error_dict"):
        for field, messages in error.message_dict.items():
            form.add_error(field if field in form.fields else None, messages)
    else:
        form.add_error(None, error.messages)


class ApiKeyCreateForm(Form):
    """A new API key for the team; ``api_key_create`` judges it. The ``governance`` scope
    is offered to governance staff only."""

    name = forms.CharField(max_length=100)
    scopes = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        initial=[ApiKey.Scope.READ],
    )
    expires_at = forms.DateTimeField(required=False, label="Expires (UTC, optional)")

    def __init__(self, *args, governance: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["scopes"].choices = [
            (value, label)
            for value, label in ApiKey.Scope.choices
            if governance or value != ApiKey.Scope.GOVERNANCE
        ]


class EndpointRecoverForm(Form):
    """Recover an endpoint's failed deliveries since a time (UTC);
    ``recovery.endpoint_recover`` judges it."""

    since = forms.DateTimeField(label="Since (UTC)")
