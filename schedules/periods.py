"""Logical periods: the partition key each partitioning fixes, and the UTC interval it names.

Keys name logical periods in the dataset's partition time zone (UTC by default); the
interval is returned in UTC, half-open ``[start, end)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

NONE = "none"
HOURLY = "hourly"
DAILY = "daily"
MONTHLY = "monthly"

KEY_FORMATS = {
    NONE: "no partition key (omit it, or send an empty string)",
    HOURLY: "YYYY-MM-DDTHH, e.g. 2026-11-28T05",
    DAILY: "YYYY-MM-DD, e.g. 2026-11-28",
    MONTHLY: "YYYY-MM, e.g. 2026-11",
}
# ASCII digits only: strptime also takes fullwidth or Arabic-Indic digits, which would
# make a second key for the same period.
_KEY_PATTERNS = {
    HOURLY: (re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}$"), "%Y-%m-%dT%H"),
    DAILY: (re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"), "%Y-%m-%d"),
    MONTHLY: (re.compile(r"^[0-9]{4}-[0-9]{2}$"), "%Y-%m"),
}


class PartitionKeyError(ValueError):
    """A partition key does not match its dataset's partitioning; carries the expected format."""

    def __init__(self, partitioning: str, key: str) -> None:
        self.expected_format = KEY_FORMATS[partitioning]
        super().__init__(
            f"partition key {key!r} does not match {partitioning} partitioning: "
            f"expected {self.expected_format}"
        )


@dataclass(frozen=True)
class LogicalInterval:
    """A partition's logical period in UTC, half-open: ``start <= t < end``."""

    start: datetime
    end: datetime


# Names the zone database answers that are not portable IANA zones: the host's own zone
# (differs from machine to machine), the build placeholder, the POSIX-rules template, and the
# leap-second ("right/") and duplicate ("posix/") copies of the database.
_NOT_PORTABLE = frozenset({"localtime", "Factory", "posixrules"})
_NOT_PORTABLE_PREFIXES = ("right/", "posix/")


def validate_timezone(name: str) -> ZoneInfo:
    """Return the IANA zone ``name`` (``"Europe/Paris"``, ``"UTC"``, links such as
    ``"US/Eastern"``).

    Raises:
        ValueError: the zone is unknown, or is one of the zone database's non-portable
            entries (``localtime``, ``Factory``, ``posixrules``, ``right/...``,
            ``posix/...``), whose meaning depends on the host or counts leap seconds.
    """
    if name in _NOT_PORTABLE or name.startswith(_NOT_PORTABLE_PREFIXES):
        raise ValueError(
            f"time zone {name!r} is not a portable IANA zone: use an Area/Location name "
            "such as 'Europe/Paris' or 'UTC'"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown IANA time zone {name!r}") from exc


def parse_partition_key(
    partitioning: str, key: str, time_zone: str = "UTC"
) -> LogicalInterval | None:
    """Check ``key`` against ``partitioning`` and derive its logical interval.

    Args:
        partitioning: one of ``none``, ``hourly``, ``daily``, ``monthly``.
        key: the partition key; ``""`` for unpartitioned datasets.
        time_zone: IANA zone the periods are cut in.

    Returns:
        The UTC interval, or None for unpartitioned datasets (their one partition has no
        logical period).

    Raises:
        PartitionKeyError: the key does not match the format or names no real period.
    """
    if partitioning == NONE:
        if key:
            raise PartitionKeyError(partitioning, key)
        return None
    pattern, fmt = _KEY_PATTERNS[partitioning]
    if not pattern.match(key):
        raise PartitionKeyError(partitioning, key)
    try:
        naive_start = datetime.strptime(key, fmt)  # noqa: DTZ007 - zone attached below
    except ValueError as exc:
        raise PartitionKeyError(partitioning, key) from exc
    try:
        return _interval(partitioning, naive_start, ZoneInfo(time_zone), key)
    except (OverflowError, ValueError) as exc:  # periods at the edge of year 1 or 9999
        raise PartitionKeyError(partitioning, key) from exc


def _interval(partitioning: str, naive_start: datetime, zone: ZoneInfo, key: str):
    if partitioning == MONTHLY:
        year, month = divmod(naive_start.year * 12 + naive_start.month, 12)
        naive_end = naive_start.replace(year=year, month=month + 1)
    else:
        naive_end = naive_start + (
            timedelta(hours=1) if partitioning == HOURLY else timedelta(days=1)
        )
    start, end = wall_time_to_utc(naive_start, zone), wall_time_to_utc(naive_end, zone)
    if start >= end:  # an hour skipped by a spring-forward change names no period
        raise PartitionKeyError(partitioning, key)
    return LogicalInterval(start=start, end=end)


def wall_time_to_utc(naive: datetime, zone: ZoneInfo) -> datetime:
    """Convert a local wall time in ``zone`` to UTC with Tidemark's one DST rule.

    A wall time that occurs twice (fall-back) means its first occurrence; one that does not
    occur (spring-forward gap) moves to the next valid instant, the end of the gap. So on
    a fall-back day the repeated hour belongs to one hourly key, and every instant belongs
    to exactly one partition.
    """
    after = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if after.astimezone(zone).replace(tzinfo=None) == naive:
        return after
    # In a gap: fold=1 reads the wall time with the offset after the change, which lands
    # before the change; the change itself lies in (before, after]. Bisect to the second.
    before = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = min(before, after), max(before, after)
    low_offset = low.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        mid = low + (high - low) / 2
        if mid.astimezone(zone).utcoffset() == low_offset:
            low = mid
        else:
            high = mid
    return high.replace(microsecond=0)


@dataclass(frozen=True)
class Period:
    """One logical period: its key and its UTC interval ``[start, end)``."""

    key: str
    start: datetime
    end: datetime


_KEY_FORMATS = {HOURLY: "%Y-%m-%dT%H", DAILY: "%Y-%m-%d", MONTHLY: "%Y-%m"}


def period_containing(instant: datetime, partitioning: str, time_zone: str = "UTC") -> Period:
    """The period of ``partitioning`` (cut in ``time_zone``) that contains ``instant``.

    Args:
        instant: aware datetime (any zone).

    Raises:
        ValueError: ``partitioning`` is ``none`` (unpartitioned data has no periods).
    """
    if partitioning not in _KEY_FORMATS:
        raise ValueError(f"{partitioning!r} partitioning has no periods")
    local = instant.astimezone(ZoneInfo(time_zone))
    key = local.strftime(_KEY_FORMATS[partitioning])
    interval = parse_partition_key(partitioning, key, time_zone)
    return Period(key=key, start=interval.start, end=interval.end)


def periods_ending_in(
    after: datetime,
    until: datetime,
    partitioning: str,
    time_zone: str = "UTC",
    *,
    limit: int = 10_000,
) -> list[Period]:
    """Every period whose end lies in ``(after, until]``, oldest first.

    Raises:
        ValueError: more than ``limit`` periods (a runaway window).
    """
    found: list[Period] = []
    period = period_containing(until - timedelta(microseconds=1), partitioning, time_zone)
    if period.end > until:  # still open at ``until``: step back to the last closed one
        period = period_containing(
            period.start - timedelta(microseconds=1), partitioning, time_zone
        )
    while period.end > after:
        found.append(period)
        if len(found) > limit:
            raise ValueError(f"more than {limit} periods end in the window")
        period = period_containing(
            period.start - timedelta(microseconds=1), partitioning, time_zone
        )
    return found[::-1]


def has_started(interval: LogicalInterval | None, *, now: datetime, skew: timedelta) -> bool:
    """Whether a partition whose logical period is ``interval`` (UTC; None for
    unpartitioned data, which has no period) has started by ``now`` plus ``skew``.

    The rule behind refusing partitions from the future: data for a period that has not
    started is a mistyped key (``2027-06-01`` for ``2026-06-01``), not data; ``skew`` is
    the allowance for a sender whose clock runs a little fast.

    Args:
        now: aware datetime the partition is judged at.
        skew: how far a period may start after ``now`` and still count as started.
    """
    return interval is None or interval.start <= now + skew


def newest_started(
    partitioning: str, time_zone: str = "UTC", *, now: datetime, skew: timedelta
) -> Period:
    """The newest period of ``partitioning`` (cut in ``time_zone``) that ``has_started`` at
    ``now``: the one containing ``now + skew``, for telling a sender what it may name.

    Raises:
        ValueError: ``partitioning`` is ``none``.
    """
    return period_containing(now + skew, partitioning, time_zone)
