"""DRF choice fields whose errors teach: an invalid choice names the field, the value sent
and every choice (``problems.choice_detail``), instead of DRF's bare
``"weekly" is not a valid choice.``

Every serializer of the catalog's API and the watchdog's uses these (``ModelSerializer``
subclasses through ``serializer_choice_field``); ``tests/httpkit/test_fields.py`` walks
the serializers to keep it so.
"""

from __future__ import annotations

from rest_framework import serializers

from problems import choice_detail


class _TeachingChoice:
    """Replaces the ``invalid_choice`` message; every other failure is DRF's."""

    def fail(self, key, **kwargs):
        if key == "invalid_choice":
            raise serializers.ValidationError(
                choice_detail(self._teaching_name(), kwargs.get("input"), self.choices),
                code="invalid_choice",
            )
        return super().fail(key, **kwargs)

    def _teaching_name(self) -> str:
        # A list's child is bound with an empty name: the list's name is the field's.
        field = self
        while not field.field_name and field.parent is not None:
            field = field.parent
        return field.field_name or "this field"


class ChoiceField(_TeachingChoice, serializers.ChoiceField):
    """``serializers.ChoiceField`` with an ``invalid_choice`` error listing the choices."""


class MultipleChoiceField(_TeachingChoice, serializers.MultipleChoiceField):
    """``serializers.MultipleChoiceField`` with an ``invalid_choice`` error listing the
    choices."""
