"""Query parameters of the Marquez-compatible read API (Marquez's names and defaults).
Unknown parameters are ignored, as Marquez ignores them: its web UI sends some that
Tidemark has no use for."""

from __future__ import annotations

from rest_framework import serializers

from httpkit.fields import ChoiceField
from lineage.marquez.graph import SEARCH_FILTERS, SEARCH_SORTS

MAX_LIMIT = 1000


class MarquezPageSerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=100)
    offset = serializers.IntegerField(min_value=0, default=0)


class MarquezLineageQuerySerializer(serializers.Serializer):
    nodeId = serializers.CharField(max_length=2400, trim_whitespace=False)
    depth = serializers.IntegerField(min_value=0, max_value=100, default=20)


class MarquezColumnLineageQuerySerializer(MarquezLineageQuerySerializer):
    withDownstream = serializers.BooleanField(default=False)


class MarquezSearchQuerySerializer(serializers.Serializer):
    q = serializers.CharField(max_length=255, trim_whitespace=False)
    filter = ChoiceField(SEARCH_FILTERS, required=False)
    sort = ChoiceField(SEARCH_SORTS, default="UPDATE_AT")
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=10)
    namespace = serializers.CharField(max_length=255, required=False, trim_whitespace=False)


class MarquezRunFacetsQuerySerializer(serializers.Serializer):
    type = ChoiceField(("run", "job"), default="run")
