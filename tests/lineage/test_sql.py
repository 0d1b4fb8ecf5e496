"""Tables a job's SQL reads (the ``sql`` job facet, parsed with openlineage-sql), recorded
as observed reads qualified with the job's default database and schema."""

from __future__ import annotations

import pytest

from catalog.models import DatasetUsage
from lineage import openlineage, sql
from tests.lineage import events as ev

WAREHOUSE = "postgres://warehouse:5432"


@pytest.mark.parametrize(
    ("datasets", "dialect", "expected"),
    [
        (
            [("s3://lake", "raw/x"), (WAREHOUSE, "shop.marts.daily"), (WAREHOUSE, "a.b.c")],
            None,
            sql.SqlContext(WAREHOUSE, "shop", "marts", "postgres"),
        ),
        (
            [("snowflake://acme", "ANALYTICS.PUBLIC.ORDERS")],
            None,
            sql.SqlContext("snowflake://acme", "ANALYTICS", "PUBLIC", "snowflake"),
        ),
        (
            [("postgres://wh", "public.daily")],
            None,
            sql.SqlContext("postgres://wh", None, "public", "postgres"),
        ),
        (
            [("sqlserver://db:1433", "sales.dbo.orders")],
            None,
            sql.SqlContext("sqlserver://db:1433", "sales", "dbo", "mssql"),
        ),
        (
            [(WAREHOUSE, "shop.marts.daily")],
            "redshift",
            sql.SqlContext(WAREHOUSE, "shop", "marts", "redshift"),
        ),
        ([("s3://lake", "raw/x"), ("kafka://broker:9092", "orders")], None, None),
        ([], None, None),
    ],
)
def test_sql_context_comes_from_the_first_dataset_on_a_sql_engine(datasets, dialect, expected):
    assert sql.sql_context(datasets, dialect=dialect) == expected


SHOP = sql.SqlContext(WAREHOUSE, "shop", "public", "postgres")


@pytest.mark.parametrize(
    ("query", "context", "tables"),
    [
        ("SELECT * FROM orders", SHOP, ("shop.public.orders",)),
        (
            "SELECT o.id FROM orders o JOIN sales.customers c ON c.id = o.cid "
            "JOIN crm.public.accounts a ON a.id = c.aid",
            SHOP,
            ("shop.public.orders", "shop.sales.customers", "crm.public.accounts"),
        ),
        (
            "INSERT INTO marts.daily SELECT day, count(*) FROM orders GROUP BY day",
            SHOP,
            ("shop.public.orders",),  # what it writes is not a read
        ),
        ("SELECT 1", SHOP, ()),
        (
            "SELECT * FROM orders",
            sql.SqlContext("postgres://wh", None, "public", None),
            ("public.orders",),
        ),
        (
            "select * from orders; select * from refunds",
            SHOP,
            ("shop.public.orders", "shop.public.refunds"),
        ),
    ],
)
def test_tables_read_are_qualified_with_the_default_database_and_schema(query, context, tables):
    reads = sql.tables_read(query, context)
    assert (reads.tables, reads.errors) == (tables, ())


def test_a_statement_that_does_not_parse_drops_only_itself():
    reads = sql.tables_read("SELEC broken FROM; SELECT * FROM orders", SHOP)
    assert reads.tables == ("shop.public.orders",)
    assert len(reads.errors) == 1


def _sql_event(query: str, **extra) -> dict:
    event = ev.run_event(
        "COMPLETE", outputs=[ev.dataset(WAREHOUSE, "shop.marts.daily_orders")], **extra
    )
    event["job"]["facets"] = {
        "sql": {"_producer": ev.PRODUCER, "_schemaURL": ev.SCHEMA_URL, "query": query}
    }
    return event


def test_parse_event_reads_the_sql_facet_in_the_context_of_the_events_datasets():
    parsed = openlineage.parse_event(
        _sql_event("INSERT INTO marts.daily_orders SELECT * FROM Orders JOIN sales.Customers")
    )
    assert [(r.namespace, r.name, r.field) for r in parsed.sql_reads] == [
        (WAREHOUSE, "shop.marts.orders", "job.facets.sql"),
        (WAREHOUSE, "shop.sales.customers", "job.facets.sql"),
    ]
    assert parsed.problems == ()


def test_parse_event_flags_sql_that_does_not_parse_and_sql_with_no_engine_is_left_alone():
    parsed = openlineage.parse_event(_sql_event("SELEC broken FROM"))
    assert [(p.field, p.rule) for p in parsed.problems] == [("job.facets.sql.query", "sql")]
    assert parsed.sql_reads == ()
    no_engine = _sql_event("SELECT * FROM orders")
    no_engine["outputs"] = [ev.dataset("s3://lake", "marts/daily")]
    parsed = openlineage.parse_event(no_engine)
    assert (parsed.sql_reads, parsed.problems) == ((), ())


@pytest.mark.django_db
def test_tables_the_sql_reads_are_recorded_as_observed_reads_once_per_run(receive, process):
    query = "INSERT INTO marts.daily_orders SELECT * FROM public.orders o JOIN refunds r USING (id)"
    listed = ev.dataset(WAREHOUSE, "shop.public.orders")  # also listed as an input
    receive(_sql_event(query, inputs=[listed]))
    receive({**_sql_event(query, inputs=[listed]), "eventType": "OTHER"})  # same run again
    process()
    reads = {
        (u.dataset_namespace, u.dataset_name): u.run_count
        for u in DatasetUsage.objects.filter(direction="read")
    }
    # Unqualified "refunds" takes the job's default schema (marts, from its output).
    assert reads == {
        (WAREHOUSE, "shop.public.orders"): 1,
        (WAREHOUSE, "shop.marts.refunds"): 1,
    }
    assert DatasetUsage.objects.get(direction="write").dataset_name == "shop.marts.daily_orders"
