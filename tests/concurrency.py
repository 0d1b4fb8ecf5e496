"""Running work on several database connections at once, for the tests of races."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


def race(works: list[Callable[[], object]]) -> None:
    """Run each callable in its own thread (its own connections), released together by a
    barrier; fail if one hangs past 60 s, and re-raise what any one raised."""
    barrier = threading.Barrier(len(works))
    failures = []

    def run(work):
        try:
            barrier.wait(timeout=30)
            work()
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(work,), daemon=True) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    assert not failures, failures


def elsewhere(work: Callable[[], object], *, what: str = "the other transaction") -> None:
    """Run ``work`` to its commit in a thread of its own (its own connections); fail if it
    hangs past 60 s (``what`` names it), and re-raise what it raised."""
    failures = []

    def run():
        try:
            work()
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), f"{what} hung"
    assert not failures, failures
