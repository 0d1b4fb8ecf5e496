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


class InstantField(serializers.DateTimeField):
    """``serializers.DateTimeField`` whose refusal names the value sent: ``'yesterday' is
    not a date-time; write it as RFC 3339, e.g. 2026-12-05T06:00:00Z`` (rule ``invalid``),
    instead of DRF's list of formats. A time without an offset is read as UTC."""

    def to_internal_value(self, value):
        try:
            return super().to_internal_value(value)
        except serializers.ValidationError as exc:
            if not any(getattr(d, "code", "") == "invalid" for d in exc.detail):
                raise
            shown = value[:60] if isinstance(value, str) else type(value).__name__
            raise serializers.ValidationError(
                f"{shown!r} is not a date-time; write it as RFC 3339, e.g. 2026-12-05T06:00:00Z",
                code="invalid",
            ) from None


class TypedStrings:
    """A serializer mixin for JSON bodies: a string field given a number, or a boolean
    field given anything but ``true``/``false``, is a 400 naming the field (rule
    ``type``), as the OpenAPI document types them, rather than DRF's silent ``str(3)`` and
    ``0``/``"yes"`` for false/true. Query strings (a ``QueryDict``) are text: untouched."""

    def to_internal_value(self, data):
        if isinstance(data, dict) and not hasattr(data, "getlist"):
            wrong = {
                name: [serializers.ErrorDetail(rule, code="type")]
                for name, field in self.fields.items()
                if name in data
                and not field.read_only
                and (rule := _type_rule(field, data[name])) is not None
            }
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)


def _type_rule(field: serializers.Field, value) -> str | None:
    """What ``value`` lacks for ``field`` (a JSON body's value), or None when it fits."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(field, serializers.CharField) and number:
        return "must be a string, not a number"
    if isinstance(field, serializers.BooleanField) and not isinstance(value, bool):
        return "must be true or false"
    return None
