"""The value sent at an input error's field (``httpkit.sent_values``), and the validation
problem the exception handler renders with it (``httpkit.exceptions``): table-driven
rules, then a bounded property test over arbitrary request data and error details.

``TIDEMARK_PROPERTY_EXAMPLES`` runs more examples.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.http import QueryDict
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ErrorDetail, ValidationError

from catalog.declarations import InvalidDeclaration
from httpkit import sent_values as sv
from httpkit.exceptions import _flatten, problem_exception_handler
from problems import FieldError, ValidationProblem

EXAMPLES = int(os.environ.get("TIDEMARK_PROPERTY_EXAMPLES", "300"))
bounded = settings(max_examples=EXAMPLES, deadline=None)


# --- paths and lookups ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("url", ("url",)),
        ("endpoints.0.url", ("endpoints", "0", "url")),
        ("datasets[2].sla_cron", ("datasets", "2", "sla_cron")),
        ("Idempotency-Key", ("Idempotency-Key",)),
    ],
)
def test_path_of_reads_dotted_and_bracketed_paths(field, path):
    assert sv.path_of(field) == path


DATA = {"endpoints": [{"url": "https://a.example"}, {"url": "htp:/x"}], "tags": {"0": "zero"}}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("endpoints", 1, "url"), "htp:/x"),
        (("endpoints", "1", "url"), "htp:/x"),
        (("endpoints", 2, "url"), sv.MISSING),
        (("endpoints", "-1", "url"), sv.MISSING),
        (("endpoints", "url"), sv.MISSING),
        (("tags", 0), "zero"),  # a DictField's errors may be keyed by an int
        (("tags", "0"), "zero"),
        (("endpoints", 0, "url", "x"), sv.MISSING),
        ((), DATA),
    ],
)
def test_sent_value_walks_mappings_and_lists(path, expected):
    assert sv.sent_value(DATA, path) == expected


def test_sent_value_reads_a_query_as_drf_reads_it():
    query = QueryDict("state=late&state=dead&endpoint_id=abc")
    assert sv.sent_value(query, ("endpoint_id",)) == "abc"
    assert sv.sent_value(query, ("state",)) == ["late", "dead"]
    assert sv.sent_value(query, ("state", 1)) == "dead"
    assert sv.sent_value(query, ("page_size",)) is sv.MISSING


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        (("endpoint_secret",), True),
        (("channels", 0, "api_key"), True),
        (("ping_key",), True),
        (("Authorization",), True),
        (("token",), True),
        (("refresh-token",), True),
        (("password",), True),
        (("url",), False),
        (("secretary",), False),
        (("keys", 0), False),
        (("tokens_used",), False),
    ],
)
def test_is_secret_path_by_any_segments_name(path, secret):
    assert sv.is_secret_path(path) is secret


# --- how a value is shown and named ----------------------------------------------------------


def test_shown_value_cuts_a_long_string_as_choice_detail_does_and_hides_url_credentials():
    assert sv.shown_value("x" * 101) == "x" * 100 + "..."
    assert sv.shown_value("x" * 100) == "x" * 100
    assert sv.shown_value("https://me:hunter2@hooks.example/a@b") == "https://***@hooks.example/a@b"
    assert sv.shown_value(0) == 0 and sv.shown_value(None) is None


@pytest.mark.parametrize(
    ("detail", "value", "named"),
    [
        ('"weekly" is not a valid choice for partitioning; choose one of: daily', "weekly", True),
        ("'yesterday' is not a date-time", "yesterday", True),
        ("Enter a valid URL.", "htp:/x", False),
        ("Ensure this value is less than or equal to 100.", 10, False),
        ("Ensure this value is less than or equal to 100.", 100, True),
        ("Ensure this value is greater than or equal to 0.", -5, False),
        ("This field may not be null.", None, True),
        ("Must be a valid boolean.", True, False),
        ("This field may not be blank.", "", True),
        (f"{'a' * 60!r} is not a date-time", "a" * 200, True),
    ],
)
def test_names_value_finds_the_value_as_a_whole_token(detail, value, named):
    assert sv.names_value(detail, value) is named


@pytest.mark.parametrize(
    ("detail", "value", "named"),
    [
        ("Enter a valid URL.", "htp:/x", "Enter a valid URL (got 'htp:/x')."),
        ("must be an integer from 1 to 500", "0", "must be an integer from 1 to 500 (got '0')"),
        ("Ensure this value is greater than or equal to 1.", 0, "Ensure this value is "
         "greater than or equal to 1 (got 0)."),
        ("Must be a valid boolean.", None, "Must be a valid boolean (got null)."),
        ("Not a valid string.", False, "Not a valid string (got false)."),
        ("A valid number is required.", 1.5, "A valid number is required (got 1.5)."),
    ],
)  # fmt: skip
def test_detail_naming_puts_the_value_before_the_final_period(detail, value, named):
    assert sv.detail_naming(detail, value) == named


@pytest.mark.parametrize(
    ("path", "rule", "sources", "value"),
    [
        (("url",), "invalid", ({"url": "htp:/x"}, None), "htp:/x"),
        (("url",), "required", ({"url": None}, None), sv.MISSING),
        (("endpoint_secret",), "max_length", ({"endpoint_secret": "s3cr3t"}, None), sv.MISSING),
        (("tags",), "not_a_list", ({"tags": {"a": 1}}, None), sv.MISSING),
        (("limit",), "invalid", (None, QueryDict("limit=x")), "x"),
        (("limit",), "invalid", ({"limit": "x"}, QueryDict("limit=x")), "x"),
        # Found in the body and the query with different values: which was refused?
        (("limit",), "invalid", ({"limit": 5}, QueryDict("limit=x")), sv.MISSING),
        ((), "invalid", ("text", None), sv.MISSING),
        (("n",), "invalid", ({"n": None}, None), None),
    ],
)
def test_value_member(path, rule, sources, value):
    assert sv.value_member(path, rule, sources) == value


# --- the rendered problem ----------------------------------------------------------------------


def _rendered(exc: Exception, data: Any = None, query: str | None = None) -> dict:
    class Request:
        path = "/api/v1/things"
        GET = QueryDict(query)

    return problem_exception_handler(exc, {"request": Request(), "data": data}).data


def test_a_validation_problem_made_by_of_lists_its_errors_again_with_their_values():
    problem = ValidationProblem.of(
        "Some monitor fields are not valid.",
        [FieldError("grace_seconds", "must be at most 2678400", "range"), FieldError("x", "?")],
    )
    doc = _rendered(problem, {"grace_seconds": 9_999_999})
    assert doc["errors"] == [
        {
            "field": "grace_seconds",
            "rule": "range",
            "detail": "must be at most 2678400 (got 9999999)",
            "value": 9_999_999,
        },
        {"field": "x", "rule": "invalid", "detail": "?"},
    ]
    assert doc["detail"] == (
        "Some monitor fields are not valid: grace_seconds: must be at most 2678400 "
        "(got 9999999); x: ?"
    )


def test_a_validation_problem_with_one_error_names_its_value_in_its_own_words():
    problem = ValidationProblem(
        "page_size must be an integer from 1 to 500",
        errors=[FieldError("page_size", "must be an integer from 1 to 500", "range")],
    )
    doc = _rendered(problem, query="page_size=0")
    assert doc["detail"] == "page_size must be an integer from 1 to 500 (got '0')"
    assert doc["errors"][0]["value"] == "0"


def test_a_detail_ending_with_an_errors_detail_ends_with_its_new_one():
    problem = InvalidDeclaration(
        "The declaration has 2 error(s); the first at datasets[0].sla_grace_seconds: "
        "must be from 0 to 2678400",
        errors=[
            FieldError("datasets[0].sla_grace_seconds", "must be from 0 to 2678400", "range"),
            FieldError("datasets[1].owner", "unknown field", "unknown"),
        ],
    )
    doc = _rendered(problem, {"datasets": [{"sla_grace_seconds": -5}, {"owner": "x"}]})
    assert doc["code"] == "invalid_declaration"
    assert doc["detail"] == (
        "The declaration has 2 error(s); the first at datasets[0].sla_grace_seconds: "
        "must be from 0 to 2678400 (got -5)"
    )
    assert [e["value"] for e in doc["errors"]] == [-5, "x"]


def test_a_value_the_detail_already_names_leaves_both_details_as_they_were():
    detail = "'x' must be https"
    problem = ValidationProblem(f"target: {detail}", errors=[FieldError("target", detail)])
    doc = _rendered(problem, {"target": "x"})
    assert doc["detail"] == f"target: {detail}"
    assert doc["errors"] == [{"field": "target", "rule": "invalid", "detail": detail, "value": "x"}]


# --- the property ------------------------------------------------------------------------------

# Keys drawn from one small alphabet, so that error paths often lead to data and sometimes
# do not; "token" and "api_key" name secrets.
KEYS = st.sampled_from(["a", "b", "url", "0", "1", "token", "api_key"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=130),
)
DATA_TREES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=12,
)
RULES = st.sampled_from(["invalid", "required", "min_value", "max_length", "unknown"])
ERROR_LEAVES = st.lists(
    st.builds(ErrorDetail, st.text(max_size=20), code=RULES), min_size=1, max_size=2
)
DETAIL_TREES = st.recursive(
    ERROR_LEAVES,
    lambda children: st.one_of(
        st.lists(st.one_of(children, st.just({})), min_size=1, max_size=3),
        # A ListField's errors are keyed by int, a serializer's by name.
        st.dictionaries(
            st.one_of(KEYS, st.integers(0, 2), st.just("non_field_errors")), children, max_size=4
        ),
    ),
    max_leaves=8,
)


def _at(data: Any, field: str) -> Any:
    """The oracle: ``data`` at the dotted ``field``, or MISSING (JSON keys are text)."""
    node = data
    for segment in field.split("."):
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return sv.MISSING
    return node


@bounded
@given(data=DATA_TREES, detail=DETAIL_TREES)
def test_every_value_is_what_was_sent_at_its_path(data, detail):
    doc = _rendered(ValidationError(detail), data)
    flat = [error for _, error in _flatten(detail)]
    assert [(e["field"], e["rule"]) for e in doc.get("errors", [])] == [
        (e["field"], e["rule"]) for e in flat
    ]
    for error, raw in zip(doc.get("errors", []), flat, strict=True):
        sent = _at(data, error["field"]) if error["field"] != "body" else sv.MISSING
        secret = {"token", "api_key"} & set(error["field"].split("."))
        if sent is sv.MISSING or not sv.is_scalar(sent) or error["rule"] == "required" or secret:
            assert "value" not in error and error["detail"] == raw["detail"]
            continue
        # As shown_value shows it (cut at 100 characters, URL credentials hidden).
        assert error["value"] == sv.shown_value(sent) and type(error["value"]) is type(sent)
        if sv.names_value(raw["detail"], error["value"]):
            assert error["detail"] == raw["detail"]
        else:
            assert error["detail"] == sv.detail_naming(raw["detail"], error["value"])
            assert f"(got {sv.value_text(error['value'])})" in error["detail"]
    listed = "; ".join(f"{e['field']}: {e['detail']}" for e in doc.get("errors", []))
    assert doc["detail"] == listed[:1000]
