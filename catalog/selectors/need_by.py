"""Reads about consumers' need-by times: who needs a dataset by when (the dataset page and
API), and the governance report of datasets needed earlier than their producers promise."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q, QuerySet

from .. import need_by
from ..models import Dataset, Subscription, Team


@dataclass(frozen=True)
class NeededBy:
    """One subscription's need-by against its dataset's SLA.

    ``next_need_by_at``: the subscription's next need-by deadline (aware UTC; None when
    its dataset is unpartitioned). ``sla_deadline_at`` and ``need_by_at``: the SLA
    deadline and the need-by of the same period, the one where the need-by comes furthest
    before the SLA over the next deadlines (``need_by.compare``), else the first one
    compared; None without an SLA. ``earlier_than_sla``: whether the consumer needs it
    before it is promised (None without an SLA); ``gap_minutes``: ``sla_deadline_at -
    need_by_at`` in whole minutes (positive: earlier), None without an SLA.
    """

    subscription: Subscription
    next_need_by_at: datetime | None
    sla_deadline_at: datetime | None
    need_by_at: datetime | None
    earlier_than_sla: bool | None
    gap_minutes: int | None

    @property
    def team(self) -> str:
        return self.subscription.team.slug

    @property
    def dataset(self) -> Dataset:
        return self.subscription.dataset

    @property
    def job(self) -> dict[str, str] | None:
        s = self.subscription
        return {"namespace": s.job_namespace, "name": s.job_name} if s.job_name else None


def needed_by_rows(subscriptions: Iterable[Subscription], *, now: datetime) -> list[NeededBy]:
    """``NeededBy`` of each of ``subscriptions`` (with ``team`` and ``dataset`` joined) at
    ``now`` (aware UTC); pure arithmetic, no query."""
    rows = []
    for subscription in subscriptions:
        dataset = subscription.dataset
        comparisons = need_by.compare(subscription, dataset, now=now)
        shown = need_by.earliest_need(comparisons) or (comparisons[0] if comparisons else None)
        rows.append(
            NeededBy(
                subscription=subscription,
                next_need_by_at=need_by.next_need_by(subscription, dataset, now=now),
                sla_deadline_at=shown.sla_deadline_at if shown else None,
                need_by_at=shown.need_by_at if shown else None,
                earlier_than_sla=shown.earlier if shown else None,
                gap_minutes=shown.gap_seconds // 60 if shown else None,
            )
        )
    return rows


def dataset_needed_by(*, dataset: Dataset, now: datetime) -> list[NeededBy]:
    """Who needs ``dataset`` by when: its subscriptions with a need-by, by team slug then
    id, each judged at ``now`` (aware UTC). One query."""
    subscriptions = (
        Subscription.objects.filter(dataset=dataset)
        .exclude(need_by_cron="")
        .select_related("team")
        .order_by("team__slug", "id")
    )
    rows = list(subscriptions)
    for subscription in rows:
        subscription.dataset = dataset  # with its owner, as the caller loaded it
    return needed_by_rows(rows, now=now)


def need_by_before_sla_list(*, team: Team | None = None) -> QuerySet[Subscription]:
    """The governance report's rows: subscriptions whose need-by falls before their
    dataset's SLA deadline (stored ``need_by_gap_seconds`` > 0, refreshed on every change
    of either and at every need-by judged), on datasets not retired.

    Args:
        team: only rows this team is party to, as the dataset's owner or as the consumer;
            None: every team's.

    Returns:
        Subscriptions with ``team``, ``dataset`` and its owner joined; the caller orders
        them (a cursor page) and makes them ``NeededBy`` rows (``needed_by_rows``).
    """
    queryset = (
        Subscription.objects.filter(need_by_gap_seconds__gt=0)
        .exclude(dataset__lifecycle=Dataset.Lifecycle.RETIRED)
        .select_related("team", "dataset__owner")
    )
    if team is not None:
        queryset = queryset.filter(Q(team=team) | Q(dataset__owner=team))
    return queryset
