"""A bare ``/metrics`` server for a host that runs no Tidemark web server (only Celery
workers, or beat): it exposes the counters and histograms those processes record in
``PROMETHEUS_MULTIPROC_DIR``, under the same ``TIDEMARK_METRICS`` access rule as the web
server's ``/metrics``.

The state gauges (queues, lags, late datasets) are left out on purpose: they are read from
the database by every web server's ``/metrics`` already, and the same series from another
host would be counted twice by a ``sum()``.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST

from problems import PROBLEM_CONTENT_TYPE, problem_document

from .metrics import bearer_matches, exposition, multiprocess


class _MetricsHandler(BaseHTTPRequestHandler):
    server_version = "tidemark-metrics"

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        mode = settings.TIDEMARK_METRICS
        if path != "/metrics" or mode not in ("open", "token"):
            self._problem(404, "not_found", "Not found", f"no such page: {path}")
            return
        authorization = self.headers.get("Authorization", "")
        if mode == "token" and not bearer_matches(authorization, settings.TIDEMARK_METRICS_TOKEN):
            self._problem(
                401,
                "not_authenticated",
                "Authentication required",
                "send 'Authorization: Bearer <metrics token>'",
                {"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
            return
        self._send(200, CONTENT_TYPE_LATEST, exposition([]))

    def _problem(self, status, code, title, detail, headers=None) -> None:
        body = problem_document(
            code=code, title=title, status=status, detail=detail, instance=self.path
        )
        self._send(status, PROBLEM_CONTENT_TYPE, json.dumps(body).encode(), headers)

    def _send(self, status: int, content_type: str, body: bytes, headers=None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:
        pass  # a scrape every 30 s is not news


def make_server(host: str, port: int) -> ThreadingHTTPServer:
    """A server answering ``GET /metrics`` on ``host``:``port`` (0: any free port).

    Raises:
        RuntimeError: ``PROMETHEUS_MULTIPROC_DIR`` is not set: without it this process
            would expose only its own (empty) metrics, never the workers'.
        OSError: the address is in use.
    """
    if not multiprocess():
        raise RuntimeError(
            "PROMETHEUS_MULTIPROC_DIR is not set: point it at the folder the host's Celery "
            "workers write their metrics to"
        )
    return ThreadingHTTPServer((host, port), _MetricsHandler)
