"""OpenLineage as a dataset's completion signal: which partition of an output dataset a
COMPLETE or FAIL run event is about. Pure: the event's JSON and the dataset's
partitioning in, a partition key or a ``PartitionNotStated`` out.

OpenLineage 2-0-2 has no standard facet naming the partition a run wrote (the dataset
partitioning proposal describes how a dataset is partitioned, not which part a run
wrote), so the partition is read, first found first:

1. **The custom ``tidemark_partition`` facet** of the output dataset, in its
   ``outputFacets`` (about this run's write) or its ``facets``:
   ``{"_producer": ..., "_schemaURL": ..., "key": "2026-11-28"}``; ``key`` is a
   partition key in the dataset's format (checked by the publish, as any publish's).
2. **The run's standard ``nominalTime`` facet**: the period of the dataset's
   partitioning, cut in its partition time zone, that contains ``nominalStartTime``;
   when ``nominalEndTime`` is given it must be that period's end, so a run whose nominal
   interval is not exactly one partition (a daily run of an hourly dataset, a UTC day
   against a Europe/Berlin one) publishes nothing rather than guess.
3. **An unpartitioned dataset** has one partition, ``""``; nothing needs stating.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from schedules import periods

from .errors import EventTimeInvalid
from .openlineage import parse_event_time

PARTITION_FACET = "tidemark_partition"


class PartitionNotStated(ValueError):
    """The event does not say which partition it is about; ``rule`` says why
    (``partition_facet``, ``nominal_time``, ``no_partition``)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def output_partition(
    output: Any, run_facets: Any, *, partitioning: str, time_zone: str
) -> tuple[str, str]:
    """The partition key of one output dataset of a run event, and where it was read.

    Args:
        output: the output dataset's JSON as the event carried it (``outputs.N``).
        run_facets: the event's ``run.facets`` JSON (may be anything, or None).
        partitioning: the catalog dataset's (``none``, ``hourly``, ``daily``, ``monthly``).
        time_zone: its ``partition_timezone`` (IANA).

    Returns:
        ``(key, source)``; ``source`` is ``tidemark_partition``, ``nominalTime`` or
        ``unpartitioned``.

    Raises:
        PartitionNotStated: a malformed ``tidemark_partition`` facet, a ``nominalTime``
            interval that is not one period, or no partition stated at all.
    """
    facet = _partition_facet(output)
    if facet is not None:
        key = facet.get("key") if isinstance(facet, dict) else None
        if not isinstance(key, str):
            raise PartitionNotStated(
                "partition_facet",
                f'the {PARTITION_FACET} facet must be an object with a string "key"',
            )
        return key, PARTITION_FACET
    if partitioning == periods.NONE:
        return "", "unpartitioned"
    nominal = run_facets.get("nominalTime") if isinstance(run_facets, dict) else None
    if not isinstance(nominal, dict) or "nominalStartTime" not in nominal:
        raise PartitionNotStated(
            "no_partition",
            f"no {PARTITION_FACET} output facet and no nominalTime run facet: "
            "the partition is not stated",
        )
    return _nominal_period(nominal, partitioning, time_zone), "nominalTime"


def _partition_facet(output: Any) -> Any:
    if not isinstance(output, dict):
        return None
    for key in ("outputFacets", "facets"):
        facets = output.get(key)
        if isinstance(facets, dict) and PARTITION_FACET in facets:
            return facets[PARTITION_FACET]
    return None


def _nominal_period(nominal: dict, partitioning: str, time_zone: str) -> str:
    start = _instant(nominal.get("nominalStartTime"), "nominalStartTime")
    period = periods.period_containing(start, partitioning, time_zone)
    if start != period.start:
        raise PartitionNotStated(
            "nominal_time",
            f"nominalStartTime {start.isoformat()} is not the start of a {partitioning} "
            f"partition in {time_zone} ({period.key} starts {period.start.isoformat()})",
        )
    if nominal.get("nominalEndTime") is not None:
        end = _instant(nominal["nominalEndTime"], "nominalEndTime")
        if end != period.end:
            raise PartitionNotStated(
                "nominal_time",
                f"the nominal interval is not one {partitioning} partition in {time_zone}: "
                f"{period.key} ends {period.end.isoformat()}, nominalEndTime is "
                f"{end.isoformat()}",
            )
    return period.key


def _instant(value: Any, field: str) -> datetime:
    try:
        return parse_event_time(value)[0]
    except EventTimeInvalid as exc:
        raise PartitionNotStated("nominal_time", f"{field} is not an RFC 3339 date-time") from exc
