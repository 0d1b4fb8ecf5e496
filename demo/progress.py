"""What the demo is doing, as it does it: steps, and waits that say what they wait for."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_started = time.monotonic()


class DemoFailed(Exception):
    """A step of the demo could not be carried out (not an expectation that failed)."""


def elapsed() -> float:
    return time.monotonic() - _started


def say(message: str) -> None:
    print(f"[{elapsed():6.1f}s] {message}", flush=True)


def step(title: str) -> None:
    print(f"\n[{elapsed():6.1f}s] == {title}", flush=True)


def wait_for(
    predicate: Callable[[], T | None],
    *,
    what: str,
    timeout: float,
    every: float = 0.5,
    report_every: float = 10.0,
    fail: bool = True,
) -> T | None:
    """Poll ``predicate`` until it returns something truthy, saying what is awaited.

    Prints the wait once, then how long it has waited every ``report_every`` seconds.
    Returns the predicate's value; after ``timeout`` seconds raises ``DemoFailed`` (or,
    with ``fail=False``, returns None).
    """
    started = time.monotonic()
    deadline = started + timeout
    say(f"waiting for {what} (up to {timeout:.0f} s)")
    next_report = started + report_every
    while True:
        value = predicate()
        if value:
            took = time.monotonic() - started
            if took >= 1:
                say(f"  ... done after {took:.0f} s")
            return value
        now = time.monotonic()
        if now >= deadline:
            if fail:
                raise DemoFailed(f"timed out after {timeout:.0f} s waiting for {what}")
            say(f"  ... gave up after {timeout:.0f} s")
            return None
        if now >= next_report:
            say(f"  ... still waiting for {what}: {now - started:.0f} s of {timeout:.0f} s")
            next_report = now + report_every
        time.sleep(every)


def fatal(message: str) -> None:
    print(f"\ndemo: {message}", file=sys.stderr, flush=True)
