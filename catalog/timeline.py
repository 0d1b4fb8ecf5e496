"""A dataset's partition timeline: what became of each of its last periods (ready on
time, late and by how much, missing, restated, found by the poll), and where each cell is
drawn in the dataset page's inline SVG. Pure: no ORM, no Django.

Lateness is freshness's (``catalog.freshness_state``): a partition is late once its
deadline plus grace has passed without it, and late by the time since then
(``FreshnessSla.late_seconds``), so the timeline and the badge say the same number. A
deadline that passed before the dataset was registered is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedules import FreshnessSla, Period, period_containing

ON_TIME, UNJUDGED, LATE, MISSING, FAILED, DUE, AWAITING, PENDING, UNTRACKED, NOT_OWED = (
    "on_time",
    "unjudged",
    "late",
    "missing",
    "failed",
    "due",
    "awaiting",
    "pending",
    "untracked",
    "not_owed",
)
# Words for each status, as the picture's legend and tooltips say them.
WORDS = {
    ON_TIME: "ready on time",
    UNJUDGED: "ready (deadline before registration, not judged)",
    LATE: "ready late",
    MISSING: "missing",
    FAILED: "failed",
    DUE: "due (grace running)",
    AWAITING: "not due yet",
    PENDING: "pending",
    UNTRACKED: "not tracked (before the dataset was registered)",
    NOT_OWED: "not owed (its deadline falls on a day the SLA's calendar skips)",
}
# Pixels; the first and last keys are written under the picture by the page, not in it.
CELL_WIDTH, CELL_HEIGHT, GAP, TOP, BOTTOM = 22, 28, 3, 6, 2


@dataclass(frozen=True)
class Cell:
    """One period of the timeline.

    ``status``: one of ``WORDS``' keys; ``late_seconds``: how long after its deadline
    plus grace the partition became ready (``late``), or has been missing since
    (``missing`` past its grace), as freshness counts it; None when not late or when
    there is no deadline to count from; ``grace_seconds``: the SLA's grace (None without
    an SLA);
    ``ready_at``: when its current revision became ready; ``arrived_at``: when the
    partition first became ready (what judges it on time or late; ``ready_at`` unless it
    was restated since); ``restated``: its current revision replaced a ready one;
    ``by_poll``: the fallback poll found it (its readiness event was lost). ``x``: left
    edge in the picture, in pixels.
    """

    key: str
    status: str
    deadline_at: datetime | None
    grace_seconds: int | None
    ready_at: datetime | None
    arrived_at: datetime | None
    late_seconds: int | None
    restated: bool
    by_poll: bool
    x: int

    @property
    def words(self) -> str:
        return WORDS[self.status]


def last_periods(now: datetime, partitioning: str, time_zone: str, count: int) -> list[Period]:
    """The ``count`` periods that closed last before ``now`` (aware), oldest first.

    Raises:
        ValueError: ``partitioning`` is ``none``.
    """
    period = period_containing(now, partitioning, time_zone)
    found = []
    for _ in range(count):
        period = period_containing(
            period.start - timedelta(microseconds=1), partitioning, time_zone
        )
        found.append(period)
    return found[::-1]


def cells(
    periods: list[Period],
    *,
    partitions: dict[str, dict],
    late_keys: dict[str, datetime | None],
    sla: FreshnessSla | None,
    now: datetime,
    tracked_since: datetime | None = None,
) -> list[Cell]:
    """The timeline of ``periods`` (oldest first), placed left to right.

    Args:
        partitions: ``{key: {state, ready_at, first_ready_at, detected_by, version,
            revisions}}`` as ``catalog.browse.timeline_partitions`` reads them (state
            None: no current revision; ``first_ready_at``, when it first arrived, judges
            it on time or late, None: ``ready_at`` does).
        late_keys: ``{key: recovered_at or None}`` of the partitions found late by the
            freshness evaluation (they are late even when no SLA is set any more).
        sla: the dataset's SLA, or None; without one nothing is due, late or missing
            unless ``late_keys`` says so.
        now: aware UTC instant.
        tracked_since: aware instant the dataset was registered, or None. A period
            whose deadline (without an SLA: its end) is before it was never judged: with
            no partition, or one pending, it is ``untracked`` (not missing); a partition
            ready then is ``unjudged`` (neither on time nor late), or late when
            ``late_keys`` says so. A period the SLA's calendar skips (no deadline) is
            ``not_owed`` unless it is ready, failed or found late.
    """
    result = []
    for index, period in enumerate(periods):
        info = partitions.get(period.key) or {}
        state = info.get("state")
        ready_at = info.get("ready_at") if state == "ready" else None
        deadline = sla.deadline_of(period) if sla else None
        late_seconds = None
        # On time or late by when it first arrived: a restatement's new version (ready
        # later, by design) does not make an on-time partition late.
        arrived = min(ready_at, info.get("first_ready_at") or ready_at) if ready_at else None
        # A deadline before registration is not judged (as freshness never judges it).
        untracked = tracked_since is not None and (deadline or period.end) < tracked_since
        found_late = period.key in late_keys
        judged = sla is not None and deadline is not None and not untracked
        # An SLA that skips non-business days owes this period never (``deadline_of``).
        not_owed = sla is not None and deadline is None
        if not_owed and state not in ("ready", "failed") and not found_late:
            status = NOT_OWED
        elif untracked and state not in ("ready", "failed") and not found_late:
            status = UNTRACKED
        elif state == "ready":
            status = ON_TIME if not untracked else UNJUDGED
            if found_late or (judged and arrived > sla.late_after(deadline)):
                status = LATE
                late_seconds = sla.late_seconds(deadline, arrived) if deadline else None
        elif state == "failed":
            status = FAILED
        elif deadline is not None and (found_late or (judged and now >= sla.late_after(deadline))):
            status = MISSING
            late_seconds = sla.late_seconds(deadline, now)
        elif judged and now >= deadline:
            status = DUE
        elif judged:
            status = AWAITING
        elif found_late:
            status = MISSING
        else:
            status = PENDING if state == "pending" else MISSING
        result.append(
            Cell(
                key=period.key,
                status=status,
                deadline_at=deadline,
                grace_seconds=sla.grace_seconds if sla else None,
                ready_at=ready_at,
                arrived_at=arrived,
                late_seconds=late_seconds,
                restated=_restated(info),
                by_poll=info.get("detected_by") == "poll",
                x=index * (CELL_WIDTH + GAP),
            )
        )
    return result


def _restated(info: dict) -> bool:
    """Whether the current revision replaced a ready one: it became ready after the
    partition first arrived (a new version, a promoted restatement). A first publish that
    names a version, or a version ready after a failed one, restated nothing; nor does a
    restatement still staged (its revision is not current)."""
    first_ready_at, ready_at = info.get("first_ready_at"), info.get("ready_at")
    if first_ready_at is None or ready_at is None:
        return info.get("revisions", 0) > 1
    return ready_at > first_ready_at


def picture_size(cell_count: int) -> tuple[int, int]:
    """``(width, height)`` in pixels of a timeline of ``cell_count`` cells."""
    width = max(cell_count * (CELL_WIDTH + GAP) - GAP, CELL_WIDTH)
    return width, TOP + CELL_HEIGHT + BOTTOM
