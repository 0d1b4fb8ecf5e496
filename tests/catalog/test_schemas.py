"""catalog.schemas: reading, fingerprinting and diffing schemas (pure, no database)."""

from __future__ import annotations

import pytest

from catalog import schemas


def cols(*pairs, **nested) -> list[dict]:
    """``cols(("id", "int"), address=[("city", "text")])``."""
    fields = [{"name": name, "type": kind} for name, kind in pairs]
    for name, inner in nested.items():
        fields.append({"name": name, "type": "struct", "fields": cols(*inner)})
    return fields


def test_read_fields_keeps_names_types_and_nesting_only():
    fields = schemas.read_fields(
        [
            {"name": "id", "type": "BIGINT", "description": "key"},
            {"name": "note"},
            {"name": "address", "type": "struct", "fields": [{"name": "city", "type": "text"}]},
        ]
    )
    assert fields == [
        {"name": "id", "type": "BIGINT"},
        {"name": "note", "type": None},
        {"name": "address", "type": "struct", "fields": [{"name": "city", "type": "text"}]},
    ]


@pytest.mark.parametrize(
    ("value", "field", "rule"),
    [
        ("id", "fields", "array"),
        ([{"type": "int"}], "fields.0.name", "required"),
        ([{"name": ""}], "fields.0.name", "required"),
        (["id"], "fields.0", "object"),
        ([{"name": "id", "type": 3}], "fields.0.type", "string"),
        ([{"name": "a", "fields": "x"}], "fields.0.fields", "array"),
        ([{"name": "a", "fields": [{"name": 1}]}], "fields.0.fields.0.name", "required"),
        ([{"name": "id", "type": "x" * 100_000}], "fields.0.type", "max_length"),
        ([{"name": "x" * 1025}], "fields.0.name", "max_length"),
        ([{"name": "a"}, {"name": "a"}], "fields.1.name", "unique"),
        (
            [{"name": "s", "fields": [{"name": "a"}, {"name": "b"}, {"name": "a"}]}],
            "fields.0.fields.2.name",
            "unique",
        ),
    ],
)
def test_read_fields_names_what_is_malformed(value, field, rule):
    with pytest.raises(schemas.SchemaInvalid) as raised:
        schemas.read_fields(value)
    assert [(e.field, e.rule) for e in raised.value.errors] == [(field, rule)]


def test_read_fields_says_how_long_a_type_may_be():
    with pytest.raises(schemas.SchemaInvalid) as raised:
        schemas.read_fields([{"name": "id", "type": "x" * 100_000}])
    assert raised.value.errors[0].detail == "type is too long (at most 1024 characters)"


def test_read_fields_allows_the_same_name_at_different_levels():
    fields = schemas.read_fields(
        [
            {"name": "a"},
            {"name": "s", "fields": [{"name": "a"}]},
            {"name": "t", "fields": [{"name": "a"}]},
        ]
    )
    assert [c["name"] for c in fields] == ["a", "s", "t"]


def test_read_fields_bounds_size_and_depth(monkeypatch):
    monkeypatch.setattr(schemas, "MAX_FIELDS", 3)
    with pytest.raises(schemas.SchemaInvalid):
        schemas.read_fields(cols(*[(f"c{i}", "int") for i in range(4)]))
    deep: list = [{"name": "leaf", "type": "int"}]
    for level in range(schemas.MAX_DEPTH + 1):
        deep = [{"name": f"l{level}", "fields": deep}]
    with pytest.raises(schemas.SchemaInvalid):
        schemas.read_fields(deep)


def test_fingerprint_ignores_column_order_but_not_types_or_names():
    a = cols(("id", "int"), ("name", "text"))
    assert schemas.fingerprint(a) == schemas.fingerprint(list(reversed(a)))
    assert schemas.fingerprint(a) != schemas.fingerprint(cols(("id", "bigint"), ("name", "text")))
    assert schemas.fingerprint(a) != schemas.fingerprint(cols(("id", "int")))


@pytest.mark.parametrize(
    ("old", "new", "removed", "retyped", "added", "breaking"),
    [
        (cols(("id", "int"), ("x", "text")), cols(("id", "int")), ["x"], [], [], True),
        (
            cols(("id", "int")),
            cols(("id", "bigint")),
            [],
            [{"name": "id", "from": "int", "to": "bigint"}],
            [],
            True,
        ),
        (cols(("id", "int")), cols(("id", "int"), ("y", "text")), [], [], ["y"], False),
        (cols(("id", "INT")), cols(("id", " int ")), [], [], [], False),  # same type
        (cols(("id", "int")), [{"name": "id", "type": None}], [], [], [], False),  # unknown
        (
            cols(("id", "int"), address=[("city", "text"), ("zip", "text")]),
            cols(("id", "int"), address=[("city", "text")]),
            ["address.zip"],
            [],
            [],
            True,
        ),
    ],
)
def test_diff_tells_removed_retyped_and_added_columns(old, new, removed, retyped, added, breaking):
    difference = schemas.diff(old, new)
    assert difference.removed == removed
    assert difference.retyped == retyped
    assert difference.added == added
    assert difference.breaking is breaking
