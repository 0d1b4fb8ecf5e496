"""When a poll-only storage group is swept next: densely while its datasets' partitions are
expected, backing off when nothing is. Pure: no ORM, no Django.

A poll-only dataset whose latest closed period has no ready partition is *pending*. Its
learned arrival profile (``catalog.arrival_profiles``: first readiness relative to the
period's end) gives an *expected window*, from the 10th to the 99th nearest-rank
percentile of its arrivals after the period's end (the arrivals of the same weekday when
that weekday has enough of them, else all of them). Then, after a sweep that found
nothing:

- a pending dataset without a profile (too few arrivals): nothing is known, so the
  group keeps the plain adaptive cadence (the interval doubles, up to the maximum);
- a pending dataset inside its window: the group stays dense (the minimum interval,
  paced by its listing's pages), whether or not the last sweep found anything;
- otherwise (every pending dataset before or after its window, or nothing pending): the
  interval doubles up to the maximum, and the next sweep comes no later than the
  earliest window opening ahead: of a pending dataset, or of a ready dataset's next
  period (its end, plus the 10th percentile when it has a profile).

A sweep that found something keeps the group dense (more often lands together), and so
does an empty sweep of a group that found ``RATE_FINDS`` partitions or more in the last
``RATE_WINDOW``: at the rate it finds them, one sweep that finds nothing is chance, not a
lull, so its next sweep stays within its paced interval (a quiet hour ends this, the
group backs off then). A dataset that publishes readiness events is not pending here: the
hourly safety net finds its missed events.

Dense is never denser than the listing pays for: at least ``per_page`` seconds per page
of the group's listing beyond the first, and, once the group has found ``RATE_FINDS``
partitions or more in the last ``RATE_WINDOW``, about one page per partition found (the
pages of its listing over the rate it finds them: the finds after the window's first
sweep that found something, over the time since it, at least ``RATE_MIN_SPAN``, so a
burst after a quiet hour counts at its own pace), so a busy group whose listing takes
several pages is listed about as often as it has something to find.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .arrival_profiles import Arrival, counted_arrivals, nearest_rank, weekday_of

# The window runs from this percentile of arrivals after the period end to the other.
OPENS_PERCENT = 10
CLOSES_PERCENT = 99
# A group's find rate is measured over this, once it holds this many finds.
RATE_WINDOW = timedelta(hours=1)
RATE_FINDS = 5
RATE_MIN_SPAN = timedelta(minutes=10)


@dataclass(frozen=True)
class Window:
    """When one dataset's partition is expected: aware instants, ``opens <= closes``."""

    opens: datetime
    closes: datetime


def offsets(
    arrivals: Iterable[Arrival], *, period_end: datetime, time_zone: str, min_periods: int
) -> tuple[int, int] | None:
    """``(p10, p99)`` seconds after the period end at which the period ending at
    ``period_end`` (aware) is expected, from earlier ``arrivals`` (backfills left out):
    those whose period ended on the same local weekday when there are ``min_periods``
    (at least 1) of them, else all of them; None with fewer than ``min_periods``."""
    counted, _ = counted_arrivals(arrivals)
    floor = max(min_periods, 1)
    day = weekday_of(period_end, time_zone)
    same_day = sorted(a.seconds for a in counted if weekday_of(a.period_end, time_zone) == day)
    values = same_day if len(same_day) >= floor else sorted(a.seconds for a in counted)
    if len(values) < floor:
        return None
    return nearest_rank(values, OPENS_PERCENT), nearest_rank(values, CLOSES_PERCENT)


def window(period_end: datetime, expected: tuple[int, int] | None) -> Window | None:
    """The expected window of the period ending at ``period_end``, None when unknown."""
    if expected is None:
        return None
    p10, p99 = expected
    return Window(period_end + timedelta(seconds=p10), period_end + timedelta(seconds=p99))


@dataclass(frozen=True)
class Cadence:
    """Seconds: ``minimum``/``maximum`` interval, ``per_page`` waited per page of the
    group's listing beyond the first (``TIDEMARK_POLL``)."""

    minimum: int
    maximum: int
    per_page: int


def next_sweep(
    *,
    now: datetime,
    previous_interval: int,
    found: bool,
    pages: int,
    pending: Sequence[Window | None],
    reopens: Iterable[datetime],
    cadence: Cadence,
    found_recently: int = 0,
    found_over: timedelta = RATE_WINDOW,
) -> tuple[int, datetime]:
    """``(interval seconds, next sweep at)`` of a poll-only group swept at ``now``.

    Args:
        previous_interval: the group's interval before this sweep (seconds).
        found: the sweep found a partition ready.
        pages: pages of the group's listing this sweep (before any listing inside).
        pending: the expected window of each pending poll-only dataset (None: unknown).
        reopens: when ready poll-only datasets' next periods may land (aware instants).
        cadence: the configured bounds.
        found_recently: partitions the group's sweeps found in the last ``RATE_WINDOW``
            after its first sweep that found something, this one's included.
        found_over: the time those were found in: since that first sweep (clamped to
            ``RATE_MIN_SPAN`` .. ``RATE_WINDOW``).

    The interval is within ``[minimum, maximum]`` and never below the page pacing; dense
    (the pacing) after a find, while the group finds at a measured rate (``found_recently``
    at least ``RATE_FINDS``) and while a pending dataset's window is open; otherwise the
    next sweep is ``now + interval``, brought forward to the earliest window opening
    after ``now`` when backing off, but never sooner than the dense interval.
    """
    floor = max(cadence.minimum, paced(pages, found_recently, cadence, over=found_over))
    dense = min(floor, cadence.maximum)
    busy = found_recently >= RATE_FINDS  # finding at a measured rate: not a lull
    if found or busy or any(w is not None and w.opens <= now <= w.closes for w in pending):
        return dense, now + timedelta(seconds=dense)
    interval = min(max(previous_interval * 2, floor), cadence.maximum)
    next_at = now + timedelta(seconds=interval)
    if any(w is None for w in pending):
        return interval, next_at  # nothing known of a pending dataset: plain back-off
    openings = [w.opens for w in pending if w is not None and w.opens > now]
    openings += [at for at in reopens if at > now]
    if openings:
        next_at = max(min(next_at, min(openings)), now + timedelta(seconds=dense))
    return interval, next_at


def paced(
    pages: int, found_recently: int, cadence: Cadence, *, over: timedelta = RATE_WINDOW
) -> int:
    """Seconds a sweep of ``pages`` pages waits at least: ``per_page`` per page beyond the
    first, and, with ``RATE_FINDS`` or more partitions found in the last ``RATE_WINDOW``
    (over ``over``, clamped to ``RATE_MIN_SPAN`` .. ``RATE_WINDOW``), the time the group
    takes to find one partition per page at that rate (rounded up)."""
    seconds = max(pages - 1, 0) * cadence.per_page
    if found_recently >= RATE_FINDS:
        span = int(min(max(over, RATE_MIN_SPAN), RATE_WINDOW).total_seconds())
        seconds = max(seconds, -(-max(pages, 1) * span // found_recently))
    return seconds
