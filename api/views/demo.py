"""The embedded demo's consumer: a webhook receiver that verifies like a real one would.

Mounted only in the embedded mode. It looks up the signing secret of the endpoint it was
called at and verifies the Standard Webhooks signature with the ``standardwebhooks``
library, exactly as the consumer guide (docs/guides/consumer.md) tells consumers to.
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from catalog import endpoint_actions
from catalog.models import Endpoint

logger = logging.getLogger("tidemark.demo")


@csrf_exempt
@require_POST
def webhook_receiver(request: HttpRequest, team_slug: str) -> HttpResponse:
    """Verify and log one delivery; 401 when the signature does not verify."""
    endpoint = Endpoint.objects.filter(
        team__slug=team_slug, url=request.build_absolute_uri(), kind=Endpoint.Kind.WEBHOOK
    ).first()
    if endpoint is None:
        return HttpResponse(status=404)
    headers = {k.lower(): v for k, v in request.headers.items()}
    for secret in endpoint_actions.endpoint_secrets_in_use(endpoint, timezone.now()):
        try:
            event = Webhook(secret).verify(request.body, headers)
        except WebhookVerificationError:
            continue
        logger.info(
            "demo receiver %s: verified %s%s (webhook-id %s)",
            team_slug,
            event.get("type"),
            _subject(event.get("data")),
            headers["webhook-id"],
        )
        return HttpResponse(status=204)
    logger.warning("demo receiver %s: signature did not verify", team_slug)
    return HttpResponse(status=401)


def _subject(data: object) -> str:
    """What an event is about, for the log line: its dataset and partition where it has
    them (change notices, endpoint and watchdog events have other shapes)."""
    if not isinstance(data, dict):
        return ""
    dataset = data.get("dataset")
    name = dataset.get("name") if isinstance(dataset, dict) else None
    partition = data.get("partition")
    if name is None:
        return ""
    return f" for {name}" + (f" partition {partition}" if partition is not None else "")
