"""The OpenLineage naming spec's rules per platform, as ``normalise_dataset_identity``
applies them (``catalog.naming``)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.identity import IdentityError, normalise_dataset_identity, normalise_dataset_prefix


def _normal(namespace: str, name: str) -> tuple[str, str]:
    identity = normalise_dataset_identity(namespace, name)
    return identity.namespace, identity.name


@pytest.mark.parametrize(
    ("namespace", "name", "expected"),
    [
        # S3: s3a and s3n are Hadoop's spellings of s3; slashes around a key are not part of it
        ("s3://lake", "raw/orders", ("s3://lake", "raw/orders")),
        ("s3a://lake", "raw/orders", ("s3://lake", "raw/orders")),
        ("s3n://lake", "raw/orders", ("s3://lake", "raw/orders")),
        ("S3A://Lake/", "/raw/orders/", ("s3://lake", "raw/orders")),
        ("s3://lake", "//raw/Orders//", ("s3://lake", "raw/Orders")),
        ("s3://lake", "raw//orders", ("s3://lake", "raw//orders")),
        ("s3://lake", "/", ("s3://lake", "/")),
        # GCS
        ("gs://bucket", "/events/2026/", ("gs://bucket", "events/2026")),
        ("GS://Bucket", "Events", ("gs://bucket", "Events")),
        ("gcs://bucket", "/events/", ("gcs://bucket", "/events/")),
        # Azure: the container@account authority is kept whole
        (
            "abfss://Data@acct.dfs.core.windows.net",
            "/sales/orders/",
            ("abfss://data@acct.dfs.core.windows.net", "sales/orders"),
        ),
        (
            "wasbs://c@acct.blob.core.windows.net",
            "raw/x.parquet",
            ("wasbs://c@acct.blob.core.windows.net", "raw/x.parquet"),
        ),
        # HDFS and DBFS: absolute paths
        ("hdfs://NameNode:8020", "warehouse/t/", ("hdfs://namenode:8020", "/warehouse/t")),
        ("hdfs://namenode:8020", "/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
        ("dbfs://workspace", "//mnt/x", ("dbfs://workspace", "/mnt/x")),
        # local files: a trailing slash only
        ("file", "/data/orders/", ("file", "/data/orders")),
        ("file", "data/orders", ("file", "data/orders")),
        # PostgreSQL family: host:port, no credentials, unquoted names fold to lower case
        (
            "postgresql://DB:5432",
            "Shop.Public.Orders",
            ("postgres://db:5432", "shop.public.orders"),
        ),
        ("postgres://etl:secret@db:5432", "a.b.c", ("postgres://db:5432", "a.b.c")),
        ("postgres://db", "a.b.c", ("postgres://db", "a.b.c")),
        (
            "redshift://cluster.eu-west-1:5439",
            "Dev.Public.T",
            ("redshift://cluster.eu-west-1:5439", "dev.public.t"),
        ),
        # MySQL keeps the case of names (it depends on the server's settings)
        ("mysql://etl@DB:3306", "Shop.Orders", ("mysql://db:3306", "Shop.Orders")),
        # Snowflake folds unquoted names to upper case
        ("snowflake://Org-Acct", "db.sch.tbl", ("snowflake://org-acct", "DB.SCH.TBL")),
        # BigQuery: the bare scheme, as the spec's table spells it; names keep case
        ("bigquery", "proj.ds.Table", ("bigquery", "proj.ds.Table")),
        ("bigquery://", "proj.ds.Table", ("bigquery", "proj.ds.Table")),
        ("BigQuery", "proj.ds.Table", ("bigquery", "proj.ds.Table")),
        # Kafka, Trino: host:port, names as written
        ("kafka://Broker:9092", "Orders", ("kafka://broker:9092", "Orders")),
        ("trino://u@coord:8080", "hive.Sales.Orders", ("trino://coord:8080", "hive.Sales.Orders")),
    ],
)
def test_each_platform_has_one_spelling(namespace, name, expected):
    assert _normal(namespace, name) == expected


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("s3a://Lake/sales/", "s3://lake/sales/"),
        ("s3://lake//sales/", "s3://lake/sales/"),
        ("hdfs://nn:8020/warehouse/", "hdfs://nn:8020//warehouse/"),
    ],
)
def test_prefixes_follow_the_platform_rules_and_keep_their_trailing_slash(prefix, expected):
    assert normalise_dataset_prefix(prefix) == expected


def test_a_prefix_covers_what_its_spellings_do():
    """A prefix claim written with s3a covers a dataset registered under s3."""
    prefix = normalise_dataset_prefix("s3a://lake/sales/")
    identity = normalise_dataset_identity("s3://lake", "/sales/orders")
    assert f"{identity.namespace}/{identity.name}".startswith(prefix)


# --- properties -------------------------------------------------------------------------

_SCHEMES = st.sampled_from(
    ["s3", "s3a", "S3N", "gs", "abfss", "wasbs", "hdfs", "dbfs", "file", "postgres",
     "postgresql", "mysql", "snowflake", "bigquery", "kafka", "trino", "custom+x"]
)  # fmt: skip
_HOST = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,20}(:[0-9]{1,5})?", fullmatch=True)
_SEGMENT = st.from_regex(r"[A-Za-z0-9_.\-]{1,12}", fullmatch=True)
_NAME = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)


@st.composite
def _identities(draw):
    scheme = draw(_SCHEMES)
    authority = draw(st.one_of(st.none(), _HOST))
    namespace = scheme if authority is None else f"{scheme}://{authority}"
    return namespace, draw(_NAME)


@given(_identities())
def test_normalising_is_idempotent(identity):
    once = _normal(*identity)
    assert _normal(*once) == once


_OBJECT_STORES = st.sampled_from(["s3", "gs", "abfss", "wasbs"])


@given(
    scheme=_OBJECT_STORES,
    bucket=st.from_regex(r"[a-z0-9][a-z0-9.\-]{2,20}", fullmatch=True),
    key=_NAME,
    lead=st.integers(0, 3),
    trail=st.integers(0, 3),
    upper=st.booleans(),
    hadoop=st.booleans(),
)
def test_equivalent_object_store_spellings_normalise_equal(
    scheme, bucket, key, lead, trail, upper, hadoop
):
    spelt_scheme = ("s3a" if hadoop else scheme) if scheme == "s3" else scheme
    namespace = f"{spelt_scheme}://{bucket}"
    if upper:
        namespace = namespace.upper()
    assert _normal(namespace, "/" * lead + key + "/" * trail) == _normal(
        f"{scheme}://{bucket}", key
    )


@given(
    host=st.from_regex(r"[a-z][a-z0-9.\-]{0,15}:[0-9]{2,5}", fullmatch=True),
    user=st.from_regex(r"[a-z]{1,8}(:[a-z0-9]{1,8})?", fullmatch=True),
    table=st.from_regex(r"[A-Za-z_]{1,8}\.[A-Za-z_]{1,8}\.[A-Za-z_]{1,8}", fullmatch=True),
    alias=st.booleans(),
)
def test_equivalent_postgres_spellings_normalise_equal(host, user, table, alias):
    scheme = "postgresql" if alias else "POSTGRES"
    assert _normal(f"{scheme}://{user}@{host.upper()}", table) == _normal(
        f"postgres://{host}", table.lower()
    )


@pytest.mark.parametrize(
    ("namespace", "name", "field", "rule"),
    [
        ("s3a://lake", "has space", "name", "whitespace"),
        ("://lake", "x", "namespace", "format"),
        ("s3://la ke", "x", "namespace", "whitespace"),
    ],
)
def test_other_spellings_still_meet_the_identity_rules(namespace, name, field, rule):
    with pytest.raises(IdentityError) as caught:
        normalise_dataset_identity(namespace, name)
    assert (caught.value.field, caught.value.rule) == (field, rule)
