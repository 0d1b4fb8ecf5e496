"""Consumer need-by times: when a subscribing team needs each partition of a dataset, and
how that compares with what the producer promises (its SLA).

A need-by is a cron read in an IANA zone, as an SLA deadline is, and is judged with the
same period arithmetic (``schedules.FreshnessSla``): at each need-by firing, every period
of the dataset that closed since the previous firing is needed; a period's need-by is the
first firing at or after its end. It has no grace: the consumer names its own time, so a
partition not ready at the need-by is late for that consumer at once. It has no calendar
either (a consumer that needs data on business days only writes a weekday cron).

Pure reads of a subscription's and its dataset's fields; no queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedules import FreshnessSla, local_and_utc

from . import freshness_state
from .models import Dataset, Subscription
from .notices import iso

# How many of the SLA's next deadlines a need-by is compared with.
COMPARED_DEADLINES = 3


def need_by_of(subscription: Subscription, dataset: Dataset) -> FreshnessSla | None:
    """The subscription's need-by as a schedule of ``dataset``'s periods (grace 0, no
    calendar), or None when it has none or the dataset is unpartitioned."""
    if not subscription.need_by_cron or dataset.partitioning == Dataset.Partitioning.NONE:
        return None
    return FreshnessSla(
        cron=subscription.need_by_cron,
        time_zone=subscription.need_by_timezone,
        grace_seconds=0,
        partitioning=dataset.partitioning,
        partition_time_zone=dataset.partition_timezone,
    )


def schedule(
    subscription: Subscription,
    dataset: Dataset,
    *,
    now: datetime,
    owed_from: datetime | None = None,
) -> None:
    """Set the first need-by deadline to judge (``need_by_next_at``; None without a
    need-by): the first one after ``now`` (aware UTC). Deadlines that passed before the
    need-by was set are never judged, as for an SLA.

    Args:
        owed_from: on a change, the earliest deadline the previous need-by had not
            judged yet (its ``need_by_next_at``), or None: deadlines of the new need-by
            from then on are still judged, so a change never skips one that is owed.

    Does not save.
    """
    need_by = need_by_of(subscription, dataset)
    if need_by is None:
        subscription.need_by_next_at = None
        return
    after = now if owed_from is None else min(now, owed_from - timedelta(seconds=1))
    subscription.need_by_next_at = need_by.next_deadline(after)


@dataclass(frozen=True)
class Comparison:
    """One period's need-by against its SLA deadline.

    ``partition``: the key of the oldest period due at ``sla_deadline_at`` (its need-by
    is the earliest of those due then); ``need_by_at``: that period's need-by (aware
    UTC); ``gap_seconds``: ``sla_deadline_at - need_by_at``, positive when the consumer
    needs it before the producer promises it.
    """

    partition: str
    sla_deadline_at: datetime
    need_by_at: datetime

    @property
    def gap_seconds(self) -> int:
        return int((self.sla_deadline_at - self.need_by_at).total_seconds())

    @property
    def earlier(self) -> bool:
        return self.gap_seconds > 0


def compare(
    subscription: Subscription, dataset: Dataset, *, now: datetime, count: int = COMPARED_DEADLINES
) -> list[Comparison]:
    """The subscription's need-by against the dataset's next ``count`` SLA deadlines after
    ``now`` (aware UTC), oldest first; empty when either is missing. Each SLA deadline is
    compared through the oldest period due at it (a deadline owing nothing, under a
    ``skip`` calendar, is left out)."""
    sla, need_by = freshness_state.sla_of(dataset), need_by_of(subscription, dataset)
    if sla is None or need_by is None:
        return []
    found, at = [], now
    for _ in range(count):
        at = sla.next_deadline(at)
        periods = sla.due_at(at)
        if periods:
            oldest = periods[0]
            found.append(Comparison(oldest.key, at, need_by.deadline_of(oldest)))
    return found


def gap_seconds(subscription: Subscription, dataset: Dataset, *, now: datetime) -> int | None:
    """The most a period's need-by falls before its SLA deadline over ``compare``'s
    deadlines (seconds; positive: needed earlier than promised), or None when there is
    nothing to compare (no need-by, no SLA). Stored as ``need_by_gap_seconds`` for the
    governance report."""
    comparisons = compare(subscription, dataset, now=now)
    return max(c.gap_seconds for c in comparisons) if comparisons else None


def earliest_need(comparisons: list[Comparison]) -> Comparison | None:
    """Of ``comparisons``, the one where the need-by comes furthest before the SLA
    deadline; None when the need-by is never earlier."""
    earlier = [c for c in comparisons if c.earlier]
    return max(earlier, key=lambda c: c.gap_seconds) if earlier else None


def next_need_by(subscription: Subscription, dataset: Dataset, *, now: datetime) -> datetime | None:
    """The subscription's first need-by deadline after ``now`` (aware UTC), or None."""
    need_by = need_by_of(subscription, dataset)
    return need_by.next_deadline(now) if need_by else None


def next_need_by_shown(
    subscription: Subscription, dataset: Dataset, *, now: datetime
) -> dict[str, str] | None:
    """``next_need_by`` as the API shows a deadline: ``{"local": ISO 8601 with the
    need_by_timezone's offset, "utc": ISO 8601 ending in Z}``, or None."""
    at = next_need_by(subscription, dataset, now=now)
    return local_and_utc(at, subscription.need_by_timezone) if at else None


def before_sla_detail(comparison: Comparison, dataset: Dataset) -> str:
    """Words for a consumer whose need-by comes before the producer's SLA deadline."""
    minutes = comparison.gap_seconds // 60
    return (
        f"partition {comparison.partition} of {dataset} is needed by "
        f"{iso(comparison.need_by_at)}, {minutes} min before the SLA deadline "
        f"{iso(comparison.sla_deadline_at)} that team {dataset.owner.slug} promises; you "
        "will be told dataset.late at your need-by when it is not ready, and the producer "
        "is not paged before its own deadline"
    )
