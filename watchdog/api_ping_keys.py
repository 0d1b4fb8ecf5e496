"""The watchdog API's ping keys (``/api/v1/ping-keys``): create one for an owner (the key is
in the answer once), list them, revoke one. Thin views: rules live in ``ping_keys``."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from . import ping_keys
from .api import WatchdogApiView
from .models import PingKey


class PingKeyInputSerializer(serializers.Serializer):
    owner = serializers.CharField(max_length=64, help_text="An owner label (a team slug).")
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class PingKeyOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = PingKey
        fields = ["id", "owner", "name", "prefix", "created_at", "revoked_at"]


def slug_url_template(key: str) -> str:
    """The slug URL of a key, with ``{slug}`` where a monitor's slug goes."""
    return f"{settings.WATCHDOG_PUBLIC_URL.rstrip('/')}/ping/{key}/{{slug}}"


class PingKeyListCreateApi(WatchdogApiView):
    def get(self, request: Request) -> Response:
        keys = ping_keys.ping_key_list(owner=request.query_params.get("owner"))
        return Response(PingKeyOutputSerializer(keys[:500], many=True).data)

    def post(self, request: Request) -> Response:
        data = PingKeyInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row, key = ping_keys.ping_key_create(**data.validated_data, now=timezone.now())
        body = PingKeyOutputSerializer(row).data
        body["key"] = key  # shown once
        body["ping_url"] = slug_url_template(key)
        return Response(body, status=201)


class PingKeyDetailApi(WatchdogApiView):
    def delete(self, request: Request, key_id: int) -> Response:
        ping_keys.ping_key_revoke(key_id, now=timezone.now())
        return Response(status=204)
