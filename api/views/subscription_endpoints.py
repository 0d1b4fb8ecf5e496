"""A subscription's endpoints: deliver its notifications to another webhook as well, or
stop delivering to one (``catalog.services.subscription_endpoints``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import ApiKey
from catalog.services import subscription_endpoints

from ..serializers import catalog as s
from .base import actor_of


class SubscriptionEndpointAddApi(APIView):
    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            404: "`subscription_not_found`.",
            409: "`dataset_retired`.",
        }
    }

    @extend_schema(
        description="Deliver a subscription's notifications to another webhook as well. "
        "Each endpoint of a subscription receives every notification its filters let "
        "through as a delivery of its own: its own retries and dead letters, signed with "
        "its own secret, with the notification's webhook-id (the same at every endpoint, "
        "so a consumer that fans in deduplicates on it). A new endpoint's signing secret "
        "is in this response only (`endpoint_secret`, as when a declaration creates one); "
        "an endpoint your team already has keeps its secret. Adding a URL the "
        "subscription already delivers to is a 200 that changes nothing. At most 10 "
        "endpoints a subscription (400, rule `max_endpoints`). With `since`, the "
        "dataset's notifications since then are delivered to the new endpoint too. To move "
        "a subscription to a new URL, add the new endpoint, then remove the old one.",
        request=s.SubscriptionEndpointAddInputSerializer,
        responses={
            201: OpenApiResponse(s.SubscriptionEndpointOutputSerializer, "added"),
            200: OpenApiResponse(s.SubscriptionEndpointOutputSerializer, "already there"),
        },
    )
    def post(self, request: Request, subscription_id: int) -> Response:
        """Add an endpoint to a subscription."""
        data = s.SubscriptionEndpointAddInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = subscription_endpoints.subscription_endpoint_add(
            actor=actor_of(request), subscription_id=subscription_id, **data.validated_data
        )
        body = {
            "id": result.endpoint.pk,
            "url": result.endpoint.url,
            "subscription_id": result.subscription.pk,
            "caught_up": result.caught_up,
        }
        if result.endpoint_secret:
            body["endpoint_secret"] = result.endpoint_secret
        return Response(
            s.SubscriptionEndpointOutputSerializer(body).data,
            status=status.HTTP_201_CREATED if result.added else status.HTTP_200_OK,
        )


class SubscriptionEndpointRemoveApi(APIView):
    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "DELETE": {404: "`subscription_not_found`, or `endpoint_not_found`: not one of its."}
    }

    @extend_schema(
        description="Stop a subscription delivering to one of its endpoints. Notifications "
        "made from now on get no delivery to it through this subscription; deliveries "
        "already queued to it are still sent. The endpoint stays in /api/v1/endpoints "
        "(with its log and secret), for the team's other subscriptions. Removing the "
        "first endpoint makes the oldest other one first (`endpoint_url`); removing the "
        "last leaves the subscription declared, delivering nowhere.",
        responses={204: None},
    )
    def delete(self, request: Request, subscription_id: int, endpoint_id: int) -> Response:
        """Remove an endpoint from a subscription."""
        subscription_endpoints.subscription_endpoint_remove(
            actor=actor_of(request), subscription_id=subscription_id, endpoint_id=endpoint_id
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
