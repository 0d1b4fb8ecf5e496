"""Which partition a run event is about (``lineage.completion``): the custom
``tidemark_partition`` facet, else the run's ``nominalTime``, else none."""

import pytest

from lineage.completion import PARTITION_FACET, PartitionNotStated, output_partition


def _facet(key):
    return {"_producer": "p", "_schemaURL": "s", "key": key}


def _nominal(start, end=None):
    facet = {"_producer": "p", "_schemaURL": "s", "nominalStartTime": start}
    if end is not None:
        facet["nominalEndTime"] = end
    return {"nominalTime": facet}


DAY = _nominal("2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z")


@pytest.mark.parametrize(
    ("output", "run_facets", "partitioning", "zone", "expected"),
    [
        # the custom facet wins, in outputFacets or facets, over nominalTime
        (
            {"outputFacets": {PARTITION_FACET: _facet("2026-11-27")}},
            _nominal("2026-11-28T00:00:00Z"),
            "daily",
            "UTC",
            ("2026-11-27", PARTITION_FACET),
        ),
        (
            {"facets": {PARTITION_FACET: _facet("2026-11")}},
            None,
            "monthly",
            "UTC",
            ("2026-11", PARTITION_FACET),
        ),
        # nominalTime: the period that starts at nominalStartTime and ends at nominalEndTime
        (
            {},
            DAY,
            "daily",
            "UTC",
            ("2026-11-28", "nominalTime"),
        ),
        ({}, _nominal("2026-11-28T05:00:00Z"), "hourly", "UTC", ("2026-11-28T05", "nominalTime")),
        (
            {},
            _nominal("2026-11-27T23:00:00Z", "2026-11-28T23:00:00Z"),
            "daily",
            "Europe/Berlin",
            ("2026-11-28", "nominalTime"),
        ),
        (
            {},
            _nominal("2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00Z"),
            "monthly",
            "UTC",
            ("2026-11", "nominalTime"),
        ),
        # unpartitioned: its one partition
        ({}, None, "none", "UTC", ("", "unpartitioned")),
    ],
)
def test_the_partition_an_event_states(output, run_facets, partitioning, zone, expected):
    assert output_partition(output, run_facets, partitioning=partitioning, time_zone=zone) == (
        expected
    )


BAD_KEY = {"outputFacets": {PARTITION_FACET: {"key": 20261128}}}
NOT_AN_OBJECT = {"outputFacets": {PARTITION_FACET: "2026-11-28"}}


@pytest.mark.parametrize(
    ("output", "run_facets", "partitioning", "zone", "rule"),
    [
        (BAD_KEY, None, "daily", "UTC", "partition_facet"),
        (NOT_AN_OBJECT, None, "daily", "UTC", "partition_facet"),
        ({}, None, "daily", "UTC", "no_partition"),
        ({}, {"nominalTime": "yesterday"}, "daily", "UTC", "no_partition"),
        # a daily run of an hourly dataset: more than one partition
        ({}, DAY, "hourly", "UTC", "nominal_time"),
        # a UTC day against a Berlin one
        ({}, DAY, "daily", "Europe/Berlin", "nominal_time"),
        # a start inside a period
        ({}, _nominal("2026-11-28T02:00:00Z"), "daily", "UTC", "nominal_time"),
        ({}, _nominal("not a time"), "daily", "UTC", "nominal_time"),
    ],
)  # fmt: skip
def test_an_event_that_does_not_state_one_partition_publishes_nothing(
    output, run_facets, partitioning, zone, rule
):
    with pytest.raises(PartitionNotStated) as caught:
        output_partition(output, run_facets, partitioning=partitioning, time_zone=zone)
    assert caught.value.rule == rule
