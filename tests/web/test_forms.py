"""The web forms' invalid choices list the choices, in the API's words."""

from __future__ import annotations

import pytest

from catalog.web.forms import ApiKeyCreateForm, DatasetEditForm, DatasetFilterForm, SubscribeForm

EDIT = {
    "criticality": "high",
    "completion_signal": "event",
    "sla_timezone": "UTC",
    "sla_grace_seconds": 0,
    "change_notice_days": 14,
    "lifecycle": "active",
}


@pytest.mark.parametrize(
    ("form", "field", "detail"),
    [
        (
            DatasetEditForm({**EDIT, "criticality": "urgent"}),
            "criticality",
            '"urgent" is not a valid choice for criticality; '
            "choose one of: low, medium, high, critical",
        ),
        (
            DatasetEditForm({**EDIT, "lifecycle": "gone"}),
            "lifecycle",
            '"gone" is not a valid choice for lifecycle; '
            "choose one of: active, deprecated, retired",
        ),
        (
            ApiKeyCreateForm({"name": "k", "scopes": ["read", "governance"]}, governance=False),
            "scopes",
            '"governance" is not a valid choice for scopes; '
            "choose one of: publish, lineage, read, manage",
        ),
        (
            DatasetFilterForm({"team": "billing"}, teams=["orders", "sales"], namespaces=[]),
            "team",
            '"billing" is not a valid choice for team; choose one of: "", orders, sales',
        ),
        (
            SubscribeForm({"team": "100%"}, teams=["orders"]),
            "team",
            '"100%" is not a valid choice for team; choose one of: orders',
        ),
    ],
)
def test_an_invalid_choice_lists_the_choices(form, field, detail):
    assert not form.is_valid()
    assert form.errors[field] == [detail]
