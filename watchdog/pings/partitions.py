"""Which partition a ping names: a key of its monitor's partitioning whose period has
started."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings

from schedules import PartitionKeyError, has_started, newest_started, parse_partition_key

from ..models import Monitor
from .inputs import FUTURE_RULE, PingRejected


def checked_partition(monitor: Monitor, partition: str, *, now: datetime) -> str:
    """The ping's partition key as recorded: free text (cut) for an unpartitioned monitor;
    else a key of the monitor's partitioning whose period has started by ``now`` plus
    ``WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS`` (``schedules.has_started``, the catalog's
    rule): a key from the future is a typo, and taken it would be the monitor's newest
    partition, satisfying deadlines whose data never came.

    Raises:
        PingRejected: 400 a key of another format; 422 a period that has not started.
    """
    if not partition:
        return ""
    if not monitor.partitioning:
        return partition[:32]
    try:
        interval = parse_partition_key(monitor.partitioning, partition, monitor.partition_timezone)
    except PartitionKeyError as exc:
        raise PingRejected(400, f"partition: {exc}") from exc
    skew = timedelta(seconds=settings.WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS)
    if not has_started(interval, now=now, skew=skew):
        newest = newest_started(
            monitor.partitioning, monitor.partition_timezone, now=now, skew=skew
        ).key
        starts_at = _iso(interval.start)
        seconds = int(skew.total_seconds())
        raise PingRejected(
            422,
            f"partition {partition!r} starts at {starts_at}, after now ({_iso(now)}) plus "
            f"the {seconds} s clock-skew allowance: its period has not started. The newest "
            f"partition accepted now is {newest!r}",
            extra={
                "rule": FUTURE_RULE,
                "partition": partition,
                "starts_at": starts_at,
                "newest_accepted_partition": newest,
                "clock_skew_seconds": seconds,
            },
        )
    return partition


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
