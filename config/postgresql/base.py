"""Django's PostgreSQL backend, with health checks only for connections idle a while.

Django's ``CONN_HEALTH_CHECKS`` sends ``SELECT 1`` before the first query of every request
on a reused connection: a round trip costing the client about 0.1 ms of CPU and the server
a statement, on every publish and every ping. A connection that answered a moment ago is
almost certainly still there, so, as PgBouncer's ``server_check_delay``, this backend
checks only a connection idle for more than ``HEALTH_CHECK_DELAY`` seconds (a key of the
database's settings; 0 checks on every reuse, as Django does). A server restarted within
that delay fails the first query of each connection that was used meanwhile, once: the
error closes the connection at the end of the request, as Django does for any connection
whose health check or query failed.

One failure makes every connection of the process suspect: when any connection of the
process meets a database error, the others are checked before their next reuse however
recently they answered, so after an outage (or a failover) each thread's first request
does not fail on a connection that went dead while it sat idle.
"""

from __future__ import annotations

import time

from django.db.backends.postgresql import base

# time.monotonic() when a connection of this process last ended a request or task with
# an error (or failed to connect); -inf: never. Read by every thread's wrapper.
_failure_seen_at = float("-inf")


class DatabaseWrapper(base.DatabaseWrapper):
    """``django.db.backends.postgresql``'s wrapper; see the module docstring."""

    # time.monotonic() when a request or task last finished using the connection without
    # an error; -inf: never (a connection opened by this request needs no check anyway).
    _last_good_at = float("-inf")

    @property
    def _health_check_delay(self) -> float:
        return float(self.settings_dict.get("HEALTH_CHECK_DELAY", 0))

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and self.health_check_enabled
            and not self.health_check_done
            and time.monotonic() - self._last_good_at < self._health_check_delay
            and self._last_good_at > _failure_seen_at
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def close_if_unusable_or_obsolete(self) -> None:
        # Django calls this when a request (or a Celery task) starts and when it ends; a
        # connection used since the last call has its health check done (or was opened).
        used = self.health_check_done
        self._note_failure()
        super().close_if_unusable_or_obsolete()
        if used and self.connection is not None and not self.errors_occurred:
            self._last_good_at = time.monotonic()

    def close(self) -> None:
        # The outage handler closes a failed connection before the request ends.
        self._note_failure()
        super().close()

    def _note_failure(self) -> None:
        global _failure_seen_at
        if self.errors_occurred:
            _failure_seen_at = time.monotonic()

    def connect(self) -> None:
        super().connect()
        self._last_good_at = float("-inf")
