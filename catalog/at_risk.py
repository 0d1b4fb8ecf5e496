"""At risk: telling the owner of a dataset with an SLA, and its subscribers, before the
deadline, that a partition will probably miss it (``catalog.forecasts`` states the
model; ``catalog.selectors.forecasts`` reads the catalog for it).

Each pass looks at the datasets with an SLA whose next deadline is ahead and within
``TIDEMARK_FORECAST_HORIZON_SECONDS`` (a day by default), forecasts the partitions due at
it that are not ready, and sends ``dataset.at_risk`` for each one at risk: once per
dataset and partition (the notification's dedup key), never paged. Consumers receive it
unless their subscription's event types leave it out (it is not opt-in: it is about the
SLA the producer promised). What happens after the deadline is ``catalog.freshness``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from . import notices
from .models import Dataset, Notification
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


def candidates(*, now: datetime):
    """The datasets a pass forecasts at ``now`` (aware UTC): an SLA, partitioned, not
    retired, the next deadline ahead within the horizon."""
    horizon = timedelta(seconds=settings.TIDEMARK_FORECAST_HORIZON_SECONDS)
    return (
        Dataset.objects.select_related("owner")
        .exclude(sla_cron="")
        .exclude(partitioning=Dataset.Partitioning.NONE)
        .exclude(lifecycle=Dataset.Lifecycle.RETIRED)
        .filter(next_deadline_at__gt=now, next_deadline_at__lte=now + horizon)
        .order_by("pk")
    )


def check_pass(*, now: datetime, on_told=lambda report: None) -> list[AtRiskReport]:
    """Forecast every candidate dataset at ``now`` (aware UTC) and tell each partition at
    risk not told before.

    Returns:
        The reports of the partitions told by this pass.
    """
    told = []
    for dataset in candidates(now=now).iterator(chunk_size=200):
        for forecast in dataset_forecasts(dataset, now=now):
            if not forecast.at_risk:
                continue
            report = tell(dataset, forecast, now=now)
            if report is not None:
                told.append(report)
                on_told(report)
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
    filters let it through; None when this partition was told before."""
    try:
        with transaction.atomic():
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
