"""``GET /metrics`` in the Prometheus text format, shared by the catalog's server and the
watchdog's: who may read it (``TIDEMARK_METRICS``), how the exposition is assembled, and
the HTTP request metrics every request records.

Two kinds of metrics are exposed:

- counters and histograms (requests, publishes, deliveries, pages, loop cycles) that a
  process records as work happens, with ``prometheus_client``. With
  ``PROMETHEUS_MULTIPROC_DIR`` set in the environment (gunicorn's several workers, and
  every other process of the same role on the host) each process writes its values to
  files there and a scrape sums them over every process, living or exited; without it, a
  scrape sees the serving process's own values (plus its CPU, memory and GC metrics).
- gauges that describe the state (queue depths, lags, late datasets, open incidents):
  read from the database (or broker) at scrape time by a collector the caller passes,
  with a handful of aggregate queries, so any process count gives the same answer.

Label values are bounded: a route is the URL pattern's name, never the requested path.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable, Iterable
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from problems import PROBLEM_CONTENT_TYPE, problem_document

from . import outage

# Seconds; the publish hot path answers in a few milliseconds, a page in tens.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HTTP_REQUESTS = Counter(
    "tidemark_http_requests",
    "HTTP requests answered, by route (the URL pattern's name), method and status code.",
    ["route", "method", "status"],
)
HTTP_REQUEST_DURATION = Histogram(
    "tidemark_http_request_duration_seconds",
    "Time from a request reaching Django to its response, by route.",
    ["route"],
    buckets=LATENCY_BUCKETS,
)

# Summed over the living processes only: gunicorn's child_exit hook (config/gunicorn.py)
# drops an exited worker's value.
HTTP_IN_FLIGHT = Gauge(
    "tidemark_http_requests_in_flight",
    "Requests being answered now.",
    multiprocess_mode="livesum",
)

UNMATCHED = "unmatched"  # no URL pattern matched (a 404 for an unknown path)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def multiprocess() -> bool:
    """True when this process's metrics live in ``PROMETHEUS_MULTIPROC_DIR`` (read from
    the environment at start, as ``prometheus_client`` reads it)."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class RequestMetricsMiddleware:
    """Count every request by route, method and status, and time it by route.

    First in ``MIDDLEWARE``, so its time covers the other middleware too. It reads no
    database and no setting per request: a counter increment and a histogram observation
    (in multiprocess mode, writes to a memory-mapped file).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        HTTP_IN_FLIGHT.inc()
        try:
            response = self.get_response(request)
        finally:
            HTTP_IN_FLIGHT.dec()
        elapsed = time.perf_counter() - started
        match = getattr(request, "resolver_match", None)
        route = match.view_name if match is not None else UNMATCHED
        method = request.method if request.method in _METHODS else "other"
        HTTP_REQUESTS.labels(route, method, str(response.status_code)).inc()
        HTTP_REQUEST_DURATION.labels(route).observe(elapsed)
        return response


class _ThisProcess(Collector):
    """The default registry's collectors: this process's own metrics (plain mode)."""

    def collect(self):
        return REGISTRY.collect()


class StateCollector(Collector):
    """State gauges read from a database at scrape time, with a gauge saying whether it
    answered: when it does not (an outage, ``httpkit.outage``), the scrape still answers
    with the processes' counters, ``up_name`` at 0 and no state gauges.

    Subclasses set ``up_name`` and ``up_help`` and define ``read(now)`` (the state's
    metric families; may raise ``DatabaseError``) and, optionally, ``always()`` (families
    read without the database, such as the broker's queues).
    """

    up_name: str
    up_help: str

    def read(self, now: datetime) -> list[Metric]:
        raise NotImplementedError

    def always(self) -> list[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(self.up_name, self.up_help)
        try:
            families = self.read(timezone.now())
        except DatabaseError as exc:
            if not outage.is_database_unavailable(exc):
                raise
            outage.handled(exc)  # logged once per outage; its broken connections closed
            up.add_metric([], 0)
            return [up, *self.always()]
        up.add_metric([], 1)
        return [up, *families, *self.always()]


def exposition(collectors: Iterable[Collector]) -> bytes:
    """The text exposition of the recorded metrics (summed over every process in
    multiprocess mode) followed by ``collectors``' families, collected now."""
    registry = CollectorRegistry()
    if multiprocess():
        MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry)


def metrics_response(request: HttpRequest, collectors: Iterable[Collector]) -> HttpResponse:
    """Answer ``GET /metrics`` as ``TIDEMARK_METRICS`` allows.

    ``off``: 404 (as if there were no such page); ``open``: anyone; ``token``: only with
    ``Authorization: Bearer <TIDEMARK_METRICS_TOKEN>``, else 401 with ``WWW-Authenticate``.

    Returns:
        200 with the text exposition (``exposition``), or a 401 problem document.

    Raises:
        Http404 when metrics are off.
    """
    mode = settings.TIDEMARK_METRICS
    if mode not in ("open", "token"):
        raise Http404("metrics are off")
    authorization = request.headers.get("Authorization", "")
    if mode == "token" and not bearer_matches(authorization, settings.TIDEMARK_METRICS_TOKEN):
        response = JsonResponse(
            problem_document(
                code="not_authenticated",
                title="Authentication required",
                status=401,
                detail="send 'Authorization: Bearer <metrics token>'",
                instance=request.path,
            ),
            status=401,
            content_type=PROBLEM_CONTENT_TYPE,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition(collectors), content_type=CONTENT_TYPE_LATEST)


def bearer_matches(authorization: str, token: str) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>`` (constant time);
    never true for an empty ``token``."""
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())
