"""Reads for at-risk forecasts: the catalog as ``catalog.forecasts`` sees it (partitions,
arrival profiles, verified lineage and learned lags), and a dataset's forecast."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Min

from schedules import PartitionKeyError, Period, parse_partition_key, period_containing

from .. import arrival_profiles, forecasts
from ..freshness_state import sla_of
from ..models import Dataset, DatasetUsage, Partition, PartitionRevision
from .datasets import dataset_arrival_profile

# A daily dataset reads 24 hourly partitions; a monthly one 744. Coarser reads (an hourly
# job reading a daily table) are not followed: the hour does not wait for the day.
MAX_COVERING_KEYS = 800


def epoch(value: datetime) -> int:
    """An aware datetime as whole UTC epoch seconds."""
    return int(value.timestamp())


def covering_keys(period: Period, upstream: Dataset) -> tuple[str, ...] | None:
    """The keys of ``upstream``'s partitions covering ``period``: the same period, or the
    finer ones inside it; None when the upstream's periods are coarser or misaligned."""
    keys = []
    candidate = period_containing(period.start, upstream.partitioning, upstream.partition_timezone)
    while candidate.start < period.end and len(keys) < MAX_COVERING_KEYS:
        if candidate.start < period.start or candidate.end > period.end:
            return None
        keys.append(candidate.key)
        candidate = period_containing(
            candidate.end, upstream.partitioning, upstream.partition_timezone
        )
    return tuple(keys) if keys else None


def verified_upstreams(dataset: Dataset) -> list[Dataset]:
    """The registered, partitioned datasets read by the jobs that write ``dataset``
    (verified usage only), ordered by id; one query."""
    writers = DatasetUsage.objects.filter(
        dataset=dataset, direction=DatasetUsage.Direction.WRITE, verified=True
    ).values("job_id")
    return list(
        Dataset.objects.filter(
            usages__job_id__in=writers,
            usages__direction=DatasetUsage.Direction.READ,
            usages__verified=True,
        )
        .exclude(pk=dataset.pk)
        .exclude(partitioning=Dataset.Partitioning.NONE)
        .distinct()
        .order_by("pk")
    )


class CatalogWorld:
    """``forecasts.World`` over the catalog's tables at ``now`` (aware UTC), with each
    dataset's profile, arrivals and edges read once (about four queries per dataset
    met, one per partition)."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now
        self._datasets: dict[int, Dataset] = {}
        self._profiles: dict[int, arrival_profiles.ArrivalProfile | None] = {}
        self._arrivals: dict[int, dict[str, tuple[datetime, datetime]]] = {}
        self._edges: dict[int, list[tuple[Dataset, int | None]]] = {}

    def dataset(self, dataset_id: int) -> Dataset:
        if dataset_id not in self._datasets:
            self._datasets[dataset_id] = Dataset.objects.get(pk=dataset_id)
        return self._datasets[dataset_id]

    def period(self, dataset: Dataset, key: str) -> Period:
        interval = parse_partition_key(dataset.partitioning, key, dataset.partition_timezone)
        return Period(key=key, start=interval.start, end=interval.end)

    def profile(self, dataset: Dataset) -> arrival_profiles.ArrivalProfile | None:
        if dataset.pk not in self._profiles:
            self._profiles[dataset.pk] = dataset_arrival_profile(dataset=dataset, now=self.now)
        return self._profiles[dataset.pk]

    def partition(self, dataset: int, key: str) -> forecasts.PartitionState:
        """``forecasts.World.partition``: the current revision's state and ready time."""
        row = self.dataset(dataset)
        period = self.period(row, key)
        own = forecasts.own_profile(self.profile(row), period.end, time_zone=row.partition_timezone)
        sla = sla_of(row)
        deadline = sla.deadline_of(period) if sla is not None else None
        found = (
            Partition.objects.filter(dataset_id=dataset, key=key)
            .values_list("current_revision__state", "current_revision__ready_at")
            .first()
        )
        state, ready_at = found if found is not None else (None, None)
        if state == PartitionRevision.State.READY and ready_at is not None:
            return forecasts.PartitionState(
                epoch(period.end), forecasts.READY, epoch(ready_at), own=own
            )
        return forecasts.PartitionState(
            epoch(period.end),
            forecasts.FAILED if state == PartitionRevision.State.FAILED else forecasts.AWAITED,
            deadline=epoch(deadline) if deadline is not None else None,
            own=own,
        )

    def upstreams(self, dataset: int, key: str) -> list[forecasts.Upstream]:
        """``forecasts.World.upstreams``: verified lineage, covering keys, learned lags."""
        row = self.dataset(dataset)
        period = self.period(row, key)
        result = []
        for upstream, lag in self.edges(row):
            keys = covering_keys(period, upstream)
            if keys is not None:
                result.append(forecasts.Upstream(upstream.pk, keys, lag))
        return result

    def edges(self, dataset: Dataset) -> list[tuple[Dataset, int | None]]:
        """The registered, partitioned datasets that the jobs writing ``dataset`` read
        (verified usage only), with their learned lags."""
        if dataset.pk in self._edges:
            return self._edges[dataset.pk]
        upstreams = verified_upstreams(dataset)
        for upstream in upstreams:
            self._datasets.setdefault(upstream.pk, upstream)
        lags = self._lags(dataset, upstreams) if upstreams else {}
        self._edges[dataset.pk] = [(u, lags.get(u.pk)) for u in upstreams]
        return self._edges[dataset.pk]

    def arrivals(self, dataset: Dataset) -> dict[str, tuple[datetime, datetime]]:
        """``{key: (period end, first ready_at)}`` over the profile's window, as the
        profile counts arrivals (published or polled, outside restatements)."""
        if dataset.pk not in self._arrivals:
            since = arrival_profiles.window_start(
                self.now,
                dataset.partitioning,
                dataset.partition_timezone,
                settings.TIDEMARK_ARRIVAL_PROFILE_PERIODS,
            )
            rows = (
                PartitionRevision.objects.filter(
                    partition__dataset=dataset,
                    partition__start_at__gte=since,
                    partition__end_at__isnull=False,
                    state=PartitionRevision.State.READY,
                    restatement__isnull=True,
                )
                .values("partition_id", "partition__key", "partition__end_at")
                .annotate(first=Min("ready_at"))
                .values_list("partition__key", "partition__end_at", "first")
                .order_by()
            )
            self._arrivals[dataset.pk] = {key: (end, first) for key, end, first in rows}
        return self._arrivals[dataset.pk]

    def _lags(self, dataset: Dataset, upstreams: list[Dataset]) -> dict[int, int | None]:
        history = []
        up_arrivals = {u.pk: self.arrivals(u) for u in upstreams}
        for key, (end, ready) in self.arrivals(dataset).items():
            try:
                period = self.period(dataset, key)
            except PartitionKeyError:
                continue
            seen = {}
            for upstream in upstreams:
                keys = covering_keys(period, upstream)
                known = up_arrivals[upstream.pk]
                if keys and all(k in known for k in keys):
                    seen[upstream.pk] = max(epoch(known[k][1]) for k in keys)
            history.append((epoch(end), seen, epoch(ready)))
        return forecasts.edge_lags(
            history,
            percent=forecasts.DEFAULT_LAG_PERCENT,
            min_periods=settings.TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS,
        )


@dataclass(frozen=True)
class Forecast:
    """A dataset's forecast for one partition due at its next deadline.

    ``partition``: its key; ``deadline_at`` (aware UTC); ``estimate_at`` (aware UTC,
    None when blocked or unknown); ``basis``: what set it (``forecasts.Estimate``'s
    ``quantile``); ``at_risk``; ``blocked``; ``via`` and ``cause``: ``(namespace, name,
    partition)`` of the upstream partitions that set it, or None.
    """

    partition: str
    deadline_at: datetime
    estimate_at: datetime | None
    basis: str
    at_risk: bool
    blocked: bool
    via: tuple[str, str, str] | None
    cause: tuple[str, str, str] | None


def dataset_forecasts(
    dataset: Dataset,
    *,
    now: datetime,
    profile: arrival_profiles.ArrivalProfile | None = None,
) -> list[Forecast]:
    """Forecasts of the partitions of ``dataset`` due at its next deadline after ``now``
    (aware UTC) that are not ready, oldest first; empty without an SLA or when all are
    ready. ``profile``: the dataset's arrival profile at ``now`` when the caller has read
    it already (a page), else it is read here.

    Queries: the readiness of the due partitions; then, when one is waiting, per dataset
    met up the chain its profile, edges and arrivals, and per partition its state."""
    sla = sla_of(dataset)
    if sla is None:
        return []
    deadline = sla.next_deadline(now)
    periods = sla.due_at(deadline)
    ready = set(
        Partition.objects.filter(
            dataset=dataset,
            key__in=[p.key for p in periods],
            current_revision__state=PartitionRevision.State.READY,
        ).values_list("key", flat=True)
    )
    waiting = [p for p in periods if p.key not in ready]
    if not waiting:
        return []
    world = CatalogWorld(now=now)
    world._datasets[dataset.pk] = dataset
    if profile is not None:
        world._profiles[dataset.pk] = profile
    forecaster = forecasts.Forecaster(world, epoch(now))
    result = []
    for period in waiting:
        found = forecaster.estimate(dataset.pk, period.key)

        def named(ref):
            if ref is None:
                return None
            row = world.dataset(ref[0])
            return (row.namespace, row.name, ref[1])

        result.append(
            Forecast(
                partition=period.key,
                deadline_at=deadline,
                estimate_at=datetime.fromtimestamp(found.at, tz=UTC)
                if found.at is not None
                else None,
                basis=found.quantile,
                at_risk=found.at_risk(epoch(deadline)),
                blocked=found.blocked,
                via=named(found.via),
                cause=named(found.cause),
            )
        )
    return result


def _upstream(ref: tuple[str, str, str] | None) -> dict | None:
    if ref is None:
        return None
    return {"dataset": {"namespace": ref[0], "name": ref[1]}, "partition": ref[2]}


def dataset_forecast(
    *,
    dataset: Dataset,
    now: datetime,
    profile: arrival_profiles.ArrivalProfile | None = None,
) -> dict | None:
    """The forecast a page or the API shows (``dataset_forecasts``): the first partition
    at risk, else the oldest not ready, as a dict with ``via`` and ``cause`` as
    ``{dataset: {namespace, name}, partition}``; None when there is none."""
    found = dataset_forecasts(dataset, now=now, profile=profile)
    if not found:
        return None
    shown = next((f for f in found if f.at_risk), found[0])
    return {
        "partition": shown.partition,
        "deadline_at": shown.deadline_at,
        "estimate_at": shown.estimate_at,
        "basis": shown.basis,
        "at_risk": shown.at_risk,
        "blocked": shown.blocked,
        "via": _upstream(shown.via),
        "cause": _upstream(shown.cause),
    }
