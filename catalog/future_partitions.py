"""Partitions from the future: a partition names a logical period, and data for a period
that has not started yet is a mistyped key (``2027-06-01`` for ``2026-06-01``), not data.

Left in, such a partition would be the newest ready one: ``/partitions/latest`` would serve
it and freshness would call the dataset fresh while real partitions are missing. So a
publish, a staged publish, a restatement's range and a poll find are refused when the
partition's period starts after now plus a small clock-skew allowance
(``TIDEMARK_PARTITION_CLOCK_SKEW_SECONDS``, for a producer whose clock runs a little fast).
A dataset that really has future partitions (forecasts, schedules) sets
``accepts_future_partitions``; even then the latest ready partition, and the freshness
built on it, only count periods that have started (``started``). The rule itself is
``schedules.has_started``, which the watchdog applies to its pings too.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from problems import FieldError
from schedules.periods import LogicalInterval, has_started, newest_started

from . import errors
from .models import Dataset
from .notices import iso

RULE = "partition_started"


def clock_skew() -> timedelta:
    """How far a period may start after now and still be accepted."""
    return timedelta(seconds=settings.TIDEMARK_PARTITION_CLOCK_SKEW_SECONDS)


def accepted(dataset: Dataset, interval: LogicalInterval | None, *, now: datetime) -> bool:
    """Whether a partition of ``dataset`` with logical ``interval`` may be recorded at
    ``now`` (aware UTC): unpartitioned (``interval`` None), started by now plus the
    allowance, or the dataset accepts future partitions."""
    return dataset.accepts_future_partitions or has_started(interval, now=now, skew=clock_skew())


def newest_accepted_key(dataset: Dataset, *, now: datetime) -> str:
    """The key of the newest period a partitioned ``dataset`` accepts at ``now`` without
    accepting future partitions: the period containing now plus the allowance."""
    return newest_started(
        dataset.partitioning, dataset.partition_timezone, now=now, skew=clock_skew()
    ).key


def check_accepted(
    dataset: Dataset,
    key: str,
    interval: LogicalInterval | None,
    *,
    now: datetime,
    field: str = "partition",
) -> None:
    """Refuse a partition whose period has not started (``accepted``).

    Args:
        key: the partition key, ``interval`` its logical period (UTC; None when
            unpartitioned).
        now: aware UTC instant the request is judged at.
        field: the request field that named the key (``partition``, ``last_partition``).

    Raises:
        PartitionInFuture (422): naming ``field``, the rule ``partition_started``, the
            period's start and the newest key accepted now.
    """
    if accepted(dataset, interval, now=now):
        return
    newest = newest_accepted_key(dataset, now=now)
    skew = int(clock_skew().total_seconds())
    raise errors.PartitionInFuture(
        f"partition {key!r} of {dataset} starts at {iso(interval.start)}, after now "
        f"({iso(now)}) plus the {skew} s clock-skew allowance: its period has not started. "
        f"The newest partition accepted now is {newest!r}. A dataset with future "
        "partitions (forecasts, schedules) sets accepts_future_partitions",
        errors=[FieldError(field, f"{key!r} starts at {iso(interval.start)}, in the future", RULE)],
        extra={
            "rule": RULE,
            "partition": key,
            "starts_at": iso(interval.start),
            "newest_accepted_partition": newest,
            "clock_skew_seconds": skew,
        },
    )


def started(now: datetime) -> Q:
    """Partitions whose period has started by ``now`` (aware UTC), and unpartitioned
    data: what the latest ready partition and freshness may report."""
    return Q(start_at__isnull=True) | Q(start_at__lte=now)
