"""SLA suggestions: whether a dataset's written SLA is far from when its data really
arrives, either way, and what the arrivals say instead. Pure: no ORM, no Django.

Each counted arrival (``catalog.arrival_profiles``: first readiness, no restatements, no
backfills) is set against the deadline its period is due at under the current SLA
(``FreshnessSla.deadline_of``: the first deadline at or after the period's end), plus the
grace. The SLA is:

- **missed too often** (``later``) when fewer than ``PERCENT`` % of the periods were ready
  by deadline plus grace: consumers are told ``dataset.late`` more than one period in
  twenty;
- **far too generous** (``earlier``) when on ``PERCENT`` % of the periods the partition
  was ready more than ``max(1 h, half its own arrival time)`` before the deadline: a
  consumer waiting for the deadline waits hours for data that is already there.

The numbers behind a suggestion are nearest-rank, as the profile's: ``ready_by_seconds``
is the offset from the period's end by which ``PERCENT`` % of the partitions were ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from schedules import FreshnessSla

from .arrival_profiles import Arrival, clock_time, nearest_rank

PERCENT = 95
EARLIER, LATER = "earlier", "later"
MIN_SLACK_SECONDS = 3600


@dataclass(frozen=True)
class SlaSuggestion:
    """What the arrivals say about the SLA.

    ``direction``: ``earlier`` (the deadline could be earlier) or ``later`` (it is missed
    too often); ``periods``: arrivals judged; ``ready_by_seconds``: ``PERCENT`` % of them
    were ready within this many seconds of their period's end; ``deadline_seconds``: the
    median time from a period's end to its deadline (without grace); ``met_percent``:
    the whole percentage ready by deadline plus grace; ``words``: the suggestion as the
    dataset page says it.
    """

    direction: str
    periods: int
    percent: int
    ready_by_seconds: int
    deadline_seconds: int
    met_percent: int
    words: str


def suggest(
    arrivals: Sequence[Arrival], sla: FreshnessSla, *, min_periods: int
) -> SlaSuggestion | None:
    """The suggestion for ``sla`` from ``arrivals`` (the counted ones), or None when there
    are fewer than ``min_periods`` of them or the SLA is close enough to reality."""
    if len(arrivals) < max(min_periods, 1):
        return None
    offsets, deadlines, slacks, met = [], [], [], 0
    deadline = None
    for arrival in sorted(arrivals, key=lambda a: a.period_end):
        # The first deadline at or after the previous period's end is this one's too when
        # it is not before this end (hourly data, a daily SLA: one cron walk per day).
        if deadline is None or deadline < arrival.period_end:
            deadline = sla.next_deadline(arrival.period_end - timedelta(seconds=1))
        late_after = sla.late_after(deadline)
        offsets.append(arrival.seconds)
        deadlines.append(int((deadline - arrival.period_end).total_seconds()))
        slacks.append(int((deadline - arrival.ready_at).total_seconds() // 1))
        met += arrival.ready_at <= late_after
    ready_by = nearest_rank(sorted(offsets), PERCENT)
    # The slack that PERCENT % of the periods had at least: the (100 - PERCENT)th smallest.
    slack = nearest_rank(sorted(slacks), 100 - PERCENT)
    met_percent = 100 * met // len(arrivals)
    if 100 * met < PERCENT * len(arrivals):
        direction = LATER
    elif slack > max(MIN_SLACK_SECONDS, abs(ready_by) // 2):
        direction = EARLIER
    else:
        return None
    deadline_seconds = nearest_rank(sorted(deadlines), 50)
    return SlaSuggestion(
        direction=direction,
        periods=len(arrivals),
        percent=PERCENT,
        ready_by_seconds=ready_by,
        deadline_seconds=deadline_seconds,
        met_percent=met_percent,
        words=_words(direction, ready_by, deadline_seconds, met_percent, len(arrivals), sla),
    )


def _words(direction, ready_by, deadline, met_percent, periods, sla: FreshnessSla) -> str:
    ready_clock = clock_time(ready_by, sla.partitioning)
    deadline_clock = clock_time(deadline, sla.partitioning)
    ready = f"{_span(ready_by)} after the period ends" + (
        f" (about {ready_clock} {sla.partition_time_zone})" if ready_clock else ""
    )
    due = f"{_span(deadline)} after it" + (
        f" (about {deadline_clock} {sla.partition_time_zone})" if deadline_clock else ""
    )
    said = f"Ready by {ready} on {PERCENT}% of the last {periods} periods; the deadline is {due}"
    if direction == LATER:
        return (
            f"{said}, and only {met_percent}% were ready by deadline plus grace: "
            "a later deadline would be kept."
        )
    return f"{said}: an earlier deadline would still be kept, and consumers would know sooner."


def _span(seconds: int) -> str:
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    hours, minutes = seconds // 3600, seconds % 3600 // 60
    return f"{sign}{hours} h {minutes:02d} min" if hours else f"{sign}{minutes} min"
