"""Learned arrival profiles: when a dataset's partitions usually become ready, measured
from the end of their period, from the dataset's own history. Pure: no ORM, no Django.

An arrival is a partition's first readiness (published or found by the poll), as
``(period_end, ready_at)``. Restatements never count (their revisions arrive later by
design), and neither do backfills: a partition that became ready while a newer one
already was is old data filled in, not the pipeline's usual run.

Arrivals are grouped by the local weekday on which their period ends, in the partition
time zone: the day the data is expected. A daily partition for Friday ends at midnight
into Saturday, so it is a weekend arrival; Sunday's is expected on Monday, a business
day. A producer that runs on business days only then shows two clean groups instead of
one smeared one. Business days are Monday to Friday (holidays are not known here).

Quantiles are nearest-rank: the p-th percentile is the smallest observed offset that at
least p% of arrivals are at or before, so "p90 = 5 h 40 min" reads "ready within
5 h 40 min of the period's end on at least 90% of periods", and is always an offset that
was seen. A group with fewer than ``min_periods`` arrivals has no quantiles (None), only
its count. With fewer than 100 arrivals p99 is the latest one seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from schedules import DAILY, HOURLY, MONTHLY, parse_partition_key, period_containing

if TYPE_CHECKING:  # sla_suggestions builds on this module
    from .sla_suggestions import SlaSuggestion

PERCENTILES = (50, 90, 99)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
BUSINESS_DAYS = frozenset(WEEKDAYS[:5])


@dataclass(frozen=True)
class Arrival:
    """One partition's first readiness: ``period_end`` (aware, the end of its logical
    period, exclusive) and ``ready_at`` (aware, when it first became ready)."""

    period_end: datetime
    ready_at: datetime

    @property
    def seconds(self) -> int:
        """Whole seconds from the period's end to readiness, rounded down; negative when
        it was ready before its period ended (forecasts, early snapshots)."""
        return int((self.ready_at - self.period_end).total_seconds() // 1)


@dataclass(frozen=True)
class Quantiles:
    """Arrival offsets of one group of periods, in seconds after the period's end.

    ``periods``: how many arrivals the group holds; ``p50_seconds``, ``p90_seconds``,
    ``p99_seconds``: nearest-rank percentiles, None when ``periods`` is below the
    profile's ``min_periods``.
    """

    periods: int
    p50_seconds: int | None = None
    p90_seconds: int | None = None
    p99_seconds: int | None = None


@dataclass(frozen=True)
class ArrivalProfile:
    """A dataset's usual arrival times.

    ``periods``: arrivals counted; ``backfills``: arrivals left out because a newer
    partition was ready before them; ``all_days``, ``business_days``, ``weekends``: the
    quantiles of every arrival and of those whose period ends on Monday to Friday, or on
    Saturday or Sunday (local to the partition time zone); ``weekdays``: the same per
    weekday, ``{"monday": Quantiles, ...}`` in weekday order. ``window_periods`` and
    ``since`` (aware UTC): the window of periods read, and ``sla_suggestion`` what the
    arrivals say about the SLA, when a reader set them.
    """

    periods: int
    backfills: int
    all_days: Quantiles
    business_days: Quantiles
    weekends: Quantiles
    weekdays: dict[str, Quantiles]
    window_periods: int | None = None
    since: datetime | None = None
    sla_suggestion: SlaSuggestion | None = None


def nearest_rank(sorted_values: list[int], percent: int) -> int:
    """The nearest-rank ``percent``-th percentile (1..100) of ``sorted_values`` (ascending,
    not empty): the value at 1-based rank ceil(percent * n / 100), in integer arithmetic
    so no rounding error moves the rank.

    Raises:
        ValueError: ``sorted_values`` is empty or ``percent`` is outside 1..100.
    """
    if not sorted_values or not 1 <= percent <= 100:
        raise ValueError("nearest_rank needs values and a percent in 1..100")
    rank = -(-percent * len(sorted_values) // 100)
    return sorted_values[rank - 1]


def quantiles(offsets: Iterable[int], *, min_periods: int) -> Quantiles:
    """The ``Quantiles`` of ``offsets`` (seconds after period end, any order); quantiles
    are None when there are fewer than ``min_periods`` (at least 1) of them."""
    values = sorted(offsets)
    if not values or len(values) < max(min_periods, 1):
        return Quantiles(periods=len(values))
    p50, p90, p99 = (nearest_rank(values, p) for p in PERCENTILES)
    return Quantiles(periods=len(values), p50_seconds=p50, p90_seconds=p90, p99_seconds=p99)


def without_backfills(arrivals: Iterable[Arrival]) -> tuple[list[Arrival], list[Arrival]]:
    """Split off backfills: an arrival is a backfill when a partition with a later period
    end became ready strictly before it. Arrivals at the same instant (a batch) are not
    backfills of each other.

    Returns:
        ``(kept, backfills)``, each ordered by period end, oldest first.
    """
    kept: list[Arrival] = []
    backfills: list[Arrival] = []
    earliest_newer: datetime | None = None
    for arrival in sorted(arrivals, key=lambda a: a.period_end, reverse=True):
        if earliest_newer is None or arrival.ready_at <= earliest_newer:
            kept.append(arrival)
            earliest_newer = arrival.ready_at
        else:
            backfills.append(arrival)
    return kept[::-1], backfills[::-1]


def window_start(now: datetime, partitioning: str, time_zone: str, count: int) -> datetime:
    """The start (aware UTC) of the first of the ``count`` (at least 1) periods that
    closed last before ``now``, computed in two or three period look-ups rather than
    ``count`` (the window of a profile is read on every freshness request).

    Exact for daily and monthly periods; for hourly periods a fall-back hour (one period
    two hours long) inside the window makes it one period shorter.

    Raises:
        ValueError: ``partitioning`` is ``none``.
    """
    current = period_containing(now, partitioning, time_zone)
    if partitioning == MONTHLY:
        year, month = (int(part) for part in current.key.split("-"))
        year, month = divmod(year * 12 + month - 1 - count, 12)
        return parse_partition_key(MONTHLY, f"{year:04d}-{month + 1:02d}", time_zone).start
    step = timedelta(hours=1) if partitioning == HOURLY else timedelta(days=1)
    # Half a step in, so a day that is 23 or 25 hours long cannot move it to a neighbour.
    return period_containing(current.start - count * step + step / 2, partitioning, time_zone).start


def weekday_of(period_end: datetime, time_zone: str) -> str:
    """The lower-case English name of the weekday on which ``period_end`` falls in
    ``time_zone`` (IANA): the day a period's data is expected."""
    return WEEKDAYS[period_end.astimezone(ZoneInfo(time_zone)).weekday()]


def counted_arrivals(
    arrivals: Iterable[Arrival], *, until: datetime | None = None
) -> tuple[list[Arrival], int]:
    """The arrivals a profile counts, oldest period first, and how many backfills whose
    period ends by ``until`` (aware; None: no bound) were left out."""
    kept, backfills = without_backfills(arrivals)
    counted = [a for a in kept if until is None or a.period_end <= until]
    return counted, sum(1 for a in backfills if until is None or a.period_end <= until)


def profile(
    arrivals: Iterable[Arrival],
    *,
    time_zone: str,
    min_periods: int,
    until: datetime | None = None,
) -> ArrivalProfile:
    """The arrival profile of ``arrivals``.

    Args:
        arrivals: every first readiness read for the window, newer partitions included
            (those ending after ``until`` only judge others as backfills).
        time_zone: IANA zone the partitions are cut in (weekdays are local to it).
        min_periods: fewest arrivals a group needs for quantiles.
        until: aware instant; arrivals whose period ends after it are not counted
            (None: all are).

    Returns:
        ``ArrivalProfile``; every group is present, with None quantiles when too small.
    """
    counted, backfills = counted_arrivals(arrivals, until=until)
    by_day: dict[str, list[int]] = {day: [] for day in WEEKDAYS}
    for arrival in counted:
        by_day[weekday_of(arrival.period_end, time_zone)].append(arrival.seconds)

    def of(days: Iterable[str]) -> Quantiles:
        return quantiles((s for day in days for s in by_day[day]), min_periods=min_periods)

    return ArrivalProfile(
        periods=len(counted),
        backfills=backfills,
        all_days=of(WEEKDAYS),
        business_days=of(BUSINESS_DAYS),
        weekends=of(set(WEEKDAYS) - BUSINESS_DAYS),
        weekdays={day: of([day]) for day in WEEKDAYS},
    )


def shown_groups(profile: ArrivalProfile) -> list[tuple[str, Quantiles]]:
    """The groups a page shows, as ``(words, Quantiles)``: all days, business days and
    weekends always (with their counts), then each weekday that has quantiles."""
    groups = [
        ("all days", profile.all_days),
        ("business days (Mon-Fri)", profile.business_days),
        ("weekends", profile.weekends),
    ]
    groups += [
        (day.capitalize(), q) for day, q in profile.weekdays.items() if q.p50_seconds is not None
    ]
    return groups


def clock_time(seconds: int | None, partitioning: str) -> str | None:
    """The local wall-clock time ``HH:MM`` an offset reads as for a daily partition (its
    period ends at local midnight), when the offset is within the next day; else None.
    An hour off on the night of a DST change, which is why pages say "about"."""
    if seconds is None or partitioning != DAILY or not 0 <= seconds < 86400:
        return None
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"
