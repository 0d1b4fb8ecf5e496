import pytest

from catalog.identity import IdentityError, normalise_dataset_identity


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
