"""Named crash points for crash-recovery tests.

``crashpoint("name")`` does nothing unless ``TIDEMARK_CRASH_AT=name:k`` is set in the
environment, in which case the k-th time the named point is reached the process kills
itself with SIGKILL: no cleanup, no exception handlers, no atexit, exactly like an OOM
kill or a power cut. The tests run a scenario in a subprocess for every point, then let
recovery run and compare the tables with those of a clean run.
"""

from __future__ import annotations

import os
import signal

_TARGET: tuple[str, int] | None = None
_hits: dict[str, int] = {}


def _parse(value: str) -> tuple[str, int] | None:
    if not value:
        return None
    name, _, nth = value.partition(":")
    return name, int(nth or 1)


_TARGET = _parse(os.environ.get("TIDEMARK_CRASH_AT", ""))

POINTS = (
    "publish.after_event",  # inside the publish transaction, before the outbox rows
    "publish.between_outbox_inserts",  # notification written, deliveries not yet
    "publish.after_commit",  # committed, doorbell not rung, response not sent
    "delivery.after_claim",  # claim committed, nothing sent
    "delivery.after_send",  # receiver has it, outcome not recorded
    "delivery.after_record",  # outcome recorded, next claim not made
)


def crashpoint(name: str) -> None:
    """Die here if this is the configured crash point and hit (see module docstring)."""
    if _TARGET is None or _TARGET[0] != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == _TARGET[1]:
        os.kill(os.getpid(), signal.SIGKILL)
