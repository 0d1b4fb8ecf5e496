"""Owner notices: telling a team's humans (its contact email and/or Slack webhook).

They ride the same outbox as consumer webhooks (a Notification and one Delivery per
contact endpoint), so a mail server or Slack outage delays a notice and never loses it.
"""

from __future__ import annotations

import fnmatch
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from outbound import slack

from . import doorbell
from .models import (
    Dataset,
    Delivery,
    Endpoint,
    Notification,
    Subscription,
    SubscriptionEndpoint,
    Team,
)


def contact_endpoints(team: Team) -> list[Endpoint]:
    """The team's human contact channels as endpoints, created on first use."""
    wanted = []
    if team.contact_email:
        wanted.append((Endpoint.Kind.EMAIL, f"mailto:{team.contact_email}"))
    if team.contact_slack_webhook:
        wanted.append((Endpoint.Kind.SLACK, team.contact_slack_webhook))
    return [
        Endpoint.objects.get_or_create(team=team, kind=kind, url=url)[0] for kind, url in wanted
    ]


def notify_owner(
    *, team: Team, type: str, data: dict[str, Any], dedup_key: str, now: datetime
) -> Notification | None:
    """Write an owner notice for ``team`` and a delivery per contact channel.

    Must run inside the caller's transaction, so the notice commits with the change it
    reports. Idempotent per ``dedup_key``: a second call with the same key adds nothing.

    Returns:
        The notification, or None when it already existed.
    """
    if Notification.objects.filter(dedup_key=dedup_key).exists():
        return None
    notification = notification_write(
        type=type, dedup_key=dedup_key, data={"team": team.slug, **data}, now=now
    )
    queue(notification, {e.pk for e in contact_endpoints(team)}, now=now)
    return notification


def iso(value: datetime | None) -> str | None:
    """An aware datetime as ISO 8601 UTC with a ``Z``, as every payload carries times."""
    return value.isoformat().replace("+00:00", "Z") if value else None


def notification_payload(
    notification_id: uuid.UUID, *, type: str, data: dict[str, Any], now: datetime
) -> dict[str, Any]:
    """The exact document every endpoint receives: stable ``id``, ``type``, ``timestamp``
    (UTC) and ``data``."""
    return {"id": str(notification_id), "type": type, "timestamp": iso(now), "data": data}


def notification_write(
    *,
    type: str,
    dedup_key: str,
    data: dict[str, Any],
    now: datetime,
    dataset: Dataset | None = None,
) -> Notification:
    """Save a notification with its payload (``notification_payload``)."""
    notification = Notification(type=type, dataset=dataset, dedup_key=dedup_key)
    notification.payload = notification_payload(notification.id, type=type, data=data, now=now)
    notification.save()
    return notification


def queue(
    notification: Notification,
    endpoint_ids: set[int],
    *,
    now: datetime,
    not_before: datetime | None = None,
) -> int:
    """One delivery per endpoint, and the doorbell after commit; due at ``now``, or at
    ``not_before`` (aware UTC) when that is later."""
    due_at = max(now, not_before) if not_before else now
    if endpoint_ids:
        Delivery.objects.bulk_create(
            [
                Delivery(notification=notification, endpoint_id=endpoint_id, next_attempt_at=due_at)
                for endpoint_id in sorted(endpoint_ids)
            ]
        )
        doorbell.ring_deliveries()
    return len(endpoint_ids)


@dataclass(frozen=True)
class Link:
    """A link in a notice's text: its address in plain text, a real link in Slack."""

    url: str


# A notice's text: plain text (user-supplied words included, never markup) and links.
Segment = str | Link


def render(payload: dict[str, Any]) -> tuple[str, list[Segment]]:
    """A notification for people: (subject, text segments); ``render_text`` and
    ``render_slack`` give it the form of each receiving system."""
    data = payload.get("data", {})
    kind = payload.get("type", "")
    if kind == Notification.Type.ENDPOINT_DISABLED:
        subject = f"Tidemark disabled your endpoint {data.get('url')}"
        endpoint = f"/api/v1/endpoints/{data.get('endpoint_id')}"
        text = (
            f"Tidemark stopped delivering to {data.get('url')} (endpoint {data.get('endpoint_id')} "
            f"of team {data.get('team')}): {data.get('reason')}. New deliveries for it wait and "
            f"are sent once you re-enable it (POST {endpoint}/enable); the failed ones are dead "
            f"letters you can replay (POST {endpoint}/replay)."
        )
        return subject, [text]
    if kind in (Notification.Type.ENDPOINT_ENABLED, Notification.Type.ENDPOINT_RECOVERED):
        return _endpoint_lifecycle_text(kind, data)
    dataset = data.get("dataset") or {}
    if kind.startswith("change_notice."):
        return _change_notice_text(kind, data)
    if kind == Notification.Type.SCHEMA_UNANNOUNCED_CHANGE:
        return _schema_change_text(data)
    if kind == Notification.Type.DATASET_UNUSUALLY_LATE:
        return _unusually_late_text(data)
    if kind == Notification.Type.DATASET_AT_RISK:
        return _at_risk_text(data)
    if kind == Notification.Type.DATASET_LATE and data.get("caused_by"):
        return _late_caused_upstream_text(data)
    if kind == Notification.Type.DATASET_VERSION_PROMOTED:
        name = f"{dataset.get('namespace', '')}/{dataset.get('name', '')}"
        subject = f"Tidemark: version {data.get('version')} of {name} promoted"
        text = (
            f"{name} partitions {data.get('first_partition')} to {data.get('last_partition')} "
            f"now serve version {data.get('version')} (code {data.get('code_version') or '-'})."
        )
        return subject, [text]
    subject = f"Tidemark: {kind} {dataset.get('namespace', '')}/{dataset.get('name', '')}"
    return subject, [f"{subject} partition {data.get('partition')}"]


def render_text(payload: dict[str, Any]) -> tuple[str, str]:
    """A notification as (subject, text) in plain text, links as their addresses (email;
    ``outbound.mail`` folds the subject to one line before it becomes a header)."""
    subject, segments = render(payload)
    return subject, "".join(s.url if isinstance(s, Link) else s for s in segments)


def render_slack(payload: dict[str, Any]) -> str:
    """A notification as Slack markup: every piece of text escaped (``outbound.slack``),
    so no user-supplied name or description can mention a channel or carry a link; links
    shown as their own addresses."""
    _, segments = render(payload)
    return "".join(
        slack.link(s.url) if isinstance(s, Link) else slack.escape_text(s) for s in segments
    )


def _endpoint_lifecycle_text(kind: str, data: dict[str, Any]) -> tuple[str, list[Segment]]:
    """An endpoint enabled again, or recovered, for the owning team's people."""
    endpoint = f"/api/v1/endpoints/{data.get('endpoint_id')}"
    if kind == Notification.Type.ENDPOINT_ENABLED:
        subject = f"Tidemark enabled your endpoint {data.get('url')} again"
        text = (
            f"{data.get('url')} (endpoint {data.get('endpoint_id')} of team {data.get('team')}) "
            f"is enabled again; it had been disabled at {data.get('disabled_at')}: "
            f"{data.get('disabled_reason')}. The {data.get('waiting')} deliveries that waited "
            f"are being sent. Its {data.get('dead_letters')} failed deliveries are not: "
            f"recover them (POST {endpoint}/recover)."
        )
        return subject, [text]
    subject = f"Tidemark is sending {data.get('queued')} failed deliveries to {data.get('url')}"
    more = (
        f" {data.get('remaining')} more failed since then: recover again with the same since "
        "to send them."
        if data.get("remaining")
        else ""
    )
    text = (
        f"A recovery of {data.get('url')} (endpoint {data.get('endpoint_id')} of team "
        f"{data.get('team')}) queued {data.get('queued')} deliveries that failed since "
        f"{data.get('since')} again, each with its original webhook-id.{more}"
    )
    return subject, [text]


def _minutes(seconds: Any) -> str:
    minutes = int(seconds or 0) // 60
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _unusually_late_text(data: dict[str, Any]) -> tuple[str, list[Segment]]:
    """A partition later than usual, for the owner team's people: what is usual, and that
    nobody was paged."""
    dataset = data.get("dataset") or {}
    name = f"{dataset.get('namespace', '')}/{dataset.get('name', '')}"
    usual = data.get("usual") or {}
    group = str(usual.get("group", "")).replace("_", " ")
    subject = f"Tidemark: {name} partition {data.get('partition')} is later than usual"
    text = (
        f"Partition {data.get('partition')} of {name} was not ready by "
        f"{data.get('expected_by')}. Over the last {usual.get('periods')} periods ({group}) "
        f"it was usually ready {_minutes(usual.get('p50_seconds'))} after its period ended "
        f"(90% within {_minutes(usual.get('p90_seconds'))}, 99% within "
        f"{_minutes(usual.get('p99_seconds'))}).\n"
        "This dataset has no freshness SLA, so nobody was paged; consumers that asked for "
        "dataset.unusually_late were told. Set an SLA to have lateness judged against a "
        "deadline you choose."
    )
    return subject, [text]


def _late_caused_upstream_text(data: dict[str, Any]) -> tuple[str, list[Segment]]:
    """A late partition whose cause is upstream, for people: what holds it up, and that
    the page is the upstream owner's (the watchdog holds this dataset's page under the
    upstream's incident while that one pages someone, and sends it only if the partition
    is still missing after)."""
    dataset = data.get("dataset") or {}
    name = f"{dataset.get('namespace', '')}/{dataset.get('name', '')}"
    cause = data.get("caused_by") or {}
    upstream = f"{cause.get('namespace', '')}/{cause.get('name', '')}"
    subject = f"Tidemark: {name} partition {data.get('partition')} is late, caused upstream"
    text = (
        f"Partition {data.get('partition')} of {name} missed its deadline "
        f"({data.get('deadline_at')}). It is caused upstream: {upstream} partition "
        f"{cause.get('partition')} is {cause.get('state')} since {cause.get('since')}. "
        "One late root, one page: while the upstream's on-call is paged for it, this "
        "dataset's page is held under the upstream's incident, and goes out only if this "
        "partition is still missing once the upstream has recovered."
    )
    return subject, [text]


def _at_risk_text(data: dict[str, Any]) -> tuple[str, list[Segment]]:
    """A partition forecast to miss its deadline, for the owner team's people: when it
    is expected and which upstream partition holds it up."""
    dataset = data.get("dataset") or {}
    name = f"{dataset.get('namespace', '')}/{dataset.get('name', '')}"
    subject = f"Tidemark: {name} partition {data.get('partition')} is at risk"
    if data.get("blocked"):
        expected = "cannot arrive yet: a partition it needs upstream failed"
    else:
        expected = f"is expected at {data.get('estimate_at')}"
    cause = data.get("cause") or {}
    upstream = cause.get("dataset") or {}
    why = (
        f" Held up by {upstream.get('namespace', '')}/{upstream.get('name', '')} partition "
        f"{cause.get('partition')}."
        if cause
        else " Judged from its own arrival history."
    )
    text = (
        f"Partition {data.get('partition')} of {name} {expected}, after its deadline "
        f"{data.get('deadline_at')}.{why}\nNobody was paged; dataset.late follows if the "
        "deadline is missed."
    )
    return subject, [text]


def _schema_change_text(data: dict[str, Any]) -> tuple[str, list[Segment]]:
    """An unannounced breaking schema change, for the owner team's people."""
    dataset = data.get("dataset") or {}
    name = f"{dataset.get('namespace', '')}/{dataset.get('name', '')}"
    subject = f"Tidemark: unannounced breaking schema change of {name}"
    job = data.get("job") or {}
    seen_by = (
        f"job {job.get('namespace')}/{job.get('name')}"
        if job
        else f"readiness event {data.get('readiness_event_id')}"
    )
    lines = [f"{seen_by} showed {name} with a changed schema at {data.get('observed_at')}:"]
    if data.get("removed"):
        lines.append("removed: " + ", ".join(data["removed"]))
    for column in data.get("retyped") or []:
        lines.append(f"retyped: {column['name']} {column['from']} -> {column['to']}")
    lines.append(
        "No breaking schema change notice covers that date, so its consumers were not told. "
        f"Announce one (POST /api/v1/datasets/{dataset.get('id')}/change-notices) or restore "
        f"the columns; governance lists it at {data.get('report_path')}."
    )
    return subject, ["\n".join(lines)]


def _change_notice_text(kind: str, data: dict[str, Any]) -> tuple[str, list[Segment]]:
    """A change notice for people; an emergency one says so first, with its reason."""
    dataset = data.get("dataset") or {}
    name = f"{dataset.get('namespace', '')}/{dataset.get('name', '')}"
    what = str(data.get("kind", "change")).replace("_", " ")
    urgent = "EMERGENCY " if data.get("emergency") else ""
    if kind == Notification.Type.CHANGE_NOTICE_EFFECTIVE:
        subject = f"Tidemark: {urgent}{what} of {name} is now in effect"
    elif kind == Notification.Type.CHANGE_NOTICE_REMINDER:
        subject = f"Tidemark: reminder: {urgent}{what} of {name} on {data.get('effective_at')}"
    else:
        subject = f"Tidemark: {urgent}{what} of {name} on {data.get('effective_at')}"
    text: list[Segment] = [
        f"Team {data.get('owner')} announced a {what} of {name}, effective "
        f"{data.get('effective_at')} (announced {data.get('announced_at')}).\n"
        + str(data.get("description", ""))
    ]
    if data.get("emergency"):
        text.append(f"\nAnnounced with less than the notice period: {data.get('override_reason')}")
    if data.get("link"):
        text += ["\nDetails: ", Link(str(data["link"]))]
    if kind != Notification.Type.CHANGE_NOTICE_EFFECTIVE:
        text.append(f"\nAcknowledge it: POST {data.get('acknowledge_path')}")
    return subject, text


def fan_out(
    *,
    notification: Notification,
    dataset: Dataset,
    partition_key: str | None,
    now: datetime,
    extra_endpoints: Iterable[Endpoint] = (),
    superseded: bool = False,
    excluded: Iterable[int] = (),
) -> int:
    """One delivery of ``notification`` per subscriber endpoint whose filters match (event
    types, partition pattern, newest only; ``partition_key`` None: a notice about the
    whole dataset), plus ``extra_endpoints`` (e.g. the owner's contacts).

    Args:
        superseded: a newer partition of the dataset than ``partition_key`` is already
            ready (``matching_endpoints``).
        excluded: subscriber endpoint ids not to deliver to (told the same news before,
            e.g. ``dataset.late`` at a need-by: ``catalog.need_by_judging``).

    Must run inside the transaction that wrote the notification. Returns the count.
    """
    endpoint_ids = subscriber_endpoints(
        dataset_id=dataset.pk,
        type=notification.type,
        partition_key=partition_key,
        superseded=superseded,
    )
    endpoint_ids.difference_update(excluded)
    endpoint_ids.update(e.pk for e in extra_endpoints)
    return queue(notification, endpoint_ids, now=now)


# One endpoint of a subscription: (endpoint id, event types, partition pattern, newest
# only). A subscription with several endpoints is one row per endpoint, each with the
# subscription's filters.
Subscriber = tuple[int, list[str], str, bool]


# ``DATASET_ID`` stands for the dataset's id: a column expression or a placeholder.
_SUBSCRIBER_ROWS_SQL = (
    "SELECT id AS subscription_id, endpoint_id, event_types, partition_pattern, newest_only "
    "FROM catalog_subscription WHERE dataset_id = DATASET_ID AND endpoint_id IS NOT NULL "
    "UNION ALL SELECT s.id, m.endpoint_id, s.event_types, s.partition_pattern, s.newest_only "
    "FROM catalog_subscriptionendpoint m JOIN catalog_subscription s "
    "ON s.id = m.subscription_id WHERE s.dataset_id = DATASET_ID"
)


def subscriber_rows_sql(dataset_id: str) -> str:
    """A SELECT of every (subscription id, endpoint id, event types, partition pattern,
    newest only) of the dataset whose id is the SQL expression ``dataset_id`` (a column
    or a placeholder, never input): each subscription's first endpoint
    (``Subscription.endpoint``) and its others (``SubscriptionEndpoint``). PostgreSQL and
    SQLite alike."""
    return _SUBSCRIBER_ROWS_SQL.replace("DATASET_ID", dataset_id)


# Raw SQL: this runs on every publish, and compiling the ORM query cost more than running it.
_SUBSCRIBERS_SQL = (
    "SELECT endpoint_id, event_types, partition_pattern, newest_only "  # noqa: S608
    f"FROM ({subscriber_rows_sql('%s')}) AS subscriber"
)

# What a subscription asking for the newest partitions only is not told about a partition
# older than the newest ready one: a backfill, or a restatement of an old period.
NOT_FOR_NEWEST_ONLY = frozenset(
    {Notification.Type.PARTITION_READY, Notification.Type.PARTITION_RESTATED}
)


# Types a subscription receives only when it lists them in its event types: an empty
# list means every other type. ``dataset.unusually_late`` is a guess from history, not a
# broken promise, so no consumer gets it without asking.
OPT_IN_TYPES = frozenset({Notification.Type.DATASET_UNUSUALLY_LATE})


def wants(event_types: Iterable[str], type: str) -> bool:
    """Whether a subscription with ``event_types`` (empty: every type but the
    ``OPT_IN_TYPES``) receives ``type`` notifications."""
    types = set(event_types)
    return type in types or (not types and type not in OPT_IN_TYPES)


def dataset_subscribers(*, dataset_id: int) -> list[Subscriber]:
    """The endpoints of the dataset's subscriptions, as ``Subscriber`` rows (one per
    endpoint of each subscription)."""
    with connection.cursor() as cursor:
        cursor.execute(_SUBSCRIBERS_SQL, [dataset_id, dataset_id])
        rows = cursor.fetchall()
    # jsonb and SQLite's JSON both read as text here.
    return [
        (endpoint_id, json.loads(types), pattern, bool(newest_only))
        for endpoint_id, types, pattern, newest_only in rows
    ]


def subscription_subscribers(subscriptions: QuerySet[Subscription]) -> list[Subscriber]:
    """Every endpoint of ``subscriptions`` (their first and their others), as
    ``Subscriber`` rows; two queries."""
    first = subscriptions.filter(endpoint__isnull=False).values_list(
        "endpoint_id", "event_types", "partition_pattern", "newest_only"
    )
    others = SubscriptionEndpoint.objects.filter(subscription__in=subscriptions).values_list(
        "endpoint_id",
        "subscription__event_types",
        "subscription__partition_pattern",
        "subscription__newest_only",
    )
    return [*first, *others]


def subscription_endpoint_ids(subscription: Subscription) -> set[int]:
    """The ids of every endpoint ``subscription`` delivers to (empty: it has none, e.g.
    declared by a lineage job event)."""
    ids = set(
        SubscriptionEndpoint.objects.filter(subscription=subscription).values_list(
            "endpoint_id", flat=True
        )
    )
    if subscription.endpoint_id is not None:
        ids.add(subscription.endpoint_id)
    return ids


def subscriber_endpoints(
    *, dataset_id: int, type: str, partition_key: str | None, superseded: bool = False
) -> set[int]:
    """The endpoints of the dataset's subscribers whose filters let a ``type`` notification
    about ``partition_key`` (None: the whole dataset) through (``matching_endpoints``)."""
    return matching_endpoints(
        dataset_subscribers(dataset_id=dataset_id),
        type=type,
        partition_key=partition_key,
        superseded=superseded,
    )


def matching_endpoints(
    subscribers: Iterable[Subscriber],
    *,
    type: str,
    partition_key: str | None,
    superseded: bool = False,
) -> set[int]:
    """The endpoints of ``subscribers`` whose event types (``wants``), partition
    pattern (fnmatch; empty: all) and newest-only flag let a ``type`` notification about
    ``partition_key`` through. A notification about the whole dataset (``partition_key``
    None, e.g. a change notice) passes every partition pattern.

    Args:
        superseded: a newer partition of the dataset was already ready when this one's
            revision arrived; a newest-only subscriber is then not told its
            ``NOT_FOR_NEWEST_ONLY`` types (a backfill, a restatement of an old period).
            An endpoint still gets it through another subscription that lets it pass.
    """
    # Disabled endpoints get their deliveries too: they wait, unclaimed, until the
    # endpoint is re-enabled, so nothing published meanwhile is lost.
    hidden = superseded and type in NOT_FOR_NEWEST_ONLY
    return {
        endpoint_id
        for endpoint_id, event_types, pattern, newest_only in subscribers
        if wants(event_types, type)
        and (not pattern or partition_key is None or fnmatch.fnmatchcase(partition_key, pattern))
        and not (hidden and newest_only)
    }
