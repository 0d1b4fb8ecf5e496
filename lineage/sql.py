"""Tables a job's SQL reads, from the OpenLineage ``sql`` job facet (pure, openlineage-sql).

A job that reports its SQL (``job.facets.sql.query``, with an optional ``dialect``) may
read more than the inputs it lists. The query is parsed with openlineage-sql (no
network, no database); every table it reads (``in_tables``) is a dataset read by the run.

Table names in SQL are relative to the connection the job ran on, which the facet does
not name. The job's defaults are taken from the event's own datasets: the first output,
else the first input, whose namespace is a SQL engine's (``postgres://``,
``snowflake://`` ...) gives the namespace, and its name's database and schema
(``db.schema.table``, or ``schema.table``) qualify the tables the query leaves
unqualified. The dialect is the facet's, else that namespace's scheme.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import openlineage_sql

# Namespace schemes of SQL engines (OpenLineage naming spec), and the openlineage-sql
# dialect each one speaks where its name differs.
SQL_SCHEMES = frozenset(
    {
        "athena",
        "awsathena",
        "bigquery",
        "clickhouse",
        "databricks",
        "db2",
        "duckdb",
        "hive",
        "mssql",
        "mysql",
        "oracle",
        "postgres",
        "redshift",
        "snowflake",
        "sqlite",
        "sqlserver",
        "teradata",
        "trino",
    }
)
_DIALECTS = {"awsathena": "athena", "sqlserver": "mssql"}


@dataclass(frozen=True)
class SqlContext:
    """Where a job's SQL ran: the dataset namespace its tables live in, the default
    database and schema of unqualified names (None: none known) and the SQL dialect."""

    namespace: str
    database: str | None
    schema: str | None
    dialect: str | None


@dataclass(frozen=True)
class SqlReads:
    """What a query reads: table names qualified as far as the context allows
    (``db.schema.table``), in the parser's order, and its parse errors (a statement that
    fails to parse drops only itself)."""

    tables: tuple[str, ...]
    errors: tuple[str, ...]


def sql_context(datasets: Sequence[tuple[str, str]], *, dialect: str | None) -> SqlContext | None:
    """The context of a job's SQL from the event's datasets.

    Args:
        datasets: ``(namespace, name)`` of the event's outputs, then inputs, normalised
            (``catalog.identity``).
        dialect: the ``sql`` facet's ``dialect``, if given.

    Returns:
        The context from the first dataset on a SQL engine, or None when there is none.
    """
    for namespace, name in datasets:
        scheme = namespace.split("://", 1)[0]
        if scheme not in SQL_SCHEMES:
            continue
        parts = name.split(".")
        database = parts[-3] if len(parts) >= 3 else None
        schema = parts[-2] if len(parts) >= 2 else None
        return SqlContext(
            namespace=namespace,
            database=database,
            schema=schema,
            dialect=dialect or _DIALECTS.get(scheme, scheme),
        )
    return None


def tables_read(query: str, context: SqlContext) -> SqlReads:
    """The tables ``query`` reads (one or more ``;``-separated statements).

    Args:
        query: the ``sql`` facet's query text.
        context: where it ran (``sql_context``).

    Returns:
        ``SqlReads``; an unqualified table gets the context's schema and database, a
        schema-qualified one the context's database.
    """
    if not query.strip():
        return SqlReads(tables=(), errors=())
    meta = _parse([query], context)
    if meta.errors and ";" in query:
        # One bad statement loses a whole string, but only itself as a list item.
        meta = _parse([part for part in query.split(";") if part.strip()], context)
    tables: list[str] = []
    for table in meta.in_tables:
        # A schema without a database (given or the default) is in the default database.
        database = table.database or (context.database if table.schema else None)
        qualified = ".".join(p for p in (database, table.schema, table.name) if p)
        if qualified not in tables:
            tables.append(qualified)
    return SqlReads(tables=tuple(tables), errors=tuple(e.message for e in meta.errors))


def _parse(statements: list[str], context: SqlContext):
    return openlineage_sql.parse(statements, dialect=context.dialect, default_schema=context.schema)
