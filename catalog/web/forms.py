"""Forms of the catalog's web pages: shapes and types only; rules live in the services,
whose problems are shown as form errors (``add_problem``)."""

from __future__ import annotations

from django import forms

from problems import Problem

from ..browse import FRESHNESS_FILTERS
from ..models import Dataset


class DatasetFilterForm(forms.Form):
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
