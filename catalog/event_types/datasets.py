"""``dataset.late`` and ``dataset.recovered`` (``catalog.freshness``) and
``dataset.version_promoted`` (``catalog.restatements``)."""

from __future__ import annotations

from .common import (
    DATE_TIME,
    EventType,
    Schema,
    dataset_ref,
    envelope,
    example,
    integer,
    nullable,
    obj,
    string,
)

LATE = "dataset.late"
RECOVERED = "dataset.recovered"
VERSION_PROMOTED = "dataset.version_promoted"


def _lateness(fields: dict[str, Schema]) -> Schema:
    return obj(
        {
            "dataset": dataset_ref(with_id=False),
            "owner": string("the owner team's slug"),
            "partition": string("the partition that is (was) late"),
            "deadline_at": DATE_TIME,
            "late_at": {**DATE_TIME, "description": "the deadline plus grace"},
            **fields,
        }
    )


_DATASET = {"namespace": "s3://lake", "name": "raw/orders"}
_LATE_EXAMPLE = {
    "dataset": _DATASET,
    "owner": "orders",
    "partition": "2026-11-28",
    "deadline_at": "2026-11-29T06:00:00Z",
    "late_at": "2026-11-29T06:30:00Z",
}

EVENT_TYPES = (
    EventType(
        name=LATE,
        audience=("subscribers", "owners"),
        description=(
            "A partition was not ready by its deadline plus grace (the dataset's freshness "
            "SLA). Sent once per dataset and partition; dataset.recovered follows when it lands."
        ),
        schema=envelope(
            LATE,
            _lateness({"late_seconds": integer("seconds past late_at when it was judged")}),
            title="Dataset late",
        ),
        example=example(LATE, {**_LATE_EXAMPLE, "late_seconds": 12}, at="2026-11-29T06:30:12Z"),
    ),
    EventType(
        name=RECOVERED,
        audience=("subscribers", "owners"),
        description="A partition that was late became ready.",
        schema=envelope(
            RECOVERED,
            _lateness(
                {
                    "recovered_at": DATE_TIME,
                    "late_by_seconds": integer("from late_at to recovered_at"),
                }
            ),
            title="Dataset recovered",
        ),
        example=example(
            RECOVERED,
            {
                **_LATE_EXAMPLE,
                "recovered_at": "2026-11-29T07:02:41Z",
                "late_by_seconds": 1961,
            },
            at="2026-11-29T07:02:41Z",
        ),
    ),
    EventType(
        name=VERSION_PROMOTED,
        audience=("subscribers",),
        description=(
            "A restatement was promoted: every partition of its range now serves its version, "
            "all at once. One notice for the whole range (no partition.restated per partition)."
        ),
        schema=envelope(
            VERSION_PROMOTED,
            obj(
                {
                    "restatement_id": integer(),
                    "dataset": dataset_ref(with_id=True),
                    "version": string(),
                    "code_version": string("what produced it; empty when not given"),
                    "first_partition": string(),
                    "last_partition": string("inclusive"),
                    "promoted_at": DATE_TIME,
                    "partitions": {
                        "type": "array",
                        "items": obj(
                            {
                                "partition": string(),
                                "version": string(),
                                "code_version": string(),
                                "previous_version": nullable(string()),
                                "previous_code_version": nullable(string()),
                            }
                        ),
                    },
                }
            ),
            title="Dataset version promoted",
        ),
        example=example(
            VERSION_PROMOTED,
            {
                "restatement_id": 7,
                "dataset": {"id": 42, **_DATASET},
                "version": "v2-dedup",
                "code_version": "f00ba47",
                "first_partition": "2026-11-01",
                "last_partition": "2026-11-02",
                "promoted_at": "2026-11-29T09:15:00Z",
                "partitions": [
                    {
                        "partition": key,
                        "version": "v2-dedup",
                        "code_version": "f00ba47",
                        "previous_version": "v1",
                        "previous_code_version": None,
                    }
                    for key in ("2026-11-01", "2026-11-02")
                ],
            },
            at="2026-11-29T09:15:00Z",
        ),
    ),
)
