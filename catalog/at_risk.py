"""At risk: telling the owner of a dataset with an SLA, and its subscribers, before the
deadline, that a partition will probably miss it (``catalog.forecasts`` states the
model; ``catalog.selectors.forecasts`` reads the catalog for it).

A dataset is forecast while its next deadline is ahead and within
``TIDEMARK_FORECAST_HORIZON_SECONDS`` (a day by default): the partitions due at it that
are not ready are forecast, and ``dataset.at_risk`` is sent for each one at risk: once
per dataset and partition (the notification's dedup key), never paged. Consumers receive
it unless their subscription's event types leave it out (it is not opt-in: it is about
the SLA the producer promised). What happens after the deadline is
``catalog.freshness``'s.

Each forecast dataset (an SLA, partitioned, not retired) stores when it is next forecast
(``next_forecast_at``, indexed), so a pass costs what is due, not every dataset with an
SLA. After a forecast (``plan``) it is:

- the next deadline minus the horizon, while that is ahead (nothing to forecast yet);
- the deadline, when every partition due at it is ready or already told at risk (nothing
  can change that is worth telling; at the deadline the following one is planned);
- else half of ``TIDEMARK_FORECAST_SECONDS`` later (no later than the deadline): an
  upstream can fall behind at any moment, so an awaited partition is forecast on every
  beat, and half the cadence lets the next beat's pass take it whatever its jitter.

Registration, an SLA or partitioning change sets it to now (``schedule``): the next pass
plans it. A partition that was ready is not looked at again before its deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from . import notices, passes
from .freshness_state import sla_of
from .models import Dataset, Notification, Partition, PartitionRevision
from .notices import iso
from .selectors import dataset_forecasts
from .selectors.forecasts import Forecast

AT_RISK = Notification.Type.DATASET_AT_RISK


@dataclass(frozen=True)
class AtRiskReport:
    """One partition told as at risk."""

    dataset: str
    partition: str
    estimate_at: datetime | None


def forecast_wanted(dataset: Dataset) -> bool:
    """Whether the dataset is forecast at all: an SLA, partitioned, not retired."""
    return (
        bool(dataset.sla_cron)
        and dataset.partitioning != Dataset.Partitioning.NONE
        and dataset.lifecycle != Dataset.Lifecycle.RETIRED
    )


def schedule(dataset: Dataset, *, now: datetime) -> None:
    """Ask the next pass to plan the dataset's forecasts (registration, an SLA or
    partitioning change), or stop forecasting one that is not ``forecast_wanted``.

    Args:
        now: aware UTC instant of the change.

    Does not save; the caller saves the dataset.
    """
    dataset.next_forecast_at = now if forecast_wanted(dataset) else None


def recheck_after() -> timedelta:
    """How soon a dataset with an awaited partition is forecast again: half of
    ``TIDEMARK_FORECAST_SECONDS`` (see the module's rule)."""
    return timedelta(seconds=settings.TIDEMARK_FORECAST_SECONDS / 2)


def plan(
    dataset: Dataset, *, now: datetime, on_told: Callable[[AtRiskReport], None]
) -> datetime | None:
    """Forecast one due dataset at ``now`` (aware UTC) when its next deadline is within
    the horizon, tell its partitions at risk, and return when it is next forecast (the
    module's rule; None: not forecast any more).

    Queries: none before the horizon; else ``dataset_forecasts``'s, and a notice's
    writes per partition told.
    """
    sla = sla_of(dataset)
    if sla is None or not forecast_wanted(dataset):
        return None
    deadline = sla.next_deadline(now)
    opens = deadline - timedelta(seconds=settings.TIDEMARK_FORECAST_HORIZON_SECONDS)
    if opens > now:
        return opens
    settled = True
    for forecast in dataset_forecasts(dataset, now=now):
        if not forecast.at_risk:
            settled = False
            continue
        report = tell(dataset, forecast, now=now)
        if report is not None:
            on_told(report)
    if settled:  # all ready, or all told: nothing more to say before the deadline
        return deadline
    return min(now + recheck_after(), deadline)


@dataclass(frozen=True)
class Check:
    """One batch: the partitions it ``told`` and how many datasets it ``checked``."""

    told: list[AtRiskReport]
    checked: int


def check_batch(*, now: datetime, limit: int = 200) -> Check:
    """Forecast up to ``limit`` datasets whose ``next_forecast_at`` has passed by ``now``
    (aware UTC).

    The rows are claimed in one short transaction (SKIP LOCKED, so two passes share the
    work) by moving them a recheck ahead (``recheck_after``), then forecast outside it,
    so no dataset row stays locked while upstreams are read; each one's plan is stored
    by compare-and-set on the claim, so an SLA change meanwhile wins. A worker that dies
    mid-batch loses nothing: its datasets come due again at the claim.

    Queries: two to claim, whatever the number of datasets not due; per dataset due,
    ``plan``'s and one update when its plan differs from the claim.
    """
    claimed_until = now + recheck_after()
    with transaction.atomic():
        datasets = list(
            Dataset.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("owner")
            .filter(next_forecast_at__lte=now)
            .order_by("next_forecast_at", "pk")[:limit]
        )
        if datasets:
            Dataset.objects.filter(pk__in=[d.pk for d in datasets]).update(
                next_forecast_at=claimed_until
            )
    told: list[AtRiskReport] = []
    for dataset in datasets:
        following = plan(dataset, now=now, on_told=told.append)
        if following != claimed_until:
            Dataset.objects.filter(pk=dataset.pk, next_forecast_at=claimed_until).update(
                next_forecast_at=following
            )
    return Check(told=told, checked=len(datasets))


def run_pass(
    *,
    clock: Callable[[], datetime],
    limit: int = 200,
    budget_seconds: float | None = None,
    on_told: Callable[[AtRiskReport], None] = lambda report: None,
) -> passes.PassSummary:
    """``check_batch`` batch after batch while they come back full, for at most
    ``budget_seconds`` (``passes.run_batches``); ``clock`` is read per batch.

    Returns:
        The summary: ``handled`` counts the partitions told; ``more_due`` asks the
        caller to ring for another pass.
    """

    def batch() -> tuple[int, bool]:
        result = check_batch(now=clock(), limit=limit)
        for report in result.told:
            on_told(report)
        return len(result.told), result.checked == limit

    return passes.run_batches(batch, budget_seconds=budget_seconds)


def check_pass(
    *,
    now: datetime,
    limit: int = 200,
    on_told: Callable[[AtRiskReport], None] = lambda report: None,
) -> list[AtRiskReport]:
    """Every dataset due at ``now`` (aware UTC), batch after batch with no time budget
    (a shell, the tests); the task runs ``run_pass``.

    Returns:
        The reports of the partitions told by this pass.
    """
    told: list[AtRiskReport] = []
    while True:
        result = check_batch(now=now, limit=limit)
        for report in result.told:
            on_told(report)
        told.extend(result.told)
        if result.checked < limit:
            return told


def _ref(ref: tuple[str, str, str] | None) -> dict | None:
    if ref is None:
        return None
    namespace, name, partition = ref
    return {"dataset": {"namespace": namespace, "name": name}, "partition": partition}


def payload(dataset: Dataset, forecast: Forecast) -> dict:
    """The ``dataset.at_risk`` data (the event catalog's schema)."""
    return {
        "dataset": {"namespace": dataset.namespace, "name": dataset.name},
        "owner": dataset.owner.slug,
        "partition": forecast.partition,
        "deadline_at": iso(forecast.deadline_at),
        "estimate_at": iso(forecast.estimate_at),
        "blocked": forecast.blocked,
        "basis": forecast.basis,
        "via": _ref(forecast.via),
        "cause": _ref(forecast.cause),
    }


def tell(dataset: Dataset, forecast: Forecast, *, now: datetime) -> AtRiskReport | None:
    """``dataset.at_risk`` to the owner team's contacts and the subscribers whose
    filters let it through; None when this partition was told before, or is ready.

    The forecast read the partition awaited before reading its upstreams, outside any
    transaction: it is read again here, its row locked as a publish locks it, so a
    partition that landed meanwhile (told ready) is never then told at risk, and one
    landing now waits for this notice to commit first."""
    try:
        with transaction.atomic():
            if _ready_now(dataset, forecast.partition):
                return None
            notification = notices.notification_write(
                type=AT_RISK,
                dataset=dataset,
                dedup_key=f"at_risk:{dataset.pk}:{forecast.partition}",
                data=payload(dataset, forecast),
                now=now,
            )
            notices.fan_out(
                notification=notification,
                dataset=dataset,
                partition_key=forecast.partition,
                now=now,
                extra_endpoints=notices.contact_endpoints(dataset.owner),
            )
    except IntegrityError:
        return None  # told before
    return AtRiskReport(str(dataset), forecast.partition, forecast.estimate_at)


def _ready_now(dataset: Dataset, key: str) -> bool:
    """Whether partition ``key`` of ``dataset`` is ready, its row locked until the
    transaction ends (a publish of it waits; one creating it is not seen before it
    commits)."""
    current = (
        Partition.objects.select_for_update()
        .filter(dataset=dataset, key=key)
        .values_list("current_revision_id", flat=True)
        .first()
    )
    return (
        current is not None
        and PartitionRevision.objects.filter(
            pk=current, state=PartitionRevision.State.READY
        ).exists()
    )
