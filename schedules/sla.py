"""Freshness SLAs: which logical periods are due at each deadline.

Tidemark's rule: at a deadline, every period that closed since the previous deadline is
due. With a daily ``30 6 * * *`` Europe/Berlin SLA on daily partitions, partition D is
due at 06:30 Berlin time on D+1; with a weekday-only cron, Monday's deadline covers the
periods of Friday, Saturday and Sunday, so no period is ever skipped.

An SLA with a calendar (``schedules.calendars``) has deadlines on business days only:
with ``next_business_day`` the rule above holds unchanged over those deadlines (what a
weekend or holiday deadline would have owed is due at the next business-day one); with
``skip``, a business-day deadline owes what closed since the cron firing before it, and
periods due at a firing on another day are owed never (``deadline_of`` is None).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from . import calendars, deadlines
from .calendars import BusinessCalendar
from .periods import DAILY, HOURLY, MONTHLY, Period, period_containing, periods_ending_in

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
        calendar: business days the deadlines apply on, or None: every firing is one.

    Raises (every deadline method):
        CalendarError: the cron never fires on a business day of ``calendar`` (refused
            when the SLA is written, ``calendars.next_business_deadline``).
    """

    cron: str
    time_zone: str
    grace_seconds: int
    partitioning: str
    partition_time_zone: str = "UTC"
    calendar: BusinessCalendar | None = None

    def next_deadline(self, after: datetime) -> datetime:
        """The first deadline strictly after ``after`` (UTC): a firing on a business day
        when the SLA has a calendar."""
        if self.calendar is None:
            return deadlines.next_deadline(self.cron, self.time_zone, after)
        return calendars.next_business_deadline(self.cron, self.time_zone, self.calendar, after)

    def previous_deadline(self, at_or_before: datetime) -> datetime:
        """The last deadline at or before ``at_or_before`` (UTC)."""
        if self.calendar is None:
            return deadlines.previous_deadline(self.cron, self.time_zone, at_or_before)
        return calendars.previous_business_deadline(
            self.cron, self.time_zone, self.calendar, at_or_before
        )

    @property
    def skips(self) -> bool:
        """Whether periods due at a firing on a non-business day are owed never."""
        return self.calendar is not None and self.calendar.non_business_day == calendars.SKIP

    def due_since(self, deadline: datetime) -> datetime:
        """Where what ``deadline`` (one of this SLA's deadlines) owes starts (UTC): the
        previous deadline; with ``skip``, the previous cron firing, business day or not
        (what closed before it was owed at that firing, so never)."""
        before = deadline - timedelta(seconds=1)
        if self.skips:
            return deadlines.previous_deadline(self.cron, self.time_zone, before)
        return self.previous_deadline(before)

    def due_at(self, deadline: datetime) -> list[Period]:
        """The periods due at ``deadline`` (one of this SLA's deadlines), oldest first: those
        that closed after ``due_since(deadline)`` and by the deadline."""
        return periods_ending_in(
            self.due_since(deadline), deadline, self.partitioning, self.partition_time_zone
        )

    def deadline_of(self, period: Period) -> datetime | None:
        """The deadline ``period`` is due at: the first one at or after its end (UTC); None
        when the SLA skips non-business days and the first cron firing at or after the
        period's end falls on one (the period is owed never)."""
        before_end = period.end - timedelta(seconds=1)
        if not self.skips:
            return self.next_deadline(before_end)
        firing = deadlines.next_deadline(self.cron, self.time_zone, before_end)
        return firing if self._on_business_day(firing) else None

    def _on_business_day(self, firing: datetime) -> bool:
        local_date = firing.astimezone(ZoneInfo(self.time_zone)).date()
        return self.calendar is None or self.calendar.is_business_day(local_date)

    def owed_periods(self, after: datetime, until: datetime, limit: int | None) -> list[Period]:
        """The periods ending in ``(after, until]`` that are owed (every one, unless the SLA
        skips non-business days), oldest first, the first ``limit`` of them (None: all).
        One cron step per firing in the window, not per period."""
        found: list[Period] = []
        firing, owed = None, True
        period = period_containing(after, self.partitioning, self.partition_time_zone)
        while period.end <= until and (limit is None or len(found) < limit):
            if self.skips and (firing is None or firing < period.end):
                # The first cron firing at or after the period's end decides; it decides
                # for every later period that ends by it too.
                firing = deadlines.next_deadline(
                    self.cron, self.time_zone, period.end - timedelta(seconds=1)
                )
                owed = self._on_business_day(firing)
            if owed:
                found.append(period)
            period = period_containing(period.end, self.partitioning, self.partition_time_zone)
        return found

    def late_after(self, deadline: datetime) -> datetime:
        """When a period due at ``deadline`` becomes late: the deadline plus grace."""
        return deadline + timedelta(seconds=self.grace_seconds)

    def late_seconds(self, deadline: datetime, at: datetime) -> int:
        """How late, at ``at``, a partition due at ``deadline`` and not ready by then is:
        whole seconds since deadline plus grace (``late_seconds``), 0 before that."""
        return late_seconds(self.late_after(deadline), at)

    def describe(self) -> str:
        """The SLA in words, e.g. "At 06:30 every day, Europe/Berlin, for each day's
        partition closed since the previous deadline", then the calendar's words (``on
        business days (DE-BY holidays); a deadline on another day moves to the next
        business day``)."""
        words = f"{deadlines.describe(self.cron)}, {self.time_zone}"
        unit = _PERIOD_WORDS.get(self.partitioning)
        if unit is not None:
            words = f"{words}, for each {unit}'s partition closed since the previous deadline"
        if self.calendar is not None:
            words = f"{words}; {self.calendar.describe()}"
        return words


def late_seconds(late_at: datetime, at: datetime) -> int:
    """How late a partition is at ``at`` (aware): whole seconds since ``late_at``, its
    deadline plus grace; 0 when ``at`` is not after it. The one measure of lateness: the
    freshness state, ``dataset.late`` notices and the dataset page's timeline all count
    from deadline plus grace."""
    return max(0, int((at - late_at).total_seconds()))
