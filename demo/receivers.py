"""The other side of Tidemark's outbound calls, on loopback: a consumer's webhook receiver
(Standard Webhooks signatures verified with the ``standardwebhooks`` library), a PagerDuty
Events API v2 compatible receiver and a heartbeat receiver for the watchdog's own switch.

Each is a small threaded HTTP server that records what it received.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Receiver:
    """A threaded HTTP server on 127.0.0.1 whose handler calls ``self.handle``."""

    name = "receiver"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, answer = receiver.handle(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                data = json.dumps(answer).encode() if answer is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET = do_HEAD = _answer

            def log_message(self, format, *args):
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread.is_alive():  # shutdown() waits for a serve_forever() that never ran
            self.server.shutdown()
        self.server.server_close()

    def handle(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, Any]:
        raise NotImplementedError


@dataclass
class Notification:
    """One webhook request a consumer received, verified."""

    team: str
    webhook_id: str
    type: str
    dataset: str
    partition: str
    data: dict = field(repr=False)


class WebhookReceiver(Receiver):
    """A consumer team's webhook: ``POST /hooks/<team>``, verified with the team's
    endpoint secret (``standardwebhooks.Webhook.verify`` on the raw body). A bad or
    missing signature is answered 401 and counted; a good one 204 and recorded."""

    name = "consumer webhook"

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[str, str] = {}
        self.received: list[Notification] = []
        self.rejected: list[str] = []

    def hook_url(self, team: str) -> str:
        return f"{self.url}/hooks/{team}"

    def handle(self, method, path, headers, body):
        team = path.rstrip("/").rsplit("/", 1)[-1]
        secret = self.secrets.get(team)
        if method != "POST" or not path.startswith("/hooks/") or secret is None:
            return 404, {"error": "no such hook"}
        try:
            event = Webhook(secret).verify(body, headers)
        except WebhookVerificationError as exc:
            with self.lock:
                self.rejected.append(f"{team}: {exc}")
            return 401, {"error": str(exc)}
        data = event.get("data") or {}
        dataset = data.get("dataset") or {}
        with self.lock:
            self.received.append(
                Notification(
                    team=team,
                    webhook_id=headers.get("webhook-id", ""),
                    type=event.get("type", ""),
                    dataset=dataset.get("name", ""),
                    partition=data.get("partition") or "",
                    data=data,
                )
            )
        return 204, None

    def find(self, *, type: str, dataset: str, partition: str | None = None) -> list[Notification]:
        with self.lock:
            return [
                n
                for n in self.received
                if n.type == type
                and n.dataset == dataset
                and (partition is None or n.partition == partition)
            ]

    def distinct(self) -> int:
        with self.lock:
            return len({n.webhook_id for n in self.received})


@dataclass
class PagerDutyEvent:
    routing_key: str
    action: str
    dedup_key: str
    summary: str


class PagerDutyReceiver(Receiver):
    """PagerDuty Events API v2 (``POST /v2/enqueue``): checks the event's shape as
    PagerDuty does (routing key, action, dedup key; a trigger's summary, source and
    severity), answers 202 with the dedup key, or 400 naming what is wrong."""

    name = "PagerDuty receiver"
    ACTIONS = ("trigger", "acknowledge", "resolve")

    def __init__(self) -> None:
        super().__init__()
        self.events: list[PagerDutyEvent] = []
        self.invalid: list[str] = []

    @property
    def enqueue_url(self) -> str:
        return f"{self.url}/v2/enqueue"

    def handle(self, method, path, headers, body):
        if method != "POST" or path != "/v2/enqueue":
            return 404, {"status": "invalid path"}
        try:
            event = json.loads(body)
        except ValueError:
            return self._invalid("body is not JSON")
        errors = []
        if not isinstance(event.get("routing_key"), str) or len(event["routing_key"]) != 32:
            errors.append("routing_key must be 32 characters")
        if event.get("event_action") not in self.ACTIONS:
            errors.append("event_action must be trigger, acknowledge or resolve")
        if event.get("event_action") != "trigger" and not event.get("dedup_key"):
            errors.append("dedup_key is required to acknowledge or resolve")
        if event.get("event_action") == "trigger":
            payload = event.get("payload") or {}
            for required in ("summary", "source", "severity"):
                if not payload.get(required):
                    errors.append(f"payload.{required} is required")
        if errors:
            return self._invalid("; ".join(errors))
        dedup_key = event.get("dedup_key") or ""
        with self.lock:
            self.events.append(
                PagerDutyEvent(
                    routing_key=event["routing_key"],
                    action=event["event_action"],
                    dedup_key=dedup_key,
                    summary=(event.get("payload") or {}).get("summary", ""),
                )
            )
        return 202, {"status": "success", "message": "Event processed", "dedup_key": dedup_key}

    def _invalid(self, why: str):
        with self.lock:
            self.invalid.append(why)
        return 400, {
            "status": "invalid event",
            "message": "Event object is invalid",
            "errors": [why],
        }

    def of(self, action: str, routing_key: str) -> list[PagerDutyEvent]:
        """The events with ``action`` for one service (routing key)."""
        with self.lock:
            return [e for e in self.events if e.action == action and e.routing_key == routing_key]


class HeartbeatReceiver(Receiver):
    """A healthchecks-style ping URL for the watchdog's own heartbeat: counts the pings."""

    name = "heartbeat receiver"

    def __init__(self) -> None:
        super().__init__()
        self.pings = 0

    @property
    def ping_url(self) -> str:
        return f"{self.url}/ping/tidemark-watchdog"

    def handle(self, method, path, headers, body):
        if not path.startswith("/ping/"):
            return 404, None
        with self.lock:
            self.pings += 1
        return 200, {"ok": True}
