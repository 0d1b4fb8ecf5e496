"""When each partition of the demo's datasets landed, computed from the world's producers
and a seed: pure (no ORM), so the story can be checked without a database.

A partition lands at the first firing of its producer's cron after its period closed,
give or take the producer's jitter; the world's exceptions (late, lost events,
restatements, incomplete manifests, a broken pipeline) bend that rule for given ages.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedules import FreshnessSla, Period, next_deadline, periods_ending_in

from .world import Producer

LANDED, LOST_EVENT, FAILED, INCOMPLETE = "landed", "lost_event", "failed", "incomplete"
# The fallback poll of a poll-only group sweeps within about a minute of a landing.
POLL_DELAY = (20, 80)  # seconds
# A group whose datasets publish events gets an hourly safety-net sweep: the lost
# event's partition is found at the next one, a few minutes past the hour.
SAFETY_NET_MINUTE = 7
# A partition whose run finished before its dataset was registered arrives this soon
# after the registration (registrations are on whole minutes, deadlines too, so this is
# before any deadline the registration's SLA judges).
BACKFILL_AFTER = timedelta(seconds=1)


@dataclass(frozen=True)
class Landing:
    """One partition's arrival.

    ``lands_at``: when the producer's run finished (its files written, its event sent, or
    its failure reported). ``ready_at``: when the catalog knew it ready (the publish, or
    the poll's find), None when it never became ready by ``now``. ``kind``: ``landed``,
    ``lost_event`` (found by the poll at ``ready_at``), ``incomplete`` (its manifest
    waited for a last file, complete at ``ready_at``), ``failed`` (the run failed).
    ``restated``: ``(version, at)`` of a rerun published later, if any.
    """

    age: int
    period: Period
    deadline: datetime | None
    kind: str
    lands_at: datetime
    ready_at: datetime | None
    restated: tuple[str, datetime] | None = None

    @property
    def key(self) -> str:
        return self.period.key


def producer_landings(
    producer: Producer,
    *,
    sla: FreshnessSla | None,
    partitioning: str,
    partition_timezone: str,
    registered_at: datetime,
    now: datetime,
    rng: random.Random,
) -> list[Landing]:
    """Every period a dataset's producer ran for, oldest first, whose run finished by
    ``now``.

    The periods are those that closed after the deadline before ``registered_at`` (so
    every period judged at a deadline since registration is there) up to ``now``.

    Args:
        sla: the dataset's SLA (None: no deadlines; the periods since registration).
        registered_at, now: aware UTC instants.
        rng: the story's random source (jitter and the poll's delays).
    """
    since = sla.previous_deadline(registered_at) if sla else registered_at
    periods = periods_ending_in(since, now, partitioning, partition_timezone)
    broken_from = (
        _broken_from(sla, registered_at=registered_at, now=now) if producer.broken else None
    )
    found = []
    for age, period in enumerate(reversed(periods)):
        deadline = sla.next_deadline(period.end - timedelta(seconds=1)) if sla else None
        jitter = timedelta(minutes=rng.uniform(-producer.jitter_minutes, producer.jitter_minutes))
        lands_at = next_deadline(producer.cron, producer.timezone, period.end) + jitter
        lands_at = max(lands_at, period.end + timedelta(minutes=1))
        # What finished before the dataset was registered was published (or, poll-only,
        # found by the new group's first sweep) as it was registered.
        backfilled = lands_at <= registered_at
        if backfilled:
            lands_at = registered_at + BACKFILL_AFTER
        kind, ready_at, restated = LANDED, lands_at, None
        if age in producer.late:
            lands_at = ready_at = sla.late_after(deadline) + producer.late[age]
        if broken_from is not None and period.start >= broken_from:
            kind, ready_at = FAILED, None
        elif age in producer.lost_events:
            kind = LOST_EVENT
            ready_at = lands_at.replace(minute=SAFETY_NET_MINUTE, second=0, microsecond=0)
            if ready_at <= lands_at:
                ready_at += timedelta(hours=1)
        elif age in producer.incomplete:
            kind = INCOMPLETE
            ready_at = sla.late_after(deadline) + producer.incomplete[age]
        elif producer.by_poll and not backfilled:
            ready_at = lands_at + timedelta(seconds=rng.uniform(*POLL_DELAY))
        if age in producer.restated:
            version, after = producer.restated[age]
            restated = (version, lands_at + after)
        if lands_at > now:
            continue  # its run has not finished yet
        if ready_at is not None and ready_at > now:
            ready_at = None
        found.append(Landing(age, period, deadline, kind, lands_at, ready_at, restated))
    return found[::-1]


def _broken_from(sla: FreshnessSla | None, *, registered_at: datetime, now: datetime):
    """The start of the newest period due at the last deadline already judged (its grace
    over) at ``now``: from it on, a broken pipeline delivered nothing."""
    if sla is None:
        return None
    deadline = sla.previous_deadline(now)
    while sla.late_after(deadline) > now:
        deadline = sla.previous_deadline(deadline - timedelta(seconds=1))
    if deadline <= registered_at:
        return None
    return sla.due_at(deadline)[-1].start


def snapshot_times(cron: str, *, since: datetime, until: datetime) -> list[datetime]:
    """The firings of ``cron`` (UTC) in ``(since, until]``, oldest first."""
    times, at = [], next_deadline(cron, "UTC", since)
    while at <= until:
        times.append(at)
        at = next_deadline(cron, "UTC", at)
    return times
