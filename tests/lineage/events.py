"""OpenLineage events for tests, as plain JSON documents (spec 2-0-2)."""

from __future__ import annotations

from typing import Any

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACET_SCHEMA = "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json"
RUN_ID = "0195f6d2-9c4a-7b1e-8a55-3f1d2c4b5a60"
JOB = ("airflow://team-a", "orders.daily_rollup")


def dataset(namespace: str, name: str, **extra: Any) -> dict:
    return {"namespace": namespace, "name": name, **extra}


def run_event(
    event_type: str | None = "START",
    *,
    run_id: str = RUN_ID,
    job: tuple[str, str] = JOB,
    event_time: str = "2026-11-28T06:00:00Z",
    inputs: list[dict] | None = None,
    outputs: list[dict] | None = None,
    run_facets: dict | None = None,
    **extra: Any,
) -> dict:
    """A RunEvent; ``event_type`` None leaves ``eventType`` out."""
    event: dict[str, Any] = {
        "eventTime": event_time,
        "run": {"runId": run_id, **({"facets": run_facets} if run_facets is not None else {})},
        "job": {"namespace": job[0], "name": job[1]},
        "inputs": inputs or [],
        "outputs": outputs or [],
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        **extra,
    }
    if event_type is not None:
        event["eventType"] = event_type
    return event


def parent_facet(run_id: str, namespace: str, name: str) -> dict:
    return {
        "_producer": PRODUCER,
        "_schemaURL": FACET_SCHEMA,
        "run": {"runId": run_id},
        "job": {"namespace": namespace, "name": name},
    }


# The OpenLineage project's own sample events (OpenLineage/OpenLineage, Apache License 2.0,
# proxy/fluentd/events), copied here: the suite reads no file outside the repository.
SAMPLE_NO_RUN_ID = {
    "eventType": "COMPLETE",
    "eventTime": "2020-12-28T19:52:00.001+10:00",
    "run": {},
    "job": {"namespace": "my-scheduler-namespace", "name": "myjob"},
    "inputs": [
        {"namespace": "my-datasource-namespace", "name": "instance.schema.input-1"},
        {"namespace": "my-datasource-namespace", "name": "instance.schema.input-2"},
    ],
    "outputs": [{"namespace": "my-datasource-namespace", "name": "instance.schema.output-1"}],
    "producer": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client",
    "schemaURL": "https://openlineage.io/spec/1-0-1/OpenLineage.json#/definitions/RunEvent",
}

SAMPLE_INVALID_DATASET_FACET = {
    "eventType": "COMPLETE",
    "eventTime": "2020-12-28T19:52:00.001+10:00",
    "run": {"runId": "41fb5137-f0fd-4ee5-ba5c-56f8571d1bd7"},
    "job": {"namespace": "my-scheduler-namespace", "name": "myjob"},
    "inputs": [],
    "outputs": [
        {
            "namespace": "my-datasource-namespace",
            "name": "instance.schema.output-1",
            "facets": {
                "ownership": {
                    "_producer": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client",
                    "_schemaURL": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/spec/"
                    "OpenLineage.yml#whatever",
                    "owners": [{"no-name": "no-name-owner"}],
                }
            },
        }
    ],
    "producer": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client",
    "schemaURL": "https://openlineage.io/spec/1-0-1/OpenLineage.json#/definitions/RunEvent",
}

SAMPLE_SIMPLE = {
    "eventType": "COMPLETE",
    "eventTime": "2020-12-28T19:52:00.001+10:00",
    "run": {"runId": "41fb5137-f0fd-4ee5-ba5c-56f8571d1bd7"},
    "job": {"namespace": "my-scheduler-namespace", "name": "myjob"},
    "inputs": [
        {"namespace": "my-datasource-namespace", "name": "instance.schema.input-1"},
        {"namespace": "my-datasource-namespace", "name": "instance.schema.input-2"},
    ],
    "outputs": [{"namespace": "my-datasource-namespace", "name": "instance.schema.output-1"}],
    "producer": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client",
    "schemaURL": "https://openlineage.io/spec/1-0-1/OpenLineage.json#/definitions/RunEvent",
}

_FACET = {
    "_producer": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client",
    "_schemaURL": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/spec/"
    "OpenLineage.yml#MyCustomJobFacet",
}

# proxy/fluentd/events/event_full.json, abridged to one of each kind of facet it has.
SAMPLE_FULL = {
    "eventType": "COMPLETE",
    "eventTime": "2020-12-28T19:51:01.641Z",
    "run": {
        "runId": "ea041791-68bc-4ae1-bd89-4c8106a157e4",
        "facets": {
            "nominalTime": {
                **_FACET,
                "nominalStartTime": "2020-12-17T03:00:00.001Z",
                "nominalEndTime": "2020-12-17T04:00:00.001Z",
            },
            "parent": {
                **_FACET,
                "run": {"runId": "3f5e83fa-3480-44ff-99c5-ff943904e5e8"},
                "job": {"namespace": "my-scheduler-namespace", "name": "myjob.mytask"},
            },
            "additionalProp1": {**_FACET, "additionalProp1": {}},
        },
    },
    "job": {
        "namespace": "my-scheduler-namespace",
        "name": "myjob.mytask",
        "facets": {
            "documentation": {**_FACET, "description": "string"},
            "sourceCodeLocation": {**_FACET, "type": "git", "url": "http://example.com"},
            "sql": {
                **_FACET,
                "additionalPropExample": {"example": True},
                "query": "SELECT * FROM foo",
            },
            "additionalProp1": {**_FACET, "additionalProp1": {}},
        },
    },
    "inputs": [
        {
            "namespace": "my-datasource-namespace",
            "name": "instance.schema.table",
            "inputFacets": {
                "dataQualityMetrics": {
                    **_FACET,
                    "rowCount": 1000,
                    "bytes": 1048576,
                    "fileCount": 5,
                },
                "dataQualityAssertions": {
                    **_FACET,
                    "assertions": [
                        {"assertion": "row_count_equal_to", "success": True},
                        {"assertion": "no_null_values", "success": True, "column": "id"},
                    ],
                },
            },
            "facets": {
                "documentation": {
                    **_FACET,
                    "description": "canonical representation of entity Foo",
                },
                "schema": {
                    **_FACET,
                    "fields": [{"name": "column1", "type": "VARCHAR", "description": "string"}],
                },
                "dataSource": {**_FACET, "name": "string", "uri": "string"},
                "additionalProp1": {**_FACET, "additionalProp1": {}},
            },
        }
    ],
    "outputs": [
        {
            "namespace": "my-datasource-namespace",
            "name": "instance.schema.table",
            "outputFacets": {
                "outputStatistics": {**_FACET, "rowCount": 2000, "size": 2097152, "fileCount": 5}
            },
            "facets": {"documentation": {**_FACET, "description": "Foo"}},
        }
    ],
    "producer": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client",
    "schemaURL": "https://openlineage.io/spec/1-0-5/OpenLineage.json#/definitions/RunEvent",
}

# spec/tests/example_full_event.json: a RunEvent that also carries a stray "dataset".
SAMPLE_SPEC_FULL = {
    "eventTime": "2023-07-17T10:54:22.355067Z",
    "eventType": "COMPLETE",
    "inputs": [],
    "job": {
        "facets": {
            "sql": {"query": "SELECT 1", "_producer": "http://123", "_schemaURL": "http://123"}
        },
        "name": "dbt",
        "namespace": "food_delivery",
    },
    "outputs": [],
    "producer": "https://github.com/OpenLineage/OpenLineage/tree/0.30.0/integration/airflow",
    "run": {"facets": {}, "runId": "f69a6e9b-9bac-3c9a-9cf6-eacb70ecc9a9"},
    "dataset": {"namespace": "123", "name": "1"},
    "schemaURL": "https://openlineage.io/spec/1-0-5/OpenLineage.json#/definitions/RunEvent",
}
