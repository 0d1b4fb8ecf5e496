"""Lineage collectors: pull what was actually read and written from systems that keep an
access history, for the jobs that send no OpenLineage events.

The interface is small on purpose, so that a database's statement statistics
(PostgreSQL ``pg_stat_statements``, here), a warehouse's access history (Snowflake
``ACCOUNT_USAGE.ACCESS_HISTORY``, BigQuery ``INFORMATION_SCHEMA.JOBS``) and an object
store's access logs all fit one shape:

- A collector is built from one entry of the ``TIDEMARK_LINEAGE_COLLECTORS`` setting
  (``build``); the source's address and credentials live there, never in the catalog.
- ``collect(cursor=..., now=...)`` reads one bounded slice of the history after
  ``cursor`` (what the previous run handed back, None on the first run) and returns a
  ``Collection``: the accesses it observed and the cursor for the next run. It writes
  nothing: ``lineage.services.collecting.collector_run`` records the accesses and stores
  the cursor in one transaction, so a run that fails is simply run again from the same
  cursor.
- Each ``ObservedAccess`` names who accessed (``principal``: the role or user as the
  source names it), which dataset (an OpenLineage identity, normalised with
  ``catalog.identity``), the direction, when, and how many times since the cursor.
- A principal belongs to the team that claims ``<job_namespace>/<principal>`` (claim kind
  ``db_role``); its accesses are recorded as usage of the job ``job_namespace`` /
  ``principal``.

A log-shaped source (one row per access) keeps a high-water mark in its cursor; an
aggregate-shaped one (counters, like ``pg_stat_statements``) keeps the counters it last saw
and reports the difference (``lineage.collectors.counters``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings

READ = "read"
WRITE = "write"


@dataclass(frozen=True)
class ObservedAccess:
    """``principal`` read (or wrote) the dataset ``namespace`` / ``name`` ``count`` times
    since the previous run; ``observed_at`` is an aware UTC instant (when it was seen, or
    the latest access when the source dates them)."""

    principal: str
    namespace: str
    name: str
    direction: str
    observed_at: datetime
    count: int


@dataclass(frozen=True)
class Collection:
    """One run's result: the accesses, the JSON-serialisable cursor for the next run,
    ``more`` when the run stopped at its bound with history left to read, and counts for
    the run's summary (``{"statements": 12, "parse_errors": 1}``)."""

    accesses: list[ObservedAccess]
    cursor: dict[str, Any]
    more: bool = False
    stats: dict[str, int] = field(default_factory=dict)


class Collector(Protocol):
    """A source of access history (see the module docstring)."""

    name: str
    job_namespace: str

    def collect(self, *, cursor: Mapping[str, Any] | None, now: datetime) -> Collection:
        """Read one bounded slice of the history after ``cursor``.

        Args:
            cursor: what the previous run returned (None on the first run, or after the
                cursor was dropped).
            now: aware UTC instant of this run (``observed_at`` when the source does not
                date its accesses).

        Returns:
            The ``Collection``; nothing is written anywhere.
        """
        ...


class CollectorConfigError(ValueError):
    """A ``TIDEMARK_LINEAGE_COLLECTORS`` entry is malformed, or names an unknown kind."""


def configured() -> dict[str, Mapping[str, Any]]:
    """The ``TIDEMARK_LINEAGE_COLLECTORS`` setting: ``{name: config}``."""
    return dict(getattr(settings, "TIDEMARK_LINEAGE_COLLECTORS", {}) or {})


def build(name: str, config: Mapping[str, Any]) -> Collector:
    """The collector for one configured entry.

    Raises:
        CollectorConfigError: an unknown ``kind`` or a malformed entry.
    """
    kind = config.get("kind")
    if kind == "postgres":
        from .postgres import PostgresCollector

        return PostgresCollector.from_config(name, config)
    raise CollectorConfigError(f"collector {name!r}: unknown kind {kind!r} (known: postgres)")
