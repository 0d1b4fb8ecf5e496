import pytest

from catalog.identity import (
    IdentityError,
    dataset_location,
    normalise_dataset_identity,
    normalise_dataset_prefix,
    prefix_covers,
)


@pytest.mark.parametrize(
    ("namespace", "name", "expected"),
    [
        (
            "postgres://DB.example:5432",
            "Public.Orders",
            ("postgres://db.example:5432", "public.orders"),
        ),
        ("postgresql://db:5432", "a.b.c", ("postgres://db:5432", "a.b.c")),
        ("S3://Bucket/", "raw/Orders/DT", ("s3://bucket", "raw/Orders/DT")),
        ("snowflake://org-acct", "db.sch.Tbl", ("snowflake://org-acct", "DB.SCH.TBL")),
        ("bigquery", "proj.ds.Table", ("bigquery", "proj.ds.Table")),
        ("kafka://broker:9092", "Orders", ("kafka://broker:9092", "Orders")),
    ],
)
def test_normalise_dataset_identity_folds_case_only_where_the_engine_does(
    namespace, name, expected
):
    identity = normalise_dataset_identity(namespace, name)
    assert (identity.namespace, identity.name) == expected


@pytest.mark.parametrize(
    ("namespace", "name", "field", "rule"),
    [
        ("", "x", "namespace", "required"),
        ("s3://b", "", "name", "required"),
        ("s3://b", "has space", "name", "whitespace"),
        ("s3://b", "tab\there", "name", "whitespace"),
        ("s3 ://b", "x", "namespace", "whitespace"),
        ("://nobody", "x", "namespace", "format"),
        ("1abc://x", "x", "namespace", "format"),
        ("s3://" + "b" * 260, "x", "namespace", "max_length"),
        ("s3://b", "n" * 1025, "name", "max_length"),
    ],
)
def test_normalise_dataset_identity_names_the_field_and_rule(namespace, name, field, rule):
    with pytest.raises(IdentityError) as info:
        normalise_dataset_identity(namespace, name)
    assert (info.value.field, info.value.rule) == (field, rule)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("s3://lake/sales/", "s3://lake/sales/"),
        ("S3://Lake/Sales/", "s3://lake/Sales/"),
        ("s3://lake", "s3://lake/"),
        ("s3://lake/", "s3://lake/"),
        ("postgresql://DB:5432/Analytics.Sales.", "postgres://db:5432/analytics.sales."),
        ("snowflake://acct/db.sch", "snowflake://acct/DB.SCH"),
        ("bigquery/proj.", "bigquery/proj."),
    ],
)
def test_normalise_dataset_prefix_follows_the_identity_rules(prefix, expected):
    assert normalise_dataset_prefix(prefix) == expected


@pytest.mark.parametrize(
    ("prefix", "rule"),
    [
        ("", "required"),
        ("s3://lake/a b", "whitespace"),
        ("://lake/x", "format"),
        ("1x://a", "format"),
    ],
)
def test_normalise_dataset_prefix_rejects_what_is_not_a_namespace(prefix, rule):
    with pytest.raises(IdentityError) as caught:
        normalise_dataset_prefix(prefix)
    assert (caught.value.field, caught.value.rule) == ("pattern", rule)


@pytest.mark.parametrize(
    ("prefix", "namespace", "name", "covered"),
    [
        ("s3://lake/sales/", "s3://lake", "sales/orders", True),
        ("s3://lake/sales/", "s3://lake", "sales_archive/orders", False),
        ("s3://lake/sales", "s3://lake", "sales_archive/orders", True),
        ("s3://lake/", "s3://lake", "anything", True),
        ("s3://lake/", "s3://lakehouse", "anything", False),
    ],
)
def test_a_prefix_covers_datasets_whose_location_starts_with_it(prefix, namespace, name, covered):
    assert prefix_covers(prefix, dataset_location(namespace, name)) is covered
