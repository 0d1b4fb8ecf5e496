"""Endpoints and deliveries of the caller's team: health, dead letters, replay, recovery,
secrets and the delivery log."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import endpoint_actions, recovery, selectors
from catalog.models import ApiKey
from catalog.services import endpoints

from ..serializers import catalog as s
from ..serializers import endpoints as e
from .base import actor_of, paginate


class EndpointListApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.EndpointOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        """List your team's webhook endpoints and their health.

        Needs the `read` scope. Each endpoint with its state (active, or disabled and
        why), its failing streak and its deliveries: `succeeded` in the last day,
        `waiting` (pending or retrying), `dead_letters` (all kept, replayable) and
        `success_rate` over the last day (succeeded over succeeded plus dead letters
        that finished then; null when none did), newest first, one cursor page at a
        time. The last day is whole UTC hours: from the start of the hour that was 24
        hours ago until now, so 24 to 25 hours.
        """
        queryset = selectors.endpoint_list(team=actor_of(request).team)
        return paginate(self, request, queryset, s.EndpointOutputSerializer, ("-id",))


class EndpointDetailApi(APIView):
    required_scope = {"GET": ApiKey.Scope.READ, "PATCH": ApiKey.Scope.MANAGE}

    @extend_schema(
        responses=s.EndpointOutputSerializer,
        description="The endpoint as in the list: its health, its rate limit "
        "(`rate_limit_per_second`, null for the deployment's default) and "
        "`throttled_until`, the end of the pause its last 429 or 503 with Retry-After "
        "asked for.",
    )
    def get(self, request: Request, endpoint_id: int) -> Response:
        """Read one of your team's endpoints and its health."""
        return Response(_endpoint_out(request, endpoint_id))

    @extend_schema(
        request=e.EndpointUpdateInputSerializer,
        responses=s.EndpointOutputSerializer,
        description="Set the endpoint's rate limit (`rate_limit_per_second`; null: the "
        "deployment's default). A receiver that answers 429 or 503 with Retry-After "
        "pauses the whole endpoint (`throttled_until`), whatever its rate.",
    )
    def patch(self, request: Request, endpoint_id: int) -> Response:
        """Change one of your team's endpoints."""
        body = e.EndpointUpdateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        endpoint = selectors.endpoint_get(team=actor_of(request).team, endpoint_id=endpoint_id)
        if "rate_limit_per_second" in body.validated_data:
            endpoint_actions.endpoint_set_rate_limit(
                endpoint=endpoint,
                rate_limit_per_second=body.validated_data["rate_limit_per_second"],
            )
        return Response(_endpoint_out(request, endpoint_id))


def _endpoint_out(request: Request, endpoint_id: int) -> dict:
    team = actor_of(request).team
    endpoint = selectors.endpoint_get(team=team, endpoint_id=endpoint_id)
    return s.EndpointOutputSerializer(selectors.endpoint_list(team=team).get(pk=endpoint.pk)).data


class EndpointRotateSecretApi(APIView):
    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {"POST": {409: "`endpoint_has_no_secret`: not a webhook endpoint."}}

    @extend_schema(request=None, responses=s.SecretOutputSerializer)
    def post(self, request: Request, endpoint_id: int) -> Response:
        """Rotate a webhook endpoint's signing secret.

        Needs the `manage` scope. The new secret is in this response only
        (`endpoint_secret`, the name every response that shows a secret gives it); the previous
        one keeps signing alongside it until `previous_secret_expires_at`, so receivers can
        switch without dropping deliveries. A 409 `endpoint_has_no_secret` means the
        endpoint is not a webhook (an email or Slack contact is not sent signed requests).
        """
        endpoint = selectors.endpoint_get(team=actor_of(request).team, endpoint_id=endpoint_id)
        secret = endpoint_actions.endpoint_rotate_secret(endpoint=endpoint, now=timezone.now())
        endpoint.refresh_from_db()
        return Response(
            {
                "endpoint_secret": secret,
                "previous_secret_expires_at": endpoint.previous_secret_expires_at,
            }
        )


class EndpointEnableApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(request=None, responses=s.EndpointOutputSerializer)
    def post(self, request: Request, endpoint_id: int) -> Response:
        """Re-enable a disabled endpoint.

        Needs the `manage` scope. Idempotent: an active endpoint is left as it is. A
        disabled one starts afresh (no failing streak) and the deliveries that waited for
        it are sent; its dead letters are not: recover or replay them. Your team's
        contacts are told (`endpoint.enabled`).
        """
        team = actor_of(request).team
        endpoint = selectors.endpoint_get(team=team, endpoint_id=endpoint_id)
        endpoints.endpoint_enable(endpoint=endpoint, now=timezone.now())
        annotated = selectors.endpoint_list(team=team).get(pk=endpoint.pk)
        return Response(s.EndpointOutputSerializer(annotated).data)


class EndpointReplayApi(APIView):
    required_scope = ApiKey.Scope.MANAGE

    @extend_schema(request=None, responses=s.ReplayOutputSerializer)
    def post(self, request: Request, endpoint_id: int) -> Response:
        """Replay an endpoint's dead letters.

        Needs the `manage` scope. Every rejected or dead delivery to the endpoint is sent
        again with its original `webhook-id` and a fresh attempt budget; `replayed` says
        how many (0 when there were none, so calling it twice is harmless).
        """
        endpoint = selectors.endpoint_get(team=actor_of(request).team, endpoint_id=endpoint_id)
        count = endpoint_actions.endpoint_replay_dead_letters(endpoint=endpoint, now=timezone.now())
        return Response({"replayed": count})


class DeliveryListApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(
        parameters=[s.DeliveryListFilterSerializer],
        responses=s.DeliveryOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """List your team's deliveries.

        Needs the `read` scope. Notifications sent (or to be sent) to the caller's team's
        endpoints, newest first, one cursor page at a time; filter by `state`
        (`dead_letter`: rejected or dead) or `endpoint_id`.
        """
        filters = s.DeliveryListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        queryset = selectors.delivery_list(
            team=actor_of(request).team,
            state=filters.validated_data.get("state"),
            endpoint_id=filters.validated_data.get("endpoint_id"),
        )
        return paginate(self, request, queryset, s.DeliveryOutputSerializer, ("-id",))


class DeliveryDetailApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(responses=s.DeliveryDetailOutputSerializer)
    def get(self, request: Request, delivery_id: int) -> Response:
        """Read a delivery with its attempts.

        Needs the `read` scope. The delivery, its payload's event type and `webhook-id`,
        and every attempt made (status, latency, error); another team's delivery is a 404.
        """
        found = selectors.delivery_get(team=actor_of(request).team, delivery_id=delivery_id)
        return Response(s.DeliveryDetailOutputSerializer(found).data)


class DeliveryReplayApi(APIView):
    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {"POST": {409: "`not_a_dead_letter`."}}

    @extend_schema(request=None, responses=s.DeliveryOutputSerializer)
    def post(self, request: Request, delivery_id: int) -> Response:
        """Replay one dead-letter delivery.

        Needs the `manage` scope. A rejected or dead delivery is sent again with its
        original `webhook-id` and a fresh attempt budget; any other delivery is a 409
        `not_a_dead_letter` (it is still being sent, or was delivered).
        """
        found = selectors.delivery_get(team=actor_of(request).team, delivery_id=delivery_id)
        replayed = endpoint_actions.delivery_replay(delivery=found, now=timezone.now())
        return Response(s.DeliveryOutputSerializer(replayed).data)


class EndpointRecoverApi(APIView):
    required_scope = ApiKey.Scope.MANAGE
    problem_statuses = {
        "POST": {
            409: "`endpoint_disabled`: enable the endpoint first.",
            422: "`recover_since_out_of_range` (with `earliest_since`).",
        }
    }

    @extend_schema(
        request=e.EndpointRecoverInputSerializer,
        responses=e.EndpointRecoverOutputSerializer,
        description="Send again every delivery to the endpoint that failed (dead or "
        "rejected), of notifications made since `since`, each with its original "
        "`webhook-id`, oldest first, with a fresh attempt budget (as Svix's recover). "
        "Idempotent while they are pending: a second call queues none of them again. "
        "One call queues at most TIDEMARK_RECOVER_MAX deliveries (10,000 by default); "
        "`remaining` counts the failed ones left, which the same call again (same "
        "`since`) queues next: repeat it until `remaining` is 0. Your team's contacts are "
        "told of each recovery that queued any (`endpoint.recovered`). "
        "Deliveries that waited while the endpoint was disabled need no recovery: "
        "enabling it sends them.",
    )
    def post(self, request: Request, endpoint_id: int) -> Response:
        """Recover an endpoint's failed deliveries since a time."""
        body = e.EndpointRecoverInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        endpoint = selectors.endpoint_get(team=actor_of(request).team, endpoint_id=endpoint_id)
        now = timezone.now()
        since = body.validated_data["since"]
        recovered = recovery.endpoint_recover(endpoint=endpoint, since=since, now=now)
        earliest = recovery.recover_window(now=now).earliest
        return Response(
            e.EndpointRecoverOutputSerializer(
                {
                    "queued": recovered.queued,
                    "remaining": recovered.remaining,
                    "since": since,
                    "earliest_since": earliest,
                }
            ).data
        )


class EndpointAttemptListApi(APIView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(
        parameters=[e.AttemptListFilterSerializer],
        responses=e.AttemptLogOutputSerializer(many=True),
        description="The endpoint's delivery log: every attempt made to it, newest first, "
        "with the delivery, its webhook-id and event type, the HTTP status (or why no "
        "answer came), the latency and the first KiB of the answer.",
    )
    def get(self, request: Request, endpoint_id: int) -> Response:
        """List the attempts made to one of your team's endpoints."""
        filters = e.AttemptListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        endpoint = selectors.endpoint_get(team=actor_of(request).team, endpoint_id=endpoint_id)
        queryset = selectors.delivery_attempt_list(
            endpoint=endpoint,
            outcome=filters.validated_data.get("outcome"),
            status_code=filters.validated_data.get("status_code"),
            since=filters.validated_data.get("since"),
        )
        return paginate(self, request, queryset, e.AttemptLogOutputSerializer, ("-id",))
