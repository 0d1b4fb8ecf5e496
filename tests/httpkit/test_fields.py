"""Every choice field of the catalog's and the watchdog's serializers lists its choices
when a value is not one of them (``httpkit.fields``), and the sentence it uses."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from rest_framework import serializers

from httpkit.fields import ChoiceField, MultipleChoiceField
from problems import choice_detail

SERIALIZER_MODULES = [
    "api.serializers.catalog",
    "api.serializers.governance",
    "api.serializers.lineage",
    "api.serializers.schemas",
    "watchdog.api",
]


def _modules():
    """Each listed module and, for a package, each of its modules (where classes live)."""
    for module_name in SERIALIZER_MODULES:
        module = importlib.import_module(module_name)
        yield module_name, module
        for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
            name = f"{module_name}.{info.name}"
            yield name, importlib.import_module(name)


def _serializer_classes():
    for module_name, module in _modules():
        for name, cls in inspect.getmembers(module, inspect.isclass):
            abstract = issubclass(cls, serializers.ModelSerializer) and not hasattr(cls, "Meta")
            if issubclass(cls, serializers.Serializer) and cls.__module__ == module_name:
                if abstract:
                    continue
                yield pytest.param(cls, id=f"{module_name}.{name}")


def _choice_fields(serializer, path=""):
    for name, field in serializer.fields.items():
        here = f"{path}{name}"
        while isinstance(field, serializers.ListField | serializers.DictField):
            field = field.child
        if isinstance(field, serializers.ListSerializer):
            field = field.child
        if isinstance(field, serializers.Serializer):
            yield from _choice_fields(field, f"{here}.")
        elif isinstance(field, serializers.ChoiceField):
            yield here, field


@pytest.mark.django_db(databases=["default", "watchdog"])
@pytest.mark.parametrize("cls", list(_serializer_classes()))
def test_every_choice_field_lists_its_choices(cls):
    found = list(_choice_fields(cls()))
    plain = [path for path, field in found if not isinstance(field, ChoiceField)]
    assert plain == [], f"use httpkit.fields.ChoiceField for {plain}"


@pytest.mark.parametrize(
    ("field", "data", "detail"),
    [
        (
            ChoiceField(["none", "hourly", "daily", "monthly"]),
            {"partitioning": "weekly"},
            '"weekly" is not a valid choice for partitioning; '
            "choose one of: none, hourly, daily, monthly",
        ),
        (
            serializers.ListField(child=ChoiceField(["read", "manage"])),
            {"partitioning": ["read", "root"]},
            '"root" is not a valid choice for partitioning; choose one of: read, manage',
        ),
        (
            MultipleChoiceField(choices=["read", "manage"]),
            {"partitioning": ["root"]},
            '"root" is not a valid choice for partitioning; choose one of: read, manage',
        ),
    ],
)
def test_an_invalid_choice_names_field_value_and_choices(field, data, detail):
    form = type("Form", (serializers.Serializer,), {"partitioning": field})(data=data)
    assert not form.is_valid()
    errors = form.errors["partitioning"]
    error = errors[1][0] if isinstance(errors, dict) else errors[0]
    assert (str(error), error.code) == (detail, "invalid_choice")


def test_choice_detail_marks_the_empty_choice_and_counts_past_twenty():
    assert choice_detail("p", "x", ["", "daily"]) == (
        '"x" is not a valid choice for p; choose one of: "", daily'
    )
    many = choice_detail("team", "y" * 150, [f"t{i}" for i in range(25)])
    assert many.startswith(f'"{"y" * 100}..." is not a valid choice for team;')
    assert many.endswith("t18, t19 and 5 more")
