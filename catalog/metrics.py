"""The catalog's Prometheus metrics (``GET /metrics`` on its server; docs/operations.md,
Metrics, says what each means).

Counters and histograms are recorded where the work happens (publishes in the readiness
view, deliveries in ``catalog.delivery``, storage sweeps in ``catalog.polling``), in
whichever process does it: with ``PROMETHEUS_MULTIPROC_DIR`` shared by the web, worker
and beat processes of a host, the web's ``/metrics`` sums them all (``httpkit.metrics``).

Gauges that describe the state are read at scrape time by ``CatalogCollector``: a few
aggregate queries on indexed columns, and the broker's queue lengths. Other apps add
their own state (lineage its backlog) with ``register_state``: the catalog never imports
lineage. No label holds a dataset's name: teams, queues, kinds and states only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Min, Q
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from httpkit import metrics as http_metrics

from . import self_monitoring
from .models import Dataset, Delivery, LatePartition

logger = logging.getLogger(__name__)

PUBLISHES = Counter(
    "tidemark_publishes",
    "Readiness publishes answered (POST /api/v1/readiness), by result: recorded (201, "
    "something changed), unchanged (200, a repeat), replayed (an Idempotency-Key's stored "
    "answer), refused (a 4xx problem), failed (5xx).",
    ["result"],
)
PUBLISH_RESULTS = ("recorded", "unchanged", "replayed", "refused", "failed")

DELIVERIES = Counter(
    "tidemark_deliveries",
    "Delivery attempts written back, by endpoint kind and outcome: succeeded, retrying, "
    "rejected (a non-retryable answer), dead (attempts exhausted), claim_lost (another "
    "worker took it over).",
    ["kind", "outcome"],
)
DELIVERY_DURATION = Histogram(
    "tidemark_delivery_attempt_duration_seconds",
    "Time one delivery attempt took to send (connect, request, response), by endpoint kind.",
    ["kind"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0),
)

POLL_SWEEPS = Counter(
    "tidemark_poll_sweeps",
    "Storage group sweeps by the fallback poll, by result: ok or error (storage failed).",
    ["result"],
)
POLL_LIST_CALLS = Counter(
    "tidemark_poll_list_calls", "List calls the fallback poll made to storage."
)
POLL_MISSED_EVENTS = Counter(
    "tidemark_poll_missed_events",
    "Partitions the fallback poll found ready without a readiness event.",
)

# The Celery queues Tidemark routes work to (settings.CELERY_TASK_ROUTES and the default).
QUEUES = ("default", "delivery", "freshness", "poll", "lineage", "maintenance", "housekeeping")

StateReader = Callable[[datetime], Iterable[Metric]]
_STATE_READERS: list[StateReader] = []


def register_state(reader: StateReader) -> None:
    """Add gauges read at scrape time (an app's ``AppConfig.ready``); idempotent.

    ``reader(now)`` yields metric families; it runs on every scrape, so it must be a few
    aggregate queries at most.
    """
    if reader not in _STATE_READERS:
        _STATE_READERS.append(reader)


def record_delivery(*, kind: str, outcome: str, duration_ms: int | None) -> None:
    """Count one written-back delivery attempt (``outcome``: its new state, or
    ``claim_lost``) and time its send (``duration_ms``, milliseconds; None: not timed)."""
    DELIVERIES.labels(kind, outcome).inc()
    if duration_ms is not None:
        DELIVERY_DURATION.labels(kind).observe(duration_ms / 1000)


def record_sweep(*, error: bool, list_calls: int, missed_events: int) -> None:
    """Count one storage sweep, its List calls and the partitions it found without an
    event."""
    POLL_SWEEPS.labels("error" if error else "ok").inc()
    POLL_LIST_CALLS.inc(list_calls)
    POLL_MISSED_EVENTS.inc(missed_events)


class CatalogCollector(http_metrics.StateCollector):
    """The catalog's state, read at scrape time (``state``), and the broker's queues,
    which are read even when the database does not answer."""

    up_name = "tidemark_database_up"
    up_help = (
        "1 when the catalog's database answered this scrape's state queries, else 0 "
        "(and no state gauges)."
    )

    def read(self, now: datetime) -> list[Metric]:
        return state(now=now)

    def always(self) -> list[Metric]:
        return list(_broker_queues())


def state(*, now: datetime) -> list[Metric]:
    """The catalog's state gauges at ``now`` (aware UTC), plus every registered reader's.

    Queries: the oldest due work of each queue (``self_monitoring.lags``, one aggregate
    each), deliveries waiting by state, dead letters by team, late partitions and
    datasets, datasets.

    Raises:
        DatabaseError when the database does not answer.
    """
    families: list[Metric] = []
    oldest = GaugeMetricFamily(
        "tidemark_oldest_due_work_age_seconds",
        "How long the oldest due item of each kind of work has waited (0: none due): "
        "deliveries, poll (storage group sweeps), freshness (deadline judgements), "
        "change-notices, lineage (OpenLineage events).",
        labels=["work"],
    )
    for external_id, lag in self_monitoring.lags(now=now).items():
        work = external_id.rsplit(":", 1)[-1]
        oldest.add_metric([work], lag.total_seconds() if lag is not None else 0.0)
    families.append(oldest)

    waiting = GaugeMetricFamily(
        "tidemark_deliveries_waiting",
        "Deliveries not finished, by state: pending (never sent) or retrying.",
        labels=["state"],
    )
    counts = {
        row["state"]: row["n"]
        for row in Delivery.objects.filter(
            state__in=(Delivery.State.PENDING, Delivery.State.RETRYING)
        )
        .values("state")
        .annotate(n=Count("pk"))
        .order_by()
    }
    for name in (Delivery.State.PENDING, Delivery.State.RETRYING):
        waiting.add_metric([name], counts.get(name, 0))
    families.append(waiting)

    dead = GaugeMetricFamily(
        "tidemark_dead_letters",
        "Dead letters (deliveries rejected or dead, replayable until pruned), by the team "
        "owning the endpoint.",
        labels=["team"],
    )
    for row in (
        Delivery.objects.filter(state__in=(Delivery.State.REJECTED, Delivery.State.DEAD))
        .values("endpoint__team__slug")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        dead.add_metric([row["endpoint__team__slug"]], row["n"])
    families.append(dead)

    late = LatePartition.objects.filter(recovered_at__isnull=True).aggregate(
        partitions=Count("pk"),
        datasets=Count("dataset", distinct=True),
        since=Min("late_at"),
    )
    families.append(
        GaugeMetricFamily(
            "tidemark_late_datasets",
            "Datasets with at least one open late partition (judged late, not landed yet).",
            value=late["datasets"],
        )
    )
    families.append(
        GaugeMetricFamily(
            "tidemark_late_partitions_open",
            "Open late incidents: partitions judged late (deadline plus grace passed) that "
            "have not landed yet.",
            value=late["partitions"],
        )
    )
    families.append(
        GaugeMetricFamily(
            "tidemark_datasets",
            "Datasets in the catalog that are not retired.",
            value=Dataset.objects.filter(~Q(lifecycle=Dataset.Lifecycle.RETIRED)).count(),
        )
    )
    for reader in _STATE_READERS:
        families.extend(reader(now))
    return families


def _broker_queues() -> list[Metric]:
    """The Celery queues' lengths (doorbells waiting) and whether the broker answered
    (when it does not: ``tidemark_broker_up`` 0 and no lengths)."""
    up = GaugeMetricFamily(
        "tidemark_broker_up", "1 when the Celery broker answered this scrape, else 0."
    )
    depth = GaugeMetricFamily(
        "tidemark_queue_messages",
        "Messages waiting in each Celery queue (doorbells: the work itself is rows, "
        "measured by tidemark_oldest_due_work_age_seconds).",
        labels=["queue"],
    )
    try:
        lengths = _queue_lengths()
    except Exception as exc:  # the broker being down must not fail the scrape
        logger.warning("metrics: the broker's queue lengths could not be read: %s", exc)
        up.add_metric([], 0)
        return [up]
    up.add_metric([], 1)
    for queue, n in lengths.items():
        depth.add_metric([queue], n)
    return [up, depth]


def _queue_lengths() -> dict[str, int]:
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        # config.filesystem_broker names each message <ms>_<uuid>.<queue>.msg.
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
        lengths = dict.fromkeys(QUEUES, 0)
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    queue = entry.name.rsplit(".", 2)[-2] if entry.name.endswith(".msg") else ""
                    if queue in lengths:
                        lengths[queue] += 1
        except FileNotFoundError:  # made by the first process to use the broker: none yet
            pass
        return lengths
    if url.startswith(("redis://", "rediss://", "unix://")):
        import redis

        client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        try:
            pipe = client.pipeline(transaction=False)
            for queue in QUEUES:
                pipe.llen(queue)
            return dict(zip(QUEUES, pipe.execute(), strict=True))
        finally:
            client.close()
    raise RuntimeError(f"queue lengths are read from Redis or the filesystem broker only: {url}")


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics`` on the catalog's server (``httpkit.metrics.metrics_response``)."""
    return http_metrics.metrics_response(request, [CatalogCollector()])
