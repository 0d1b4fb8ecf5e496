"""The watchdog API's ping keys (``/api/v1/ping-keys``): create one for an owner (the key is
in the answer once), list them, revoke one. Thin views: rules live in ``ping_keys``."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from httpkit.fields import TypedStrings

from .. import ping_keys
from ..models import PingKey
from . import examples as api_examples
from .base import WatchdogApiView


@extend_schema_serializer(examples=api_examples.PING_KEY_INPUT)
class PingKeyInputSerializer(TypedStrings, serializers.Serializer):
    owner = serializers.CharField(max_length=64, help_text="An owner label (a team slug).")
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


@extend_schema_serializer(examples=api_examples.PING_KEY_OUTPUT)
class PingKeyOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = PingKey
        fields = ["id", "owner", "name", "prefix", "created_at", "revoked_at"]


@extend_schema_serializer(examples=api_examples.PING_KEY_CREATED)
class PingKeyCreatedOutputSerializer(PingKeyOutputSerializer):
    """Documents a created ping key: the key itself and its URL template, shown once."""

    key = serializers.CharField(help_text="The ping key, shown only in this response.")
    ping_url = serializers.CharField(
        help_text="The slug URL of the key, with `{slug}` where a monitor's slug goes."
    )

    class Meta(PingKeyOutputSerializer.Meta):
        fields = [*PingKeyOutputSerializer.Meta.fields, "key", "ping_url"]


def slug_url_template(key: str) -> str:
    """The slug URL of a key, with ``{slug}`` where a monitor's slug goes."""
    return f"{settings.WATCHDOG_PUBLIC_URL.rstrip('/')}/ping/{key}/{{slug}}"


class PingKeyListCreateApi(WatchdogApiView):
    @extend_schema(
        parameters=[OpenApiParameter("owner", description="Only this owner's keys.")],
        responses=PingKeyOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """List ping keys

        Revoked ones included (with `revoked_at`); only a key's prefix is shown.
        """
        keys = ping_keys.ping_key_list(owner=request.query_params.get("owner"))
        return Response(PingKeyOutputSerializer(keys[:500], many=True).data)

    @extend_schema(request=PingKeyInputSerializer, responses={201: PingKeyCreatedOutputSerializer})
    def post(self, request: Request) -> Response:
        """Create a ping key

        For an owner: pings by `/ping/<key>/<slug>` reach that owner's monitors, and
        `?create=1` creates one on its first ping. The key is in this answer only.
        """
        data = PingKeyInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row, key = ping_keys.ping_key_create(**data.validated_data, now=timezone.now())
        body = PingKeyOutputSerializer(row).data
        body["key"] = key  # shown once
        body["ping_url"] = slug_url_template(key)
        return Response(body, status=201)


class PingKeyDetailApi(WatchdogApiView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, key_id: int) -> Response:
        """Revoke a ping key

        Its slug URLs answer 404 from now on.
        """
        ping_keys.ping_key_revoke(key_id, now=timezone.now())
        return Response(status=204)
