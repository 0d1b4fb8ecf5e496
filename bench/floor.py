"""The framework floor: the least a Django view can do per ingest request; and, for
comparison, the publish served through DRF's whole request cycle.

Same gunicorn, same middleware stack, same database settings as the readiness API; the
view parses the JSON body and does one plain INSERT (autocommit, so one durable commit,
like one publish). ``bench/ingest.py`` compares the publish rate against this one.
"""

from __future__ import annotations

import json

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

TABLE = "bench_floor"
CREATE_TABLE_SQL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    "id bigserial PRIMARY KEY, body jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
)
_INSERT_SQL = f"INSERT INTO {TABLE} (body) VALUES (%s) RETURNING id, created_at"  # noqa: S608


@csrf_exempt
@require_POST
def floor(request: HttpRequest) -> JsonResponse:
    """Store the JSON body as one row; 201 with its id, 400 when the body is not JSON."""
    try:
        body = json.loads(request.body)
    except ValueError:
        return JsonResponse({"detail": "the body is not JSON"}, status=400)
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_SQL, [json.dumps(body)])
        row_id, created_at = cursor.fetchone()
    return JsonResponse({"id": row_id, "created_at": created_at.isoformat()}, status=201)


def _drf_publish_view():
    """``POST /bench/readiness-drf``: the same publish (serializer, service, problem
    renderer) through DRF's request cycle (request wrapping, negotiation, parsers,
    permission classes, Response rendering), to measure what that cycle costs."""
    from django.utils import timezone
    from rest_framework.response import Response
    from rest_framework.views import APIView

    from api.serializers import catalog as s
    from api.views.base import actor_of
    from api.views.readiness import idempotency_key
    from catalog.models import ApiKey
    from catalog.services import publishing

    class ReadinessThroughDrf(APIView):
        required_scope = ApiKey.Scope.PUBLISH

        def post(self, request):
            data = s.ReadinessPublishInputSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            result = publishing.readiness_publish(
                actor=actor_of(request),
                idempotency_key=idempotency_key(request),
                now=timezone.now(),
                **data.validated_data,
            )
            headers = {"Idempotent-Replayed": "true"} if result.replayed else {}
            return Response(result.body, status=result.status_code, headers=headers)

    return ReadinessThroughDrf.as_view()


readiness_through_drf = _drf_publish_view()
