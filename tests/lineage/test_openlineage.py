"""The OpenLineage core checks (lineage.openlineage): pure, no database."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime

import pytest

from lineage import openlineage
from lineage.errors import EventInvalid, EventTimeInvalid
from tests.lineage import events as ev


def _fields(exc: pytest.ExceptionInfo) -> list[tuple[str, str]]:
    return [(e.field, e.rule) for e in exc.value.errors]


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (ev.run_event("START"), openlineage.RUN),
        (ev.run_event(None), openlineage.RUN),  # a RunEvent without eventType
        (ev.SAMPLE_SPEC_FULL, openlineage.RUN),  # run and job win over a stray dataset
        (
            {
                "eventTime": "2026-11-28T06:00:00Z",
                "job": {"namespace": "dbt-sales", "name": "orders"},
                "inputs": [ev.dataset("postgres://db:5432", "shop.public.orders")],
                "producer": ev.PRODUCER,
                "schemaURL": ev.SCHEMA_URL,
            },
            openlineage.JOB,
        ),
        (
            {
                "eventTime": "2026-11-28T06:00:00Z",
                "dataset": ev.dataset("s3://lake", "raw/orders"),
                "producer": ev.PRODUCER,
                "schemaURL": ev.SCHEMA_URL,
            },
            openlineage.DATASET,
        ),
    ],
)
def test_parse_event_tells_the_kind_as_the_spec_oneof_does(payload, kind):
    parsed = openlineage.parse_event(payload)
    assert parsed.kind == kind
    assert (parsed.run_id is not None) == (kind == openlineage.RUN)


SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/"


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (  # a JobEvent that also sends an eventType, as some producers do
            {
                "eventTime": "2026-11-28T06:00:00Z",
                "eventType": "COMPLETE",
                "job": {"namespace": "dbt-sales", "name": "orders"},
                "producer": ev.PRODUCER,
                "schemaURL": SPEC + "JobEvent",
            },
            openlineage.JOB,
        ),
        (
            {
                "eventTime": "2026-11-28T06:00:00Z",
                "eventType": "OTHER",
                "dataset": ev.dataset("s3://lake", "raw/orders"),
                "producer": ev.PRODUCER,
                "schemaURL": SPEC + "DatasetEvent",
            },
            openlineage.DATASET,
        ),
        (ev.run_event("START", schemaURL=SPEC + "RunEvent"), openlineage.RUN),
    ],
)
def test_parse_event_reads_the_kind_from_the_schema_url_fragment_as_marquez_does(payload, kind):
    parsed = openlineage.parse_event(payload)
    assert parsed.kind == kind
    assert parsed.event_type == (None if kind != openlineage.RUN else "START")


def test_parse_event_reads_a_run_event_core_and_normalises_dataset_identities():
    payload = ev.run_event(
        "COMPLETE",
        inputs=[ev.dataset("POSTGRESQL://DB.example:5432", "Shop.Public.Orders")],
        outputs=[ev.dataset("s3://Lake", "Curated/Orders")],
    )
    parsed = openlineage.parse_event(payload)
    assert parsed.event_type == "COMPLETE"
    assert parsed.run_id == uuid.UUID(ev.RUN_ID)
    assert (parsed.job_namespace, parsed.job_name) == ev.JOB
    assert parsed.event_time == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    assert parsed.event_time_assumed_utc is False
    [read] = parsed.inputs
    assert (read.namespace, read.name) == ("postgres://db.example:5432", "shop.public.orders")
    assert (read.received_namespace, read.received_name) == (
        "POSTGRESQL://DB.example:5432",
        "Shop.Public.Orders",
    )
    [written] = parsed.outputs
    assert (written.namespace, written.name) == ("s3://lake", "Curated/Orders")  # path case kept
    assert parsed.problems == ()


def _without(path: str) -> dict:
    payload = ev.run_event("START", inputs=[ev.dataset("s3://lake", "raw/orders")])
    *parents, last = path.split(".")
    target = payload
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    del target[last]
    return payload


def _with(path: str, value) -> dict:
    payload = ev.run_event("START", inputs=[ev.dataset("s3://lake", "raw/orders")])
    *parents, last = path.split(".")
    target = payload
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[last] = value
    return payload


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (_without("run.runId"), [("run.runId", "required")]),
        (_with("run.runId", ""), [("run.runId", "required")]),
        (_with("run.runId", "not-a-uuid"), [("run.runId", "uuid")]),
        (_with("run.runId", 42), [("run.runId", "uuid")]),
        (_without("run"), [("run.runId", "required")]),
        (_with("run", "abc"), [("run", "object")]),
        (_without("job.namespace"), [("job.namespace", "required")]),
        (_with("job.name", ""), [("job.name", "required")]),
        (_with("job.name", 7), [("job.name", "string")]),
        (_with("job.name", "x" * 1025), [("job.name", "max_length")]),
        (_without("job"), [("job.namespace", "required"), ("job.name", "required")]),
        (_without("eventTime"), [("eventTime", "required")]),
        (_with("eventTime", ""), [("eventTime", "required")]),
        (_with("eventType", "FINISHED"), [("eventType", "invalid_choice")]),
        (_without("inputs.0.namespace"), [("inputs.0.namespace", "required")]),
        (_with("inputs.0.name", ""), [("inputs.0.name", "required")]),
        (_with("inputs", {"a": 1}), [("inputs", "array")]),
        (_with("outputs", ["s3://lake/raw"]), [("outputs.0", "object")]),
        (
            {},
            [
                ("eventTime", "required"),
                ("run.runId", "required"),
                ("job.namespace", "required"),
                ("job.name", "required"),
            ],
        ),
        ([ev.run_event()], [("body", "object")]),
        (
            {"eventTime": "2026-11-28T06:00:00Z", "dataset": {"namespace": "s3://lake"}},
            [("dataset.name", "required")],
        ),
    ],
)
def test_parse_event_refuses_missing_or_malformed_identifiers_naming_each(payload, expected):
    with pytest.raises(EventInvalid) as exc:
        openlineage.parse_event(payload)
    assert exc.value.status == 422
    assert _fields(exc) == expected


def test_parse_event_refuses_the_sample_event_without_a_run_id():
    with pytest.raises(EventInvalid) as exc:
        openlineage.parse_event(ev.SAMPLE_NO_RUN_ID)
    assert _fields(exc) == [("run.runId", "required")]


@pytest.mark.parametrize(
    ("text", "expected", "assumed"),
    [
        ("2026-11-28T06:12:03Z", datetime(2026, 11, 28, 6, 12, 3, tzinfo=UTC), False),
        ("2026-11-28t06:12:03z", datetime(2026, 11, 28, 6, 12, 3, tzinfo=UTC), False),
        (
            "2020-12-28T19:52:00.001+10:00",
            datetime(2020, 12, 28, 9, 52, 0, 1000, tzinfo=UTC),
            False,
        ),
        ("2026-03-29T02:30:00-0500", datetime(2026, 3, 29, 7, 30, tzinfo=UTC), False),
        (
            "2026-11-28T06:12:03.123456789Z",
            datetime(2026, 11, 28, 6, 12, 3, 123456, tzinfo=UTC),
            False,
        ),
        ("2026-11-28 06:12:03+01", datetime(2026, 11, 28, 5, 12, 3, tzinfo=UTC), False),
        ("2026-11-28T06:12:03", datetime(2026, 11, 28, 6, 12, 3, tzinfo=UTC), True),
        ("2026-11-28T06:12", datetime(2026, 11, 28, 6, 12, tzinfo=UTC), True),
    ],
)
def test_parse_event_time_reads_rfc3339_and_a_missing_offset_as_utc(text, expected, assumed):
    assert openlineage.parse_event_time(text) == (expected, assumed)
    parsed = openlineage.parse_event(ev.run_event(event_time=text))
    assert (parsed.event_time, parsed.event_time_assumed_utc) == (expected, assumed)


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2026-11-28",
        "2026-13-01T00:00:00Z",
        "2026-11-28T25:00:00Z",
        "2026-11-28T06:00:00+25:00",
        "2026-W48-6T06:00:00Z",
        " 2026-11-28T06:00:00Z",
        1764309600,
        ["2026-11-28T06:00:00Z"],
        "0001-01-01T00:00:00+01:00",
    ],
)
def test_parse_event_refuses_a_bad_event_time_with_400_naming_it(value):
    with pytest.raises(EventTimeInvalid) as exc:
        openlineage.parse_event(ev.run_event(event_time=value))
    assert exc.value.status == 400
    assert _fields(exc) == [("eventTime", "date_time")]


def test_parse_event_flags_the_sample_malformed_standard_facet_and_keeps_the_core():
    parsed = openlineage.parse_event(ev.SAMPLE_INVALID_DATASET_FACET)
    assert [(p.field, p.rule) for p in parsed.problems] == [
        ("outputs.0.facets.ownership.owners.0.name", "required")
    ]
    [output] = parsed.outputs
    assert output.name == "instance.schema.output-1"


@pytest.mark.parametrize("sample", [ev.SAMPLE_FULL, ev.SAMPLE_SIMPLE, ev.SAMPLE_SPEC_FULL])
def test_parse_event_accepts_the_valid_samples_without_problems(sample):
    parsed = openlineage.parse_event(sample)
    assert parsed.problems == ()


def test_parse_event_reads_the_parent_run_facet():
    parsed = openlineage.parse_event(ev.SAMPLE_FULL)
    assert parsed.parent == openlineage.ParentRun(
        run_id=uuid.UUID("3f5e83fa-3480-44ff-99c5-ff943904e5e8"),
        job_namespace="my-scheduler-namespace",
        job_name="myjob.mytask",
    )


@pytest.mark.parametrize(
    ("facets", "expected"),
    [
        (
            {"parent": {"run": {"runId": "nope"}, "job": {"namespace": "a"}}},
            [("run.facets.parent.run.runId", "uuid"), ("run.facets.parent.job.name", "required")],
        ),
        (
            {"nominalTime": {"nominalStartTime": "soon"}},
            [("run.facets.nominalTime.nominalStartTime", "date_time")],
        ),
        (
            {"errorMessage": {"message": "boom"}},
            [("run.facets.errorMessage.programmingLanguage", "required")],
        ),
        ({"myCustomFacet": "just a string"}, [("run.facets.myCustomFacet", "object")]),
        ({"myCustomFacet": {"anything": [1, 2, {"goes": None}]}}, []),
    ],
)
def test_parse_event_flags_malformed_run_facets_and_ignores_unknown_ones(facets, expected):
    parsed = openlineage.parse_event(ev.run_event(run_facets=facets))
    assert [(p.field, p.rule) for p in parsed.problems] == expected
    assert parsed.parent is None


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            {"job": {"namespace": "a", "name": "b", "facets": {"sql": {"query": ""}}}},
            "job.facets.sql.query",
        ),
        ({"job": {"namespace": "a", "name": "b", "facets": []}}, "job.facets"),
        (
            {
                "inputs": [
                    ev.dataset(
                        "s3://l",
                        "x",
                        inputFacets={"dataQualityAssertions": {"assertions": [{"assertion": "a"}]}},
                    )
                ]
            },
            "inputs.0.inputFacets.dataQualityAssertions.assertions.0.success",
        ),
        (
            {
                "outputs": [
                    ev.dataset(
                        "s3://l",
                        "x",
                        facets={"symlinks": {"identifiers": [{"namespace": "a", "name": "b"}]}},
                    )
                ]
            },
            "outputs.0.facets.symlinks.identifiers.0.type",
        ),
        (
            {"outputs": [ev.dataset("s3://l", "x", facets={"schema": {"fields": "id,name"}})]},
            "outputs.0.facets.schema.fields",
        ),
    ],
)
def test_parse_event_flags_malformed_job_and_dataset_facets(patch, expected):
    parsed = openlineage.parse_event({**ev.run_event(), **patch})
    assert [p.field for p in parsed.problems] == [expected]


@pytest.mark.parametrize(
    ("namespace", "name", "field", "rule"),
    [
        ("s3://lake", "raw/my orders.csv", "inputs.0.name", "whitespace"),
        ("123", "1", "inputs.0.namespace", "format"),
        ("s3://lake", "x" * 1025, "inputs.0.name", "max_length"),
    ],
)
def test_parse_event_keeps_a_dataset_breaking_naming_rules_out_of_usage_flagged(
    namespace, name, field, rule
):
    payload = ev.run_event(inputs=[ev.dataset(namespace, name), ev.dataset("s3://lake", "ok")])
    parsed = openlineage.parse_event(payload)
    assert [(p.field, p.rule) for p in parsed.problems] == [(field, rule)]
    assert [ref.name for ref in parsed.inputs] == ["ok"]


def test_event_fingerprint_ignores_key_order_and_spacing_but_not_content():
    payload = ev.run_event("START", inputs=[ev.dataset("s3://lake", "raw/orders")])
    reordered = dict(reversed(list(copy.deepcopy(payload).items())))
    assert openlineage.event_fingerprint(payload) == openlineage.event_fingerprint(reordered)
    changed = ev.run_event("COMPLETE", inputs=[ev.dataset("s3://lake", "raw/orders")])
    assert openlineage.event_fingerprint(payload) != openlineage.event_fingerprint(changed)
