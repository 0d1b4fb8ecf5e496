"""When a partition of a dataset without an SLA is "later than usual". Pure: no ORM.

The rule, from the dataset's arrival profile (``catalog.arrival_profiles``):

1. The dataset needs ``min_periods`` counted arrivals in its profile
   (``TIDEMARK_UNUSUALLY_LATE_MIN_PERIODS``, 14 by default); below that nothing is judged.
2. A partition is compared with the group of periods that end on the same local weekday
   as its own period (``tuesday``); when that weekday has too few arrivals for quantiles,
   with the business days or the weekends it belongs to. A group with no quantiles at
   all (a producer that never delivers weekend periods) means the period is not watched:
   no usual time, nothing to be late against.
3. With that group's nearest-rank quantiles p50, p90 and p99 (seconds after the period
   ends), the partition is expected by its period's end plus

       after = max(p99, p50 + max(min_margin, ceil(spread_factor * (p90 - p50))))

   (``TIDEMARK_UNUSUALLY_LATE_MIN_MARGIN_SECONDS``, 1800, and
   ``TIDEMARK_UNUSUALLY_LATE_SPREAD_FACTOR``, 3). Later than the latest arrival seen in
   nearly every period (p99), and later than the median by a margin that grows with how
   spread out arrivals usually are, but never less than ``min_margin``: a producer that
   lands within the same minute every day is not called late thirty seconds after its
   usual time.
4. A partition whose current revision is not ready at that instant is later than usual.
   One that is ready exactly then is on time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedules import Period, period_containing

from .arrival_profiles import BUSINESS_DAYS, ArrivalProfile, Quantiles, weekday_of

# Planning walks at most this many periods looking for the next watched one (pure
# arithmetic, no query): 16 days of hourly periods, over a year of daily ones.
MAX_PERIODS_WALKED = 400


@dataclass(frozen=True)
class UsualArrival:
    """The usual arrival a partition is judged against.

    ``group``: the profile group used (``"tuesday"``, ``"business_days"`` or
    ``"weekends"``); ``periods``: arrivals in that group; ``p50_seconds``, ``p90_seconds``,
    ``p99_seconds``: its quantiles (seconds after the period's end); ``after_seconds``:
    how long after the period's end the partition becomes later than usual.
    """

    group: str
    periods: int
    p50_seconds: int
    p90_seconds: int
    p99_seconds: int
    after_seconds: int


@dataclass(frozen=True)
class Rule:
    """The rule's settings: ``min_periods`` counted arrivals before anything is judged,
    ``min_margin_seconds`` past p50 at the least, ``spread_factor`` times (p90 - p50)."""

    min_periods: int
    min_margin_seconds: int
    spread_factor: float


def group_for(profile: ArrivalProfile, weekday: str) -> tuple[str, Quantiles] | None:
    """The group a period ending on ``weekday`` (lower-case English) is compared with:
    that weekday when it has quantiles, else business days or weekends when those have;
    None when neither has (the period is not watched)."""
    own = profile.weekdays.get(weekday)
    if own is not None and own.p50_seconds is not None:
        return weekday, own
    name, wider = (
        ("business_days", profile.business_days)
        if weekday in BUSINESS_DAYS
        else ("weekends", profile.weekends)
    )
    return (name, wider) if wider.p50_seconds is not None else None


def usual_arrival(
    profile: ArrivalProfile, period_end: datetime, *, time_zone: str, rule: Rule
) -> UsualArrival | None:
    """The usual arrival of the partition whose period ends at ``period_end`` (aware), by
    the module's rule; None when the profile holds fewer than ``rule.min_periods``
    arrivals or the period's group has no quantiles (not judged)."""
    if profile.periods < max(rule.min_periods, 1):
        return None
    found = group_for(profile, weekday_of(period_end, time_zone))
    if found is None:
        return None
    name, q = found
    assert q.p50_seconds is not None and q.p90_seconds is not None and q.p99_seconds is not None
    spread = math.ceil(rule.spread_factor * (q.p90_seconds - q.p50_seconds))
    after = max(q.p99_seconds, q.p50_seconds + max(rule.min_margin_seconds, spread))
    return UsualArrival(
        group=name,
        periods=q.periods,
        p50_seconds=q.p50_seconds,
        p90_seconds=q.p90_seconds,
        p99_seconds=q.p99_seconds,
        after_seconds=after,
    )


def expected_by(period: Period, usual: UsualArrival) -> datetime:
    """The instant (aware UTC) from which ``period``'s partition is later than usual."""
    return period.end + timedelta(seconds=usual.after_seconds)


def next_period(period: Period, partitioning: str, time_zone: str) -> Period:
    """The period right after ``period``."""
    return period_containing(period.end, partitioning, time_zone)


def previous_period(period: Period, partitioning: str, time_zone: str) -> Period:
    """The period right before ``period``."""
    return period_containing(period.start - timedelta(seconds=1), partitioning, time_zone)


Judge = Callable[[Period], UsualArrival | None]


def first_watched_after(
    period: Period, *, partitioning: str, time_zone: str, usual_of: Judge
) -> tuple[Period, UsualArrival] | None:
    """The first period after ``period`` that has a usual arrival (``usual_of``), with
    it; None when none does within ``MAX_PERIODS_WALKED`` periods."""
    candidate = period
    for _ in range(MAX_PERIODS_WALKED):
        candidate = next_period(candidate, partitioning, time_zone)
        usual = usual_of(candidate)
        if usual is not None:
            return candidate, usual
    return None


def first_watched_from(
    now: datetime, *, partitioning: str, time_zone: str, usual_of: Judge
) -> tuple[Period, UsualArrival] | None:
    """Where watching starts at ``now`` (aware): the oldest period whose partition is not
    yet later than usual at ``now``, going back from the period containing ``now`` no
    further than the first watched period already past its usual time (that one, and any
    older, are not judged: watching starts now, it does not look back). When nothing
    from the current period back is still ahead, the first watched period after it.

    Returns:
        ``(period, usual arrival)``, or None when no period within
        ``MAX_PERIODS_WALKED`` either way is watched.
    """
    current = period_containing(now, partitioning, time_zone)
    found: tuple[Period, UsualArrival] | None = None
    candidate = current
    for _ in range(MAX_PERIODS_WALKED):
        usual = usual_of(candidate)
        if usual is not None:
            if expected_by(candidate, usual) <= now:
                break
            found = (candidate, usual)
        candidate = previous_period(candidate, partitioning, time_zone)
    if found is not None:
        return found
    return first_watched_after(
        current, partitioning=partitioning, time_zone=time_zone, usual_of=usual_of
    )
