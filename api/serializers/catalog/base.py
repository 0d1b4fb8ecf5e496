"""What every API input serializer shares: unknown fields refused, strings typed, and
fields built once per thread for the hottest ones."""

from __future__ import annotations

import threading

from django.utils.functional import cached_property
from rest_framework import serializers

from httpkit.fields import TypedStrings


class StrictSerializer(TypedStrings, serializers.Serializer):
    """Reject unknown fields instead of silently dropping them (a typo should be a 400),
    and numbers for strings (``TypedStrings``)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {
                        name: [serializers.ErrorDetail("unknown field", code="unknown")]
                        for name in unknown
                    }
                )
        return super().to_internal_value(data)


_field_sets = threading.local()  # per thread: serializer class -> its bound fields


class FieldsOncePerThread(serializers.Serializer):
    """Builds its fields once per thread instead of once per instance.

    DRF deep-copies every declared field for each new serializer, re-running each field's
    ``__init__``: on the publish endpoint that cost more than the validation itself. Input
    fields keep no per-request state (values and errors live in locals and on the
    serializer), so instances can share one set, bound to a data-less instance of the
    class; one set per thread, so concurrent requests never share a field. Only for
    serializers used without ``partial`` or ``context``, which their fields would read
    from that data-less instance.
    """

    @cached_property
    def fields(self):
        by_class = _field_sets.__dict__.setdefault("by_class", {})
        fields = by_class.get(type(self))
        if fields is None:
            holder = type(self)()  # never validates anything: it only owns the fields
            fields = by_class[type(self)] = super(FieldsOncePerThread, holder).fields
        return fields
