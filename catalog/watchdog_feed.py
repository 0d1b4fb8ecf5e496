"""Feeding the independent watchdog: for every critical dataset with an SLA, a data monitor
pinged for every partition that becomes ready (published, found by the poll, or restated)
and a pipeline monitor the producer's last task pings itself.

Both travel as notifications through the durable delivery engine to the owner team's
``watchdog`` endpoint (the watchdog's REST API, with the one token the catalog holds), so
nothing is lost while the watchdog is unreachable; the catalog never writes the
watchdog's tables. When the catalog or its workers stop, the pings stop and the data
monitor's deadline passes: on-call is paged, which is the point.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from urllib.parse import quote

from django.conf import settings

import outbound

from . import notices
from .models import Dataset, Endpoint, Notification


def configured() -> bool:
    """Whether a watchdog URL and token are set."""
    return bool(settings.TIDEMARK_WATCHDOG_URL and settings.TIDEMARK_WATCHDOG_TOKEN)


def external_id(dataset: Dataset) -> str:
    """The watchdog's name for the dataset's data monitor."""
    return f"tidemark:dataset:{dataset.pk}:data"


def watches(dataset: Dataset) -> bool:
    """Whether the watchdog watches ``dataset`` (a ready partition then pings it)."""
    return (
        configured()
        and dataset.lifecycle != Dataset.Lifecycle.RETIRED
        and dataset.criticality == Dataset.Criticality.CRITICAL
        and bool(dataset.sla_cron)
        and dataset.partitioning != Dataset.Partitioning.NONE
    )


def _endpoint(dataset: Dataset) -> Endpoint:
    return Endpoint.objects.get_or_create(
        team_id=dataset.owner_id,
        kind=Endpoint.Kind.WATCHDOG,
        url=settings.TIDEMARK_WATCHDOG_URL.rstrip("/"),
    )[0]


def sync_monitor(dataset: Dataset, *, now: datetime) -> Notification | None:
    """Queue the definitions of the data and pipeline monitors (create or update) for a
    critical dataset, and their pause when a watched dataset stops being one (criticality,
    SLA, retirement).

    Must run in the transaction that changed the dataset. The definition carries the
    dataset's ``updated_at`` as its version, so a late retry of an older one never wins.
    Returns the last notification written, or None when the dataset is not watched.
    """
    watched = watches(dataset)
    if not watched and not (
        configured()
        and Notification.objects.filter(
            dataset=dataset, type=Notification.Type.WATCHDOG_MONITOR
        ).exists()
    ):
        return None
    team = dataset.owner
    if watched and dataset.pipeline_ping_key is None:
        dataset.pipeline_ping_key = uuid.uuid4()
        Dataset.objects.filter(pk=dataset.pk).update(pipeline_ping_key=dataset.pipeline_ping_key)
    version = notices.iso(dataset.updated_at or now)
    channels = (
        [{"kind": "pagerduty", "target": team.paging_routing_key, "name": f"{team.slug} on-call"}]
        if team.paging_routing_key
        else []
    )
    common = {
        "owner": team.slug,
        "kind": "deadline",
        "cron": dataset.sla_cron,
        "timezone": dataset.sla_timezone,
        "grace_seconds": dataset.sla_grace_seconds,
        "channels": channels,
        # No longer critical, no SLA, or retired: the monitors are paused, not lost.
        "active": watched,
    }
    definitions = {
        external_id(dataset): {
            **common,
            "name": f"{dataset.namespace}/{dataset.name} data",
            "partitioning": dataset.partitioning,
            "partition_timezone": dataset.partition_timezone,
        },
        # The producer's last task pings this one itself: the job ran, even if the
        # catalog never heard of its data.
        pipeline_external_id(dataset): {
            **common,
            "name": f"{dataset.namespace}/{dataset.name} pipeline",
            "ping_key": str(dataset.pipeline_ping_key) if dataset.pipeline_ping_key else None,
        },
    }
    endpoint_id = _endpoint(dataset).pk
    notification = None
    for monitor_id, definition in definitions.items():
        notification = notices.notification_write(
            type=Notification.Type.WATCHDOG_MONITOR,
            dataset=dataset,
            dedup_key=f"watchdog-monitor:{monitor_id}:{version}",
            data={"external_id": monitor_id, "version": version, "monitor": definition},
            now=now,
        )
        notices.queue(notification, {endpoint_id}, now=now)
    return notification


def pipeline_external_id(dataset: Dataset) -> str:
    """The watchdog's name for the dataset's pipeline monitor."""
    return f"tidemark:dataset:{dataset.pk}:pipeline"


def pipeline_ping_url(dataset: Dataset) -> str | None:
    """Where the producer's last task pings (``/start``, ``/fail`` work too), or None."""
    if not dataset.pipeline_ping_key or not settings.WATCHDOG_PUBLIC_URL:
        return None
    return f"{settings.WATCHDOG_PUBLIC_URL.rstrip('/')}/ping/{dataset.pipeline_ping_key}"


def ping_partition(dataset: Dataset, *, partition_key: str, revision_id: int, now: datetime):
    """Queue a ping for a partition of a watched dataset that became ready."""
    if not watches(dataset):
        return None
    notification = notices.notification_write(
        type=Notification.Type.WATCHDOG_PING,
        dataset=dataset,
        dedup_key=f"watchdog-ping:{dataset.pk}:{partition_key}:{revision_id}",
        data={"external_id": external_id(dataset), "partition": partition_key},
        now=now,
    )
    notices.queue(notification, {_endpoint(dataset).pk}, now=now)
    return notification


def send(body: str, *, base_url: str, sender: outbound.Sender) -> outbound.AttemptResult:
    """Send one watchdog notification to the watchdog's REST API.

    ``watchdog.monitor`` upserts ``/api/v1/monitors/external/<id>``; ``watchdog.ping`` posts
    ``/api/v1/monitors/external/<id>/ping?partition=``, which answers 425 (retried) until
    the monitor exists.
    """
    payload = json.loads(body)
    data = payload["data"]
    base = f"{base_url.rstrip('/')}/api/v1/monitors/external/{quote(data['external_id'], safe='')}"
    headers = {
        "Authorization": f"Bearer {settings.TIDEMARK_WATCHDOG_TOKEN}",
        "Content-Type": "application/json",
    }
    if payload["type"] == Notification.Type.WATCHDOG_PING:
        url = f"{base}/ping?partition={quote(data['partition'], safe='')}"
        return sender.post(url, b"", headers)
    definition = {**data["monitor"], "version": data["version"]}
    return sender.post(base, json.dumps(definition).encode(), headers)
