"""Shapes of API keys: the key presented (``GET /me``), listing, and creating one."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from catalog.models import ApiKey
from httpkit.fields import ChoiceField

from ...openapi_examples import catalog as examples_catalog
from .base import StrictSerializer


@extend_schema_serializer(examples=examples_catalog.API_KEY_OUTPUT)
class ApiKeyOutputSerializer(serializers.Serializer):
    public_id = serializers.CharField()
    name = serializers.CharField()
    scopes = serializers.ListField(child=ChoiceField(ApiKey.Scope.choices))
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)


class TeamRefOutputSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()


@extend_schema_serializer(examples=examples_catalog.ME_OUTPUT)
class MeOutputSerializer(serializers.Serializer):
    """Documents ``GET /api/v1/me``: the key's team and the key itself."""

    team = TeamRefOutputSerializer(help_text="The team the key acts for.")
    key = ApiKeyOutputSerializer(help_text="The key presented (never its secret).")


@extend_schema_serializer(examples=examples_catalog.API_KEY_CREATE_INPUT)
class ApiKeyCreateInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(
        child=ChoiceField(ApiKey.Scope.choices), min_length=1, max_length=5
    )
    expires_at = serializers.DateTimeField(required=False, allow_null=True)


@extend_schema_serializer(examples=examples_catalog.API_KEY_CREATED_OUTPUT)
class ApiKeyCreatedOutputSerializer(ApiKeyOutputSerializer):
    token = serializers.CharField(help_text="The key itself, shown only in this response.")
