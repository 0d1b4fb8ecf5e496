"""Freshness SLAs: which logical periods are due at each deadline.

Tidemark's rule: at a deadline, every period that closed since the previous deadline is
due. With a daily ``30 6 * * *`` Europe/Berlin SLA on daily partitions, partition D is
due at 06:30 Berlin time on D+1; with a weekday-only cron, Monday's deadline covers the
periods of Friday, Saturday and Sunday, so no period is ever skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from . import deadlines
from .periods import DAILY, HOURLY, MONTHLY, Period, periods_ending_in

_PERIOD_WORDS = {HOURLY: "hour", DAILY: "day", MONTHLY: "month"}


@dataclass(frozen=True)
class FreshnessSla:
    """A freshness SLA.

    Args:
        cron: five-field deadline cron, read in ``time_zone``.
        time_zone: IANA zone of the cron.
        grace_seconds: after the deadline, how long a missing partition is *due* before it
            is *late*.
        partitioning, partition_time_zone: how the dataset's periods are cut.
    """

    cron: str
    time_zone: str
    grace_seconds: int
    partitioning: str
    partition_time_zone: str = "UTC"

    def next_deadline(self, after: datetime) -> datetime:
        """The first deadline strictly after ``after`` (UTC)."""
        return deadlines.next_deadline(self.cron, self.time_zone, after)

    def previous_deadline(self, at_or_before: datetime) -> datetime:
        """The last deadline at or before ``at_or_before`` (UTC)."""
        return deadlines.previous_deadline(self.cron, self.time_zone, at_or_before)

    def due_at(self, deadline: datetime) -> list[Period]:
        """The periods due at ``deadline`` (one of this SLA's deadlines): those that closed
        after the previous deadline and by this one, oldest first."""
        previous = self.previous_deadline(deadline - timedelta(seconds=1))
        return periods_ending_in(previous, deadline, self.partitioning, self.partition_time_zone)

    def deadline_of(self, period: Period) -> datetime:
        """The deadline ``period`` is due at: the first one at or after its end (UTC)."""
        return self.next_deadline(period.end - timedelta(seconds=1))

    def late_after(self, deadline: datetime) -> datetime:
        """When a period due at ``deadline`` becomes late: the deadline plus grace."""
        return deadline + timedelta(seconds=self.grace_seconds)

    def late_seconds(self, deadline: datetime, at: datetime) -> int:
        """How late, at ``at``, a partition due at ``deadline`` and not ready by then is:
        whole seconds since deadline plus grace (``late_seconds``), 0 before that."""
        return late_seconds(self.late_after(deadline), at)

    def describe(self) -> str:
        """The SLA in words, e.g. "At 06:30 every day, Europe/Berlin, for each day's
        partition closed since the previous deadline"."""
        when = f"{deadlines.describe(self.cron)}, {self.time_zone}"
        unit = _PERIOD_WORDS.get(self.partitioning)
        if unit is None:
            return when
        return f"{when}, for each {unit}'s partition closed since the previous deadline"


def late_seconds(late_at: datetime, at: datetime) -> int:
    """How late a partition is at ``at`` (aware): whole seconds since ``late_at``, its
    deadline plus grace; 0 when ``at`` is not after it. The one measure of lateness: the
    freshness state, ``dataset.late`` notices and the dataset page's timeline all count
    from deadline plus grace."""
    return max(0, int((at - late_at).total_seconds()))
