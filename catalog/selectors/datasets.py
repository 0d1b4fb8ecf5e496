"""Reads of teams, datasets, partitions, restatements, subscriptions, keys, endpoints and
deliveries."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from typing import TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from schedules import period_containing

from .. import (
    arrival_profiles,
    errors,
    freshness_state,
    future_partitions,
    sla_suggestions,
    success_counts,
    unknown_datasets,
)
from ..identity import DatasetIdentity, normalise_dataset_identity
from ..models import (
    ApiKey,
    Dataset,
    Delivery,
    Endpoint,
    EndpointSuccessHour,
    Partition,
    PartitionRevision,
    Restatement,
    Subscription,
    SubscriptionEndpoint,
    Team,
)

MAX_ID = 2**63 - 1  # a bigint: larger ids cannot exist (and overflow SQLite)
T = TypeVar("T")


def _one(queryset: QuerySet[T], pk: int) -> T | None:
    """The row of ``queryset`` with primary key ``pk``, or None (also for ids no row can
    have: they are not even sent to the database)."""
    return queryset.filter(pk=pk).first() if 0 < pk <= MAX_ID else None


def team_get(*, slug: str) -> Team:
    """The team with ``slug``; raises TeamNotFound."""
    team = Team.objects.filter(slug=slug).first()
    if team is None:
        raise errors.TeamNotFound(f"no team {slug!r}")
    return team


def dataset_list(
    *,
    owner: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    criticality: str | None = None,
    lifecycle: str | None = None,
    search: str | None = None,
) -> QuerySet[Dataset]:
    """Datasets matching every given filter, ordered by namespace then name.

    Args:
        owner: team slug; namespace, name: exact, normalised as at registration (a name
            is case-folded only with its namespace given);
        search: case-insensitive substring of the name or description.
    """
    queryset = Dataset.objects.select_related("owner").order_by("namespace", "name", "id")
    if owner:
        queryset = queryset.filter(owner__slug=owner)
    if namespace or name:
        identity = _identity_or_none(namespace or "", name)
        if identity is None:
            return queryset.none()
        if namespace:
            queryset = queryset.filter(namespace=identity.namespace)
        if name:
            queryset = queryset.filter(name=identity.name)
    if criticality:
        queryset = queryset.filter(criticality=criticality)
    if lifecycle:
        queryset = queryset.filter(lifecycle=lifecycle)
    if search:
        queryset = queryset.filter(Q(name__icontains=search) | Q(description__icontains=search))
    return queryset


def _identity_or_none(namespace: str, name: str | None):
    """Normalise a filter's identity; a bare name is matched exactly."""
    try:
        if namespace:
            return normalise_dataset_identity(namespace, name or "x")
        return DatasetIdentity(namespace="", name=name or "")
    except ValueError:
        return None


def dataset_get(*, namespace: str, name: str) -> Dataset:
    """The dataset with this identity (normalised first).

    Raises:
        DatasetNotFound: none is registered, or the identity is malformed.
    """
    try:
        identity = normalise_dataset_identity(namespace, name)
    except ValueError:
        identity = None
    dataset = (
        Dataset.objects.select_related("owner")
        .filter(namespace=identity.namespace, name=identity.name)
        .first()
        if identity
        else None
    )
    if dataset is None:
        raise unknown_datasets.dataset_not_found(namespace, name)
    return dataset


def dataset_get_by_id(*, dataset_id: int) -> Dataset:
    """The dataset with primary key ``dataset_id``; raises DatasetNotFound."""
    dataset = _one(Dataset.objects.select_related("owner"), dataset_id)
    if dataset is None:
        raise errors.DatasetNotFound(f"no dataset with id {dataset_id}")
    return dataset


def partition_list(
    *,
    dataset: Dataset,
    state: str | None = None,
    logical_from: date | datetime | None = None,
    logical_to: date | datetime | None = None,
) -> QuerySet[Partition]:
    """A dataset's partitions, newest logical period first.

    Args:
        state: the current revision's state (``pending``, ``ready``, ``failed``), or
            ``missing`` for partitions without any revision.
        logical_from: inclusive lower bound on the logical start (UTC; a date means its
            00:00 UTC).
        logical_to: exclusive upper bound on the logical start.
    """
    queryset = Partition.objects.filter(dataset=dataset).select_related("current_revision")
    if state == "missing":
        queryset = queryset.filter(current_revision__isnull=True)
    elif state:
        queryset = queryset.filter(current_revision__state=state)
    if logical_from is not None:
        queryset = queryset.filter(start_at__gte=_as_utc(logical_from))
    if logical_to is not None:
        queryset = queryset.filter(start_at__lt=_as_utc(logical_to))
    return queryset.order_by("-start_at", "-key")


def partition_get(*, dataset: Dataset, key: str) -> Partition:
    """One partition of ``dataset`` by key, its current revision joined (never a revision
    staged in a restatement); raises PartitionNotFound."""
    partition = (
        Partition.objects.filter(dataset=dataset, key=key)
        .select_related("current_revision")
        .first()
    )
    if partition is None:
        raise errors.PartitionNotFound(f"{dataset} has no partition {key!r}")
    return partition


def partition_latest_ready(*, dataset: Dataset, now: datetime) -> Partition | None:
    """The newest partition whose current revision is ready and whose period has started
    by ``now`` (aware UTC), or None. A future partition (of a dataset that accepts them)
    is not the latest before its period starts."""
    return (
        Partition.objects.filter(
            future_partitions.started(now),
            dataset=dataset,
            current_revision__state=PartitionRevision.State.READY,
        )
        .select_related("current_revision")
        .order_by("-start_at", "-key")
        .first()
    )


def dataset_arrival_profile(
    *, dataset: Dataset, now: datetime, periods: int | None = None
) -> arrival_profiles.ArrivalProfile | None:
    """The dataset's learned arrival profile over its last ``periods`` closed periods
    before ``now`` (aware UTC; default ``TIDEMARK_ARRIVAL_PROFILE_PERIODS``), in one
    query (the ``partition_newest`` index).

    Each partition's arrival is the first ``ready_at`` of its revisions published or
    found by the poll outside a restatement (a later version or a promoted restatement
    does not move it). Partitions newer than the window are read too, so one backfilled
    after them is known as such (``catalog.arrival_profiles.without_backfills``).

    With an SLA, its ``sla_suggestion`` says whether the SLA is far from these arrivals
    (``catalog.sla_suggestions``, from ``TIDEMARK_SLA_SUGGESTION_MIN_PERIODS`` arrivals).

    Returns:
        ``ArrivalProfile`` (groups with fewer than ``TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS``
        arrivals have no quantiles), or None for an unpartitioned dataset.
    """
    if dataset.partitioning == Dataset.Partitioning.NONE:
        return None
    count = periods or settings.TIDEMARK_ARRIVAL_PROFILE_PERIODS
    since = arrival_profiles.window_start(
        now, dataset.partitioning, dataset.partition_timezone, count
    )
    until = period_containing(now, dataset.partitioning, dataset.partition_timezone).start
    # From the revisions' side: an inner join the planner runs as a nested loop over the
    # window's partitions (a LEFT JOIN from partitions made it scan every revision).
    rows = PartitionRevision.objects.filter(
        partition__dataset=dataset,
        partition__start_at__gte=since,
        partition__end_at__isnull=False,
    ).first_arrivals("partition__end_at")
    arrivals = [arrival_profiles.Arrival(period_end=end, ready_at=ready) for end, ready in rows]
    profile = arrival_profiles.profile(
        arrivals,
        time_zone=dataset.partition_timezone,
        min_periods=settings.TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS,
        until=until,
    )
    sla = freshness_state.sla_of(dataset)
    suggestion = None
    if sla is not None:
        counted, _ = arrival_profiles.counted_arrivals(arrivals, until=until)
        suggestion = sla_suggestions.suggest(
            counted, sla, min_periods=settings.TIDEMARK_SLA_SUGGESTION_MIN_PERIODS
        )
    return dataclasses.replace(
        profile, window_periods=count, since=since, sla_suggestion=suggestion
    )


def restatement_list(*, dataset: Dataset) -> QuerySet[Restatement]:
    """A dataset's restatements, newest first, each with its staged revisions (and their
    partition keys) prefetched as ``staged``, for ``restatement_progress``."""
    return (
        Restatement.objects.filter(dataset=dataset)
        .prefetch_related(
            Prefetch(
                "revisions",
                queryset=PartitionRevision.objects.select_related("partition").only(
                    "id",
                    "state",
                    "version",
                    "code_version",
                    "ready_at",
                    "manifest",
                    "restatement_id",
                    "partition__id",
                    "partition__key",
                    "partition__current_revision_id",
                ),
                to_attr="staged",
            )
        )
        .order_by("-opened_at", "-id")
    )


def restatement_get(*, dataset: Dataset, restatement_id: int) -> Restatement:
    """One restatement of ``dataset``, staged revisions prefetched; raises
    RestatementNotFound (also for another dataset's restatement)."""
    restatement = _one(restatement_list(dataset=dataset), restatement_id)
    if restatement is None:
        raise errors.RestatementNotFound(f"{dataset} has no restatement {restatement_id}")
    restatement.dataset = dataset  # with its owner, as the caller loaded it
    return restatement


def restatement_progress(restatement: Restatement) -> list[dict]:
    """Per partition of the range, in key order: ``{"partition", "state" (missing,
    pending, ready, failed), "current" (the staged revision is current: promoted),
    "code_version", "ready_at"}``. Uses the ``staged`` prefetch of ``restatement_list``."""
    staged = {rev.partition.key: rev for rev in restatement.staged}
    rows = []
    for key in restatement.partition_keys:
        rev = staged.get(key)
        rows.append(
            {
                "partition": key,
                "state": rev.state if rev else "missing",
                "current": bool(rev and rev.partition.current_revision_id == rev.pk),
                "code_version": rev.code_version if rev else None,
                "ready_at": rev.ready_at if rev else None,
            }
        )
    return rows


def subscription_list(*, team: Team) -> QuerySet[Subscription]:
    """The team's subscriptions, newest first, with dataset and endpoint joined and
    their other endpoints (``more_endpoints``) prefetched."""
    return (
        Subscription.objects.filter(team=team)
        .select_related("team", "dataset", "endpoint")
        .prefetch_related(
            Prefetch(
                "more_endpoints",
                queryset=SubscriptionEndpoint.objects.select_related("endpoint").order_by("pk"),
            )
        )
        .order_by("-created_at", "-id")
    )


def _as_utc(value: date | datetime) -> datetime:
    if isinstance(value, datetime):
        return value if timezone.is_aware(value) else timezone.make_aware(value, UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def api_key_list(*, team: Team) -> QuerySet[ApiKey]:
    """The team's API keys (revoked and expired included), newest first."""
    return ApiKey.objects.filter(team=team).order_by("-created_at", "-id")


def api_key_get(*, team: Team, public_id: str) -> ApiKey:
    """One of the team's keys by public id; raises ApiKeyNotFound (others' are hidden)."""
    key = ApiKey.objects.filter(team=team, public_id=public_id).first()
    if key is None:
        raise errors.ApiKeyNotFound(f"your team has no API key {public_id!r}")
    return key


# The window of an endpoint's health (its successes and success rate): the last day, in
# whole hours (``success_counts.health_window_start``).
HEALTH_WINDOW = success_counts.HEALTH_WINDOW


def _delivery_count(condition: Q) -> Coalesce:
    """The number of the outer endpoint's deliveries matching ``condition``, as one
    correlated subquery (each count reads its own index range, not every delivery)."""
    return Coalesce(
        Subquery(
            Delivery.objects.filter(condition, endpoint_id=OuterRef("pk"))
            .order_by()
            .values("endpoint_id")
            .annotate(n=Count("pk"))
            .values("n")[:1]
        ),
        0,
    )


def _successes_since(since: datetime) -> Coalesce:
    """The outer endpoint's successes in the hours from ``since`` (on the hour) on, summed
    from its hourly counters (one range of their unique index, about 25 rows)."""
    return Coalesce(
        Subquery(
            EndpointSuccessHour.objects.filter(endpoint_id=OuterRef("pk"), hour__gte=since)
            .order_by()
            .values("endpoint_id")
            .annotate(n=Sum("succeeded"))
            .values("n")[:1]
        ),
        0,
    )


def endpoint_list(*, team: Team, now: datetime | None = None) -> QuerySet[Endpoint]:
    """The team's endpoints with delivery counts and ``is_throttled`` (its Retry-After
    pause, ``throttled_until``, still runs).

    The counts: ``n_succeeded``, deliveries that succeeded in the health window;
    ``n_waiting``, pending or retrying; ``n_dead_letters``, rejected or dead, all kept;
    ``n_dead_recent``, those of them that finished in the window, for the success rate.
    The window is whole hours, as the success counters are kept: from the start of the
    UTC hour containing ``now - HEALTH_WINDOW`` on (``success_counts.health_window_start``),
    so 24 to 25 hours, the same for successes and dead letters.

    Args:
        now: aware UTC instant; default the current time.

    Cost: per endpoint, about 25 rows of its hourly success counters
    (``EndpointSuccessHour``) and one range of each partial index of waiting deliveries
    and dead letters; never its deliveries of the day, nor its whole history.
    """
    since = success_counts.health_window_start(now or timezone.now())
    dead = Q(state__in=[Delivery.State.REJECTED, Delivery.State.DEAD])
    return (
        Endpoint.objects.filter(team=team)
        .annotate(
            is_throttled=ExpressionWrapper(
                Q(throttled_until__gt=Now()), output_field=BooleanField()
            ),
            n_succeeded=_successes_since(since),
            n_waiting=_delivery_count(
                Q(state__in=[Delivery.State.PENDING, Delivery.State.RETRYING])
            ),
            n_dead_letters=_delivery_count(dead),
            n_dead_recent=_delivery_count(dead & Q(finished_at__gte=since)),
        )
        .order_by("-id")
    )


def endpoint_get(*, team: Team, endpoint_id: int) -> Endpoint:
    """One of the team's endpoints; raises EndpointNotFound (others' are hidden)."""
    endpoint = _one(Endpoint.objects.filter(team=team), endpoint_id)
    if endpoint is None:
        raise errors.EndpointNotFound(f"your team has no endpoint {endpoint_id}")
    return endpoint


def delivery_list(
    *, team: Team, state: str | None = None, endpoint_id: int | None = None
) -> QuerySet[Delivery]:
    """Deliveries to the team's endpoints, newest first, with notification and endpoint."""
    queryset = Delivery.objects.filter(endpoint__team=team).select_related(
        "notification", "endpoint"
    )
    if state == "dead_letter":
        queryset = queryset.filter(state__in=["rejected", "dead"])
    elif state:
        queryset = queryset.filter(state=state)
    if endpoint_id is not None:
        queryset = queryset.filter(endpoint_id=endpoint_id)
    return queryset.order_by("-id")


def dead_letter_newest(*, team: Team, limit: int) -> list[Delivery]:
    """The team's ``limit`` newest dead letters (rejected or dead), newest first, with
    notification and endpoint.

    Cost: two queries however many endpoints the team has and however many dead letters
    the retention window keeps. On PostgreSQL the ids come from one statement that takes,
    for each of the team's endpoints, a backward range of at most ``limit`` entries of
    ``delivery_dead_letter_by_id`` (a LATERAL subquery); the embedded SQLite mode, which
    has no LATERAL, asks per endpoint. Then the ``limit`` rows picked, with their joins.
    """
    newest = _dead_letter_ids(team.pk, limit)
    if not newest:
        return []
    return list(
        Delivery.objects.filter(pk__in=newest)
        .select_related("notification", "endpoint")
        .order_by("-id")
    )


_DEAD_STATES = (Delivery.State.REJECTED, Delivery.State.DEAD)


def _dead_letter_ids(team_id: int, limit: int) -> list[int]:
    if connection.vendor == "postgresql":
        deliveries, endpoints = Delivery._meta.db_table, Endpoint._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT d.id FROM {endpoints} e CROSS JOIN LATERAL ("  # noqa: S608 - table names
                f" SELECT id FROM {deliveries} WHERE endpoint_id = e.id"
                "  AND state IN (%s, %s) ORDER BY id DESC LIMIT %s"
                ") d WHERE e.team_id = %s ORDER BY d.id DESC LIMIT %s",
                [*_DEAD_STATES, limit, team_id, limit],
            )
            return [row[0] for row in cursor.fetchall()]
    ids: list[int] = []
    for endpoint_id in Endpoint.objects.filter(team_id=team_id).values_list("pk", flat=True):
        ids.extend(
            Delivery.objects.filter(endpoint_id=endpoint_id, state__in=_DEAD_STATES)
            .order_by("-id")
            .values_list("pk", flat=True)[:limit]
        )
    return sorted(ids, reverse=True)[:limit]


def delivery_get(*, team: Team, delivery_id: int) -> Delivery:
    """One delivery to the team's endpoints, with its attempt log; raises DeliveryNotFound."""
    if not 0 < delivery_id <= MAX_ID:
        raise errors.DeliveryNotFound(f"no delivery {delivery_id} to your team's endpoints")
    delivery = (
        Delivery.objects.filter(endpoint__team=team, pk=delivery_id)
        .select_related("notification", "endpoint")
        .prefetch_related("attempt_log")
        .first()
    )
    if delivery is None:
        raise errors.DeliveryNotFound(f"no delivery {delivery_id} to your team's endpoints")
    return delivery


def dataset_poll(*, dataset: Dataset, sweeps: int = 20) -> dict:
    """What the fallback poll does for ``dataset``: its group, cadence and up to ``sweeps``
    most recent sweeps (newest first). ``polled`` is False when it has no group."""
    group = dataset.poll_group
    return {
        "polled": group is not None,
        "storage_source": dataset.storage_source,
        "location_template": dataset.location_template,
        "group_prefix": group.prefix if group else None,
        "mode": group.mode if group else None,
        "interval_seconds": group.interval_seconds if group else None,
        "next_sweep_at": group.next_sweep_at if group else None,
        "last_swept_at": group.last_swept_at if group else None,
        "last_found_at": group.last_found_at if group else None,
        "recent_sweeps": list(group.sweeps.order_by("-started_at")[:sweeps]) if group else [],
    }
