"""``partition.ready``, ``partition.restated`` and ``partition.failed``: what a readiness
event tells subscribers (built by ``catalog.services.publish_steps.readiness_notice``)."""

from __future__ import annotations

from typing import Any

from .common import (
    DATE_TIME,
    EventType,
    Schema,
    boolean,
    dataset_ref,
    envelope,
    example,
    nullable,
    obj,
    string,
)

READY = "partition.ready"
RESTATED = "partition.restated"
FAILED = "partition.failed"


def _data(*, state: str, restated: bool = False, backfill: bool = False) -> Schema:
    fields: dict[str, Schema] = {
        "dataset": dataset_ref(with_id=False),
        "partition": string("partition key in the dataset's format; empty when unpartitioned"),
        "logical_start": nullable(DATE_TIME),
        "logical_end": nullable(DATE_TIME),
        "version": nullable(string("the producer's label for this content")),
        "previous_version": (
            nullable(string("the version readers saw before")) if restated else {"type": "null"}
        ),
        "state": {"const": state},
        "ready_at": DATE_TIME if state == "ready" else {"type": "null"},
        "manifest": nullable({"type": "object"}),
        "metadata": {"type": "object", "description": "what the producer sent, as sent"},
        "detected_by": string(enum=["event", "poll", "lineage"]),
        "missed_event": boolean("the poll found it and the producer's event never came"),
    }
    if backfill:
        fields["backfill"] = boolean(
            "a newer partition of the dataset was already ready when this one became ready"
        )
    return obj(fields)


_COMMON_EXAMPLE: dict[str, Any] = {
    "dataset": {"namespace": "s3://lake", "name": "raw/orders"},
    "partition": "2026-11-28",
    "logical_start": "2026-11-28T00:00:00Z",
    "logical_end": "2026-11-29T00:00:00Z",
    "version": "run-2026-11-29T05:40",
    "previous_version": None,
    "state": "ready",
    "ready_at": "2026-11-29T06:00:03Z",
    "manifest": {"expected_files": 12, "row_count": 48211},
    "metadata": {"code_version": "a1b2c3d"},
    "detected_by": "event",
    "missed_event": False,
}

EVENT_TYPES = (
    EventType(
        name=READY,
        audience=("subscribers",),
        description=(
            "A partition became ready: its current revision is complete and readers see it. "
            "backfill is true when a newer partition of the dataset was already ready then "
            "(an old period filled in late); a subscription with newest_only is not told "
            "backfills. An unpartitioned dataset's new version is a partition.ready too."
        ),
        schema=envelope(READY, _data(state="ready", backfill=True), title="Partition ready"),
        example=example(READY, {**_COMMON_EXAMPLE, "backfill": False}),
    ),
    EventType(
        name=RESTATED,
        audience=("subscribers",),
        description=(
            "A new version of a partition that was already ready became current: re-read it. "
            "previous_version is what readers saw before. A subscription with newest_only is "
            "told only restatements of the newest ready partition."
        ),
        schema=envelope(RESTATED, _data(state="ready", restated=True), title="Partition restated"),
        example=example(
            RESTATED,
            {**_COMMON_EXAMPLE, "version": "fix-dedup", "previous_version": "run-2026-11-29T05:40"},
        ),
    ),
    EventType(
        name=FAILED,
        audience=("subscribers",),
        description=(
            "The producer reported that a partition failed. A ready revision never becomes "
            "failed: a failed new version leaves the last good one current."
        ),
        schema=envelope(FAILED, _data(state="failed"), title="Partition failed"),
        example=example(
            FAILED,
            {**_COMMON_EXAMPLE, "state": "failed", "ready_at": None, "manifest": None},
        ),
    ),
)
