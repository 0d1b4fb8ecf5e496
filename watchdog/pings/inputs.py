"""A ping as the view parsed it, its body, and why one is refused (``PingRejected``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

NOT_FOUND = "not found"


class PingRejected(Exception):
    """The ping cannot be taken; ``status`` is the HTTP status to answer, ``retry_after``
    (seconds) when it is 429, and ``extra`` what the API's problem document adds for
    programs (e.g. the rule broken)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        retry_after: int | None = None,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.extra = extra or {}


FUTURE_RULE = "partition_started"


def body_limit() -> int:
    """Bytes of a ping's body that are kept (``WATCHDOG_PING_BODY_LIMIT``), as the
    ``Ping-Body-Limit`` response header tells clients."""
    return settings.WATCHDOG_PING_BODY_LIMIT


@dataclass(frozen=True)
class PingInput:
    """One ping as the view parsed it.

    Attributes:
        kind: ``success``, ``start``, ``fail`` or ``log``.
        exit_status: the ``/<exit status>`` form's number (0 success, 1-255 failure).
        partition: ``?partition=`` or "".
        run_id: ``?rid=`` (a UUID, lowercase) or "" (pairs start with finish to measure
            duration).
        body: the raw request body (truncated and decoded leniently here).
    """

    kind: str
    method: str
    exit_status: int | None = None
    partition: str = ""
    run_id: str = ""
    body: bytes = b""
    remote_addr: str = ""
    user_agent: str = ""


def decode_body(raw: bytes) -> str:
    """The first ``body_limit()`` bytes as text: invalid UTF-8 (or a character cut at the
    limit) becomes U+FFFD, and NUL is dropped (text columns cannot hold it)."""
    return raw[: body_limit()].decode("utf-8", "replace").replace("\x00", "")
