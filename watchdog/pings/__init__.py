"""Receiving pings: the dead-man's-switch convention (``/ping/<uuid>``, ``/start``,
``/fail``, ``/log``, ``/<exit status>``, ``?rid=``), plus ``?partition=`` so a deadline can
expect the data, not only the task.

A package: ``inputs`` (the parsed ping, refusals), ``recording`` (``record``), ``rates``
(the per-monitor rate), ``partitions`` (the partition a ping names), ``applying`` (its
effect on the monitor) and ``feed`` (partitions reported with a definition); the names
other modules use are re-exported here."""

from __future__ import annotations

from .. import ping_statement
from .feed import FEED_METHOD, FEED_USER_AGENT, ready_partition_problems, record_ready
from .inputs import (
    FUTURE_RULE,
    NOT_FOUND,
    PingInput,
    PingRejected,
    body_limit,
    decode_body,
)
from .rates import RATE_WINDOW
from .recording import record

__all__ = [
    "FEED_METHOD",
    "FEED_USER_AGENT",
    "FUTURE_RULE",
    "NOT_FOUND",
    "RATE_WINDOW",
    "PingInput",
    "PingRejected",
    "body_limit",
    "decode_body",
    "ping_statement",
    "ready_partition_problems",
    "record",
    "record_ready",
]
