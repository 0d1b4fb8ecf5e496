"""Feeding the independent watchdog: for every critical dataset with an SLA, a data monitor
pinged for every partition that becomes ready (published, found by the poll, or restated)
and a pipeline monitor the producer's last task pings itself. The data monitor is fed from
the start: each definition carries the partitions already ready that its deadlines may
still expect, so it never pages for data that landed before it was defined.

Both travel as notifications through the durable delivery engine to the owner team's
``watchdog`` endpoint (the watchdog's REST API, with the one token the catalog holds), so
nothing is lost while the watchdog is unreachable; the catalog never writes the
watchdog's tables. When the catalog or its workers stop, the pings stop and the data
monitor's deadline passes: on-call is paged, which is the point.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from urllib.parse import quote

from django.conf import settings
from django.db import transaction
from django.urls import reverse

import outbound
from schedules import FreshnessSla, parse_partition_key

from . import freshness_state, future_partitions, notices
from .models import Dataset, Endpoint, Notification, Partition, PartitionRevision
from .selectors.forecasts import verified_upstreams

# At most this many ready partitions travel with a data monitor's definition (the
# watchdog takes up to 1,000); any more in the horizon follow as pings of their own.
READY_PARTITIONS_IN_DEFINITION = 1000
# At most this many upstream monitors per data monitor (the watchdog takes up to 100).
DEPENDS_ON_MAX = 100
# The severity of a monitor's pages (PagerDuty Events API v2 values) by its dataset's
# criticality.
SEVERITY_OF_CRITICALITY = {
    Dataset.Criticality.CRITICAL: "critical",
    Dataset.Criticality.HIGH: "error",
    Dataset.Criticality.MEDIUM: "warning",
    Dataset.Criticality.LOW: "info",
}


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


def dataset_url(dataset: Dataset) -> str | None:
    """The dataset's page in the catalog as people reach it (``TIDEMARK_PUBLIC_URL``), or
    None when that is not set."""
    base = settings.TIDEMARK_PUBLIC_URL.rstrip("/")
    return f"{base}{reverse('web:dataset', args=[dataset.pk])}" if base else None


def _links(dataset: Dataset) -> list[dict[str, str]]:
    url = dataset_url(dataset)
    if url is None:
        return []
    return [{"href": url, "text": f"Dataset {dataset.namespace}/{dataset.name}"[:200]}]


def _endpoint(dataset: Dataset) -> Endpoint:
    return Endpoint.objects.get_or_create(
        team_id=dataset.owner_id,
        kind=Endpoint.Kind.WATCHDOG,
        url=settings.TIDEMARK_WATCHDOG_URL.rstrip("/"),
    )[0]


def horizon_start(sla: FreshnessSla, *, now: datetime) -> datetime:
    """The end of the oldest period a data monitor's deadlines may still expect at ``now``
    (aware UTC): periods ending after it are due at a deadline not yet judged.

    The first deadline not yet judged is the first whose grace has not passed by ``now``
    (a re-planned monitor's first deadline is later still); it expects the periods that
    closed since the deadline before it (``FreshnessSla.due_since``: with an SLA calendar
    that skips non-business days, since the cron firing before it), which is returned.
    """
    first_unjudged = sla.next_deadline(now - timedelta(seconds=sla.grace_seconds))
    return sla.due_since(first_unjudged)


def ready_partitions(
    dataset: Dataset, *, now: datetime, started: bool = True
) -> list[tuple[str, int]]:
    """The dataset's partitions whose current revision is ready and whose period ends
    after ``horizon_start``: what its data monitor's deadlines may still expect.

    Args:
        started: those whose period has started by ``now`` (what a definition carries:
            the watchdog refuses a partition from the future); False: the others, ready
            ahead of their period (a dataset that accepts future partitions), which are
            pinged when their period starts (``ping_partition``).

    Returns:
        ``[(key, current revision id)]``, oldest period first; empty without an SLA.
    """
    sla = freshness_state.sla_of(dataset)
    if sla is None:
        return []
    in_period = future_partitions.started(now)
    return list(
        Partition.objects.filter(
            in_period if started else ~in_period,
            dataset=dataset,
            end_at__gt=horizon_start(sla, now=now),
            current_revision__state=PartitionRevision.State.READY,
        )
        .order_by("start_at", "key")
        .values_list("key", "current_revision_id")
    )


def depends_on(dataset: Dataset) -> list[str]:
    """The watchdog names of the data monitors ``dataset``'s data monitor depends on: those
    of the datasets its jobs read (verified lineage, ``verified_upstreams``), by dataset
    id, at most ``DEPENDS_ON_MAX``. An upstream without a monitor (not critical, no SLA)
    is named too: the watchdog holds nothing under a monitor it does not have, and one
    made critical later holds at once, without a new definition here."""
    return [external_id(upstream) for upstream in verified_upstreams(dataset)][:DEPENDS_ON_MAX]


def sync_monitor(
    dataset: Dataset, *, now: datetime, version_at: datetime | None = None
) -> Notification | None:
    """Queue the definitions of the data and pipeline monitors (create or update) for a
    critical dataset, and their pause when a watched dataset stops being one (criticality,
    SLA, retirement).

    Both definitions carry the page severity for the dataset's criticality
    (``SEVERITY_OF_CRITICALITY``) and a link to the dataset's page (``dataset_url``), so
    the watchdog's pages link to it. The data monitor's definition carries the partitions
    already ready that its deadlines may still expect (``ready_partitions``, oldest
    first, at most ``READY_PARTITIONS_IN_DEFINITION``), which the watchdog records with
    the definition in one transaction: a monitor created for a dataset that already has
    its data is never judged without it. Any more ready partitions in the horizon are
    queued as pings after the definition.

    Must run in the transaction that changed the dataset. The definition carries the
    dataset's ``updated_at`` as its version (or ``version_at``, when what changed is not
    the dataset but its lineage: ``sync_dependencies``), so a late retry of an older one
    never wins.
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
        # Compare-and-set: a key another transaction made first is the one kept and sent.
        made = uuid.uuid4()
        if not Dataset.objects.filter(pk=dataset.pk, pipeline_ping_key__isnull=True).update(
            pipeline_ping_key=made
        ):
            made = Dataset.objects.values_list("pipeline_ping_key", flat=True).get(pk=dataset.pk)
        dataset.pipeline_ping_key = made
    version = notices.iso(version_at or dataset.updated_at or now)
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
        # The SLA's calendar: the watchdog judges the same business-day deadlines with the
        # same ``schedules`` arithmetic.
        "calendar": dataset.sla_calendar,
        "holidays_country": dataset.sla_holidays_country,
        "holidays_subdivision": dataset.sla_holidays_subdivision,
        "non_business_day": dataset.sla_non_business_day,
        "channels": channels,
        "severity": SEVERITY_OF_CRITICALITY.get(dataset.criticality, "critical"),
        "links": _links(dataset),
        # No longer critical, no SLA, or retired: the monitors are paused, not lost.
        "active": watched,
    }
    ready = ready_partitions(dataset, now=now) if watched else []
    carried, overflow = (
        ready[:READY_PARTITIONS_IN_DEFINITION],
        ready[READY_PARTITIONS_IN_DEFINITION:],
    )
    definitions = {
        external_id(dataset): {
            **common,
            "name": f"{dataset.namespace}/{dataset.name} data",
            "partitioning": dataset.partitioning,
            "partition_timezone": dataset.partition_timezone,
            "ready_partitions": [key for key, _ in carried],
            "depends_on": depends_on(dataset) if watched else [],
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
    ahead = ready_partitions(dataset, now=now, started=False) if watched else []
    _ping_unsent(dataset, overflow + ahead, now=now)
    return notification


def sync_dependencies(*, now: datetime) -> list[Dataset]:
    """Send again the definitions of the watched datasets whose verified upstreams changed
    since their data monitor's last definition (lineage learned a new read or writer):
    the watchdog then holds their pages under the right upstreams. Idempotent: a dataset
    whose last definition already names its upstreams is left alone.

    Queries: one for the watched datasets, then two per watched dataset (its upstreams,
    its last definition), and per dataset synced its row, locked; watched datasets are
    the critical ones with an SLA, a few hundred at most.

    Args:
        now: aware UTC; also the new definitions' version (``sync_monitor``'s
            ``version_at``).

    Returns:
        The datasets whose definitions were queued, by id.
    """
    if not configured():
        return []
    candidates = (
        Dataset.objects.filter(criticality=Dataset.Criticality.CRITICAL)
        .exclude(sla_cron="")
        .exclude(partitioning=Dataset.Partitioning.NONE)
        .exclude(lifecycle=Dataset.Lifecycle.RETIRED)
        .select_related("owner")
        .order_by("pk")
    )
    synced = []
    for dataset in candidates:
        last = (
            Notification.objects.filter(
                dataset=dataset,
                type=Notification.Type.WATCHDOG_MONITOR,
                payload__data__external_id=external_id(dataset),
            )
            .order_by("-created_at", "-pk")
            .values_list("payload", flat=True)
            .first()
        )
        sent = (last or {}).get("data", {}).get("monitor", {}).get("depends_on", [])
        if last is not None and sent == depends_on(dataset):
            continue
        with transaction.atomic():
            # Locked and read again, as every change of the dataset locks it: a change
            # committing meanwhile is not undone by this newer version made from the copy
            # read above, and the pipeline monitor's ping key it made is the one sent.
            dataset = (
                Dataset.objects.select_for_update(of=("self",))
                .select_related("owner")
                .get(pk=dataset.pk)
            )
            sync_monitor(dataset, now=now, version_at=now)
        synced.append(dataset)
    return synced


def _ping_unsent(dataset: Dataset, partitions: list[tuple[str, int]], *, now: datetime) -> None:
    """``ping_partition`` for each (key, revision id) whose ping was never queued."""
    if not partitions:
        return
    queued = set(
        Notification.objects.filter(
            dedup_key__in=[_ping_dedup_key(dataset, key, rev) for key, rev in partitions]
        ).values_list("dedup_key", flat=True)
    )
    for key, revision_id in partitions:
        if _ping_dedup_key(dataset, key, revision_id) not in queued:
            ping_partition(dataset, partition_key=key, revision_id=revision_id, now=now)


def _ping_dedup_key(dataset: Dataset, partition_key: str, revision_id: int) -> str:
    return f"watchdog-ping:{dataset.pk}:{partition_key}:{revision_id}"


def pipeline_external_id(dataset: Dataset) -> str:
    """The watchdog's name for the dataset's pipeline monitor."""
    return f"tidemark:dataset:{dataset.pk}:pipeline"


def pipeline_ping_url(dataset: Dataset) -> str | None:
    """Where the producer's last task pings (``/start``, ``/fail`` work too), or None."""
    if not dataset.pipeline_ping_key or not settings.WATCHDOG_PUBLIC_URL:
        return None
    return f"{settings.WATCHDOG_PUBLIC_URL.rstrip('/')}/ping/{dataset.pipeline_ping_key}"


def ping_partition(dataset: Dataset, *, partition_key: str, revision_id: int, now: datetime):
    """Queue a ping for a partition of a watched dataset that became ready.

    A partition whose period has not started (a dataset that ``accepts_future_partitions``)
    is pinged when it starts: the watchdog refuses a ping from the future, as the catalog
    refuses such a publish otherwise, and its deadline for that period is met then.
    """
    if not watches(dataset):
        return None
    interval = parse_partition_key(dataset.partitioning, partition_key, dataset.partition_timezone)
    notification = notices.notification_write(
        type=Notification.Type.WATCHDOG_PING,
        dataset=dataset,
        dedup_key=_ping_dedup_key(dataset, partition_key, revision_id),
        data={"external_id": external_id(dataset), "partition": partition_key},
        now=now,
    )
    notices.queue(
        notification,
        {_endpoint(dataset).pk},
        now=now,
        not_before=interval.start if interval else None,
    )
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
