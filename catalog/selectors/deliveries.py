"""Reads of an endpoint's delivery log: each attempt made to it, newest first."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from ..models import DeliveryAttempt, Endpoint

# ``outcome`` filters of the delivery log: an attempt's decision, or ``failed`` for any
# but ``succeeded``.
ATTEMPT_OUTCOMES = ("succeeded", "failed", "retry", "rejected", "gone")


def delivery_attempt_list(
    *,
    endpoint: Endpoint,
    outcome: str | None = None,
    status_code: int | None = None,
    since: datetime | None = None,
) -> QuerySet[DeliveryAttempt]:
    """The attempts made to ``endpoint`` (the caller has checked it is the team's), newest
    first (by id: the order they were recorded), with each one's delivery and
    notification joined (the ``webhook-id`` and event type).

    One range of the ``attempt_log_by_endpoint`` index at any history length.

    Args:
        outcome: one of ``ATTEMPT_OUTCOMES``: ``succeeded``, ``retry``, ``rejected`` or
            ``gone`` (the attempt's decision), or ``failed`` (any of the last three).
        status_code: only attempts answered with this HTTP status.
        since: aware datetime; only attempts started at or after it.
    """
    queryset = DeliveryAttempt.objects.filter(endpoint=endpoint).select_related(
        "delivery__notification"
    )
    if outcome == "failed":
        queryset = queryset.exclude(decision="succeeded")
    elif outcome:
        queryset = queryset.filter(decision=outcome)
    if status_code is not None:
        queryset = queryset.filter(status_code=status_code)
    if since is not None:
        queryset = queryset.filter(started_at__gte=since)
    return queryset.order_by("-id")
