"""A collector for PostgreSQL: what each role read and wrote, from ``pg_stat_statements``.

The extension keeps, per (role, database, query id, top level), the normalised text of a
statement and how many times it ran (``calls``). Each run reads up to ``max_statements``
entries after the previous run's last key, diffs their ``calls`` against the counters kept
in the cursor (``lineage.collectors.counters``: a reset or an evicted entry is a new
baseline), and parses the text of each statement that ran again with openlineage-sql
(dialect ``postgres``): its tables are datasets of ``namespace``, named
``database.schema.table`` (the statement's database; ``public`` for unqualified names, as
the role's ``search_path`` is not known), read (``in_tables``) or written (``out_tables``)
``calls`` more times by the role.

Configuration (an entry of ``TIDEMARK_LINEAGE_COLLECTORS``)::

    {"kind": "postgres", "dsn": "host=db.example port=5432 dbname=postgres user=tidemark",
     "namespace": "postgres://db.example:5432", "max_statements": 1000}

``namespace`` is the server's OpenLineage dataset namespace, as jobs and registrations
name it; it is also the job namespace of the roles. The collector's user needs the
``pg_read_all_stats`` role (to see every role's statement text), and the server
``shared_preload_libraries = 'pg_stat_statements'`` and ``CREATE EXTENSION
pg_stat_statements`` in the database the DSN names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import openlineage_sql
import psycopg

from catalog.identity import IdentityError, normalise_dataset_identity

from . import READ, WRITE, Collection, CollectorConfigError, ObservedAccess
from .counters import Key, diff_counters

DEFAULT_MAX_STATEMENTS = 1000
STATEMENT_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_SECONDS = 5
_SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})

_ENTRIES = """
    SELECT s.userid::bigint, s.dbid::bigint, s.queryid, s.toplevel::int, s.calls,
           r.rolname, d.datname, s.query
    FROM pg_stat_statements s
    JOIN pg_roles r ON r.oid = s.userid
    JOIN pg_database d ON d.oid = s.dbid
    WHERE s.queryid IS NOT NULL {after}
    ORDER BY 1, 2, 3, 4
    LIMIT %s
"""
_AFTER = "AND (s.userid::bigint, s.dbid::bigint, s.queryid, s.toplevel::int) > (%s, %s, %s, %s)"


@dataclass(frozen=True)
class PostgresCollector:
    """``collect`` over ``pg_stat_statements`` of the server at ``dsn``."""

    name: str
    dsn: str
    job_namespace: str
    max_statements: int = DEFAULT_MAX_STATEMENTS

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any]) -> PostgresCollector:
        """Build from a settings entry (see the module docstring).

        Raises:
            CollectorConfigError: no ``dsn``, a namespace that is not ``postgres://host:port``
                or a ``max_statements`` below 1.
        """
        dsn = config.get("dsn")
        if not dsn or not isinstance(dsn, str):
            raise CollectorConfigError(f"collector {name!r}: 'dsn' is required")
        try:
            namespace = normalise_dataset_identity(str(config.get("namespace", "")), "x").namespace
        except IdentityError as exc:
            raise CollectorConfigError(f"collector {name!r}: {exc}") from exc
        if not namespace.startswith("postgres://"):
            raise CollectorConfigError(
                f"collector {name!r}: 'namespace' must be postgres://host:port, got {namespace!r}"
            )
        limit = config.get("max_statements", DEFAULT_MAX_STATEMENTS)
        if not isinstance(limit, int) or limit < 1:
            raise CollectorConfigError(f"collector {name!r}: 'max_statements' must be >= 1")
        return cls(name=name, dsn=dsn, job_namespace=namespace, max_statements=limit)

    def collect(self, *, cursor: Mapping[str, Any] | None, now: datetime) -> Collection:
        """Read up to ``max_statements`` entries after the cursor's key and report the
        tables of the statements that ran since the previous run (see the module docstring).

        Raises:
            psycopg.Error: the server could not be reached or read.
        """
        cursor = cursor or {}
        after = tuple(cursor["after"]) if cursor.get("after") else None
        with psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
        ) as conn:
            conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
            reset_row = conn.execute("SELECT stats_reset FROM pg_stat_statements_info").fetchone()
            query = _ENTRIES.format(after=_AFTER if after else "")
            params = [*(after or ()), self.max_statements]
            rows = conn.execute(query, params).fetchall()
        reset = reset_row[0].isoformat() if reset_row and reset_row[0] else None
        reached_end = len(rows) < self.max_statements
        entries = {
            (u, d, q, t): (calls, role, db, text) for u, d, q, t, calls, role, db, text in rows
        }
        diff = diff_counters(
            previous=_decode(cursor.get("counters", {})),
            previous_reset=cursor.get("stats_reset"),
            reset=reset,
            rows=[(key, entry[0]) for key, entry in entries.items()],
            after=after,
            reached_end=reached_end,
        )
        counts: dict[tuple[str, str, str, str], int] = {}
        parse_errors = 0
        for key, delta in diff.deltas.items():
            _, role, database, text = entries[key]
            reads, writes, errors = self._tables(text, database)
            parse_errors += bool(errors)
            for direction, tables in ((READ, reads), (WRITE, writes)):
                for name in tables:
                    edge = (role, self.job_namespace, name, direction)
                    counts[edge] = counts.get(edge, 0) + delta
        accesses = [
            ObservedAccess(
                principal=role,
                namespace=namespace,
                name=name,
                direction=direction,
                observed_at=now,
                count=count,
            )
            for (role, namespace, name, direction), count in sorted(counts.items())
        ]
        next_cursor = {
            "stats_reset": reset,
            "after": None if reached_end else list(rows[-1][:4]),
            "counters": _encode(diff.counters),
        }
        return Collection(
            accesses=accesses,
            cursor=next_cursor,
            more=not reached_end,
            stats={
                "statements": len(rows),
                "ran_again": len(diff.deltas),
                "parse_errors": parse_errors,
            },
        )

    def _tables(self, text: str, database: str) -> tuple[list[str], list[str], tuple[str, ...]]:
        """The tables ``text`` reads and writes, as normalised dataset names, leaving out
        the system catalogs."""
        meta = openlineage_sql.parse([text], dialect="postgres", default_schema="public")
        found: list[list[str]] = [[], []]
        for tables, names in ((meta.in_tables, found[0]), (meta.out_tables, found[1])):
            for table in tables:
                schema = table.schema or "public"
                if schema.lower() in _SYSTEM_SCHEMAS or table.name.lower().startswith("pg_"):
                    continue
                qualified = f"{table.database or database}.{schema}.{table.name}"
                try:
                    name = normalise_dataset_identity(self.job_namespace, qualified).name
                except IdentityError:
                    continue
                if name not in names:
                    names.append(name)
        return found[0], found[1], tuple(e.message for e in meta.errors)


def _encode(counters: Mapping[Key, int]) -> dict[str, int]:
    return {":".join(str(part) for part in key): value for key, value in counters.items()}


def _decode(counters: Mapping[str, int]) -> dict[Key, int]:
    return {tuple(int(part) for part in key.split(":")): value for key, value in counters.items()}
