"""Real concurrency for catalog tests: threads released together by a barrier, each on
its own database connection (so tests use ``django_db(transaction=True)``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection

THREAD_TIMEOUT = 60


def race(works: list[Callable[[], Any]], *, expected: tuple[type[BaseException], ...] = ()):
    """Run each callable in its own thread, all released at once; return each one's
    result in order, or the exception it raised when it is one of ``expected``. Any
    other exception, or a thread still running after ``THREAD_TIMEOUT`` seconds, fails
    the test."""
    barrier = threading.Barrier(len(works))
    outcomes: list[Any] = [None] * len(works)
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            outcomes[index] = works[index]()
        except expected as exc:
            outcomes[index] = exc
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(works))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=THREAD_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert not failures, failures
    return outcomes
