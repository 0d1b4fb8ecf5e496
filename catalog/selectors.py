"""Reads from the catalog: querysets and small dataclasses, with their joins decided here."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.db.models import (
    Count,
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.utils import timezone

from problems import FieldError
from schedules import period_containing

from . import (
    arrival_profiles,
    declarations,
    errors,
    freshness_state,
    future_partitions,
    sla_suggestions,
    unknown_datasets,
)
from . import lineage_graph as graph
from .identity import DatasetIdentity, normalise_dataset_identity
from .models import (
    ApiKey,
    ChangeNotice,
    ChangeNoticeAcknowledgement,
    Claim,
    Dataset,
    DatasetTransfer,
    DatasetUsage,
    Delivery,
    Endpoint,
    Job,
    Partition,
    PartitionRevision,
    Restatement,
    RunConflict,
    SchemaChange,
    SchemaObservation,
    StaticLineage,
    Subscription,
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
    rows = (
        PartitionRevision.objects.filter(
            partition__dataset=dataset,
            partition__start_at__gte=since,
            partition__end_at__isnull=False,
            state=PartitionRevision.State.READY,
            restatement__isnull=True,
            detected_by__in=[
                PartitionRevision.DetectedBy.EVENT,
                PartitionRevision.DetectedBy.POLL,
            ],
        )
        .values("partition_id", "partition__end_at")
        .annotate(first_ready_at=Min("ready_at"))
        .values_list("partition__end_at", "first_ready_at")
        .order_by()
    )
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
    """The team's subscriptions, newest first, with dataset and endpoint joined."""
    return (
        Subscription.objects.filter(team=team)
        .select_related("team", "dataset", "endpoint")
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


def endpoint_list(*, team: Team) -> QuerySet[Endpoint]:
    """The team's endpoints with delivery counts by outcome (``n_succeeded``,
    ``n_waiting`` for pending or retrying, ``n_dead_letters`` for rejected or dead)."""
    return (
        Endpoint.objects.filter(team=team)
        .annotate(
            n_succeeded=Count("deliveries", filter=Q(deliveries__state="succeeded")),
            n_waiting=Count("deliveries", filter=Q(deliveries__state__in=["pending", "retrying"])),
            n_dead_letters=Count(
                "deliveries", filter=Q(deliveries__state__in=["rejected", "dead"])
            ),
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


# --- change notices -------------------------------------------------------------------------


def dataset_consumer_teams(*, dataset: Dataset) -> QuerySet[Team]:
    """The consumer teams of ``dataset``: whom its change notices are for, who may
    acknowledge them, and whom reminders chase. Ordered by slug.

    Every team with a declared subscription to the dataset, and every team whose jobs were
    seen reading it at run time (verified lineage usage: the team claims the job's
    namespace), but its owner team (which announces the notices). Every change-notice path
    reads consumers here only.
    """
    declared = Subscription.objects.filter(dataset=dataset).values("team_id")
    observed = DatasetUsage.objects.filter(
        dataset=dataset, direction=DatasetUsage.Direction.READ, verified=True
    ).values("team_id")
    return (
        Team.objects.filter(Q(pk__in=declared) | Q(pk__in=observed))
        .exclude(pk=dataset.owner_id)
        .order_by("slug")
    )


def change_notice_list(*, dataset: Dataset) -> QuerySet[ChangeNotice]:
    """The dataset's change notices, newest announcement first, with their
    acknowledgements (and each one's team) prefetched."""
    return (
        ChangeNotice.objects.filter(dataset=dataset)
        .prefetch_related("acknowledgements__team")
        .order_by("-announced_at", "-id")
    )


def change_notice_get(*, dataset: Dataset, notice_id: int) -> ChangeNotice:
    """One change notice of ``dataset``, acknowledgements prefetched; raises
    ChangeNoticeNotFound (also for another dataset's notice)."""
    notice = _one(change_notice_list(dataset=dataset), notice_id)
    if notice is None:
        raise errors.ChangeNoticeNotFound(f"{dataset} has no change notice {notice_id}")
    notice.dataset = dataset  # with its owner, as the caller loaded it
    return notice


def change_notice_acknowledgement_list(
    *, notice: ChangeNotice
) -> QuerySet[ChangeNoticeAcknowledgement]:
    """The notice's acknowledgements, earliest first, with their teams."""
    return (
        ChangeNoticeAcknowledgement.objects.filter(notice=notice)
        .select_related("team")
        .order_by("acknowledged_at", "id")
    )


# --- claims, jobs and observed usage ----------------------------------------------------


def claim_list(*, team: Team) -> QuerySet[Claim]:
    """The team's claims, newest first."""
    return Claim.objects.filter(team=team).select_related("team").order_by("-id")


def dataset_transfer_get(*, dataset: Dataset, transfer_id: int) -> DatasetTransfer:
    """One transfer of ``dataset`` with both teams; raises TransferNotFound."""
    transfer = _one(
        DatasetTransfer.objects.select_related("from_team", "to_team").filter(dataset=dataset),
        transfer_id,
    )
    if transfer is None:
        raise errors.TransferNotFound(f"{dataset} has no transfer {transfer_id}")
    return transfer


def dataset_transfer_list(*, team: Team, state: str | None = None) -> QuerySet[DatasetTransfer]:
    """The ownership transfers ``team`` is party to (proposing or receiving), newest
    first, with the dataset and both teams joined.

    Args:
        state: only transfers in this ``DatasetTransfer.State``; None: all.
    """
    queryset = DatasetTransfer.objects.filter(Q(from_team=team) | Q(to_team=team)).select_related(
        "dataset", "from_team", "to_team"
    )
    if state:
        queryset = queryset.filter(state=state)
    return queryset.order_by("-created_at", "-id")


def job_namespace_claimed_by(*, team: Team, namespace: str) -> bool:
    """Whether ``team`` claims the OpenLineage job namespace ``namespace`` (exactly)."""
    return job_namespace_claim_list(team=team, namespace=namespace).exists()


def job_namespace_claim_list(*, team: Team, namespace: str) -> QuerySet[Claim]:
    """``team``'s claims on the job namespace ``namespace`` (at most one): wrap it in
    ``Exists`` to decide "claimed" inside another statement, as the lineage event INSERT
    does."""
    return Claim.objects.filter(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=namespace)


def claimants(*, kind: str, patterns: list[str]) -> dict[str, Team]:
    """The team claiming each of these patterns of one ``Claim.Kind``, in one query.

    Returns:
        ``{pattern: team}`` for the claimed patterns only.
    """
    claims = Claim.objects.filter(kind=kind, pattern__in=patterns).select_related("team")
    return {claim.pattern: claim.team for claim in claims}


def undeclared_reads_list(
    *, team: Team | None = None, verified: bool | None = True
) -> QuerySet[DatasetUsage]:
    """Observed reads of registered datasets by a team that declared no subscription to
    them: the governance report. A team reading a dataset it owns is not listed; any
    subscription of the team to the dataset (for any or no job) declares the read.

    Args:
        team: only this team's reads; None: every team's.
        verified: True (the default) only verified reads (the reporting team claims the
            job namespace); False only unverified ones; None both.

    Returns:
        Usage rows with ``team``, ``job``, ``dataset`` and the dataset's owner joined,
        most recently seen first.
    """
    declared = Subscription.objects.filter(team=OuterRef("team"), dataset=OuterRef("dataset"))
    queryset = (
        DatasetUsage.objects.filter(direction=DatasetUsage.Direction.READ, dataset__isnull=False)
        .exclude(dataset__owner=F("team"))
        .filter(~Exists(declared))
        .select_related("team", "job", "dataset", "dataset__owner")
    )
    if team is not None:
        queryset = queryset.filter(team=team)
    if verified is not None:
        queryset = queryset.filter(verified=verified)
    return queryset.order_by("-last_seen_at", "-id")


def stale_declarations_list(
    *, team: Team | None = None, days: int, now: datetime
) -> QuerySet[Subscription]:
    """Stale declarations: subscriptions whose team has not been seen reading the dataset
    (a verified read by any of its jobs) for ``days`` days, including subscriptions never
    seen at all. A subscription younger than ``days`` days is never stale: its team gets
    that long to be seen.

    Args:
        team: only this team's subscriptions; None: every team's.
        days: the window, in days (>= 1).
        now: aware UTC instant the window ends at.

    Returns:
        Subscriptions with ``team``, ``dataset`` and its owner joined, annotated with
        ``last_read_at`` (the team's latest verified read of the dataset, aware UTC; None
        when never seen), oldest declaration first.
    """
    cutoff = now - timedelta(days=days)
    reads = DatasetUsage.objects.filter(
        team=OuterRef("team"),
        dataset=OuterRef("dataset"),
        direction=DatasetUsage.Direction.READ,
        verified=True,
    )
    queryset = (
        Subscription.objects.filter(created_at__lt=cutoff)
        .annotate(last_read_at=Subquery(reads.order_by("-last_seen_at").values("last_seen_at")[:1]))
        .filter(Q(last_read_at__isnull=True) | Q(last_read_at__lt=cutoff))
        .select_related("team", "dataset", "dataset__owner")
    )
    if team is not None:
        queryset = queryset.filter(team=team)
    return queryset.order_by("created_at", "id")


def undeclared_writes_list(*, team: Team | None = None) -> QuerySet[DatasetUsage]:
    """Verified writes (outputs) to a registered dataset by a team that does not own it:
    the governance report. Only verified usage counts (the reporting team claims the
    job's namespace).

    Args:
        team: only this team's writes; None: every team's.

    Returns:
        Usage rows with ``team``, ``job``, ``dataset`` and the dataset's owner joined,
        most recently seen first.
    """
    queryset = (
        DatasetUsage.objects.filter(
            direction=DatasetUsage.Direction.WRITE, verified=True, dataset__isnull=False
        )
        .exclude(dataset__owner=F("team"))
        .select_related("team", "job", "dataset", "dataset__owner")
    )
    if team is not None:
        queryset = queryset.filter(team=team)
    return queryset.order_by("-last_seen_at", "-id")


def _uncatalogued_usage(team: Team | None) -> QuerySet[DatasetUsage]:
    registered = Dataset.objects.filter(
        namespace=OuterRef("dataset_namespace"), name=OuterRef("dataset_name")
    )
    usage = DatasetUsage.objects.filter(verified=True, dataset__isnull=True).filter(
        ~Exists(registered)
    )
    return usage if team is None else usage.filter(team=team)


def uncatalogued_datasets_list(*, team: Team | None = None) -> QuerySet:
    """Dataset identities seen in verified lineage that no registered dataset has: the
    governance report of datasets ready to register.

    Args:
        team: only identities this team's jobs read or wrote (and only its own usage);
            None: every team's.

    Returns:
        A values queryset of dicts ``{dataset_namespace, dataset_name, first_seen,
        last_seen, runs}`` (aware UTC instants; runs summed over its usage rows), one per
        identity, most recently seen first. ``uncatalogued_usage_attach`` gives a page's
        readers and writers.
    """
    return (
        _uncatalogued_usage(team)
        .values("dataset_namespace", "dataset_name")
        .annotate(first_seen=Min("first_seen_at"), last_seen=Max("last_seen_at"))
        .annotate(runs=Sum("run_count"))
        .order_by("-last_seen", "dataset_namespace", "dataset_name")
    )


def uncatalogued_usage_attach(*, team: Team | None = None, rows: list[dict]) -> list[dict]:
    """Give each ``uncatalogued_datasets_list`` row (a page of them) its ``readers`` and
    ``writers``: the verified usage rows behind it, in one query.

    Args:
        team: as given to ``uncatalogued_datasets_list``.
        rows: its rows (``dataset_namespace``, ``dataset_name``), changed in place.

    Returns:
        ``rows``; each list has ``job`` and ``team`` joined, ordered by team slug and job
        identity.
    """
    usage: dict[tuple[str, str], list[DatasetUsage]] = {
        (row["dataset_namespace"], row["dataset_name"]): [] for row in rows
    }
    if usage:
        match = Q()
        for namespace, name in usage:
            match |= Q(dataset_namespace=namespace, dataset_name=name)
        for found in (
            _uncatalogued_usage(team)
            .filter(match)
            .select_related("job", "team")
            .order_by("direction", "team__slug", "job__namespace", "job__name")
        ):
            usage[(found.dataset_namespace, found.dataset_name)].append(found)
    for row in rows:
        seen = usage[(row["dataset_namespace"], row["dataset_name"])]
        row["readers"] = [u for u in seen if u.direction == DatasetUsage.Direction.READ]
        row["writers"] = [u for u in seen if u.direction == DatasetUsage.Direction.WRITE]
    return rows


def run_conflict_list(*, team: Team | None = None) -> QuerySet[RunConflict]:
    """Lineage events kept out of a run they named (``RunConflict``): the governance
    report of run conflicts, newest first.

    Args:
        team: only conflicts this team is party to, as the event's sender or as the team
            the run is made of; None: every team's.

    Returns:
        Conflicts with both jobs and both teams joined, most recently detected first.
    """
    queryset = RunConflict.objects.select_related("run_job", "run_team", "event_job", "event_team")
    if team is not None:
        queryset = queryset.filter(Q(event_team=team) | Q(run_team=team))
    return queryset.order_by("-detected_at", "-id")


def declarations_plan(*, team: Team, document: declarations.Document) -> declarations.Plan:
    """The plan that brings ``team``'s datasets to ``document`` (nothing is written).

    Returns:
        ``declarations.Plan``: one item per declared dataset in file order, and the team's
        datasets the file does not declare.

    Raises:
        DeclarationForAnotherTeam: the document's ``team`` is not ``team`` (403).
        NotDatasetOwner: a declared dataset exists and another team owns it (403, naming it).
    """
    if document.team != team.slug:
        raise errors.DeclarationForAnotherTeam(
            f"the declaration is for team {document.team!r}; this key acts for {team.slug!r}",
            errors=[FieldError("team", f"must be {team.slug}", "owner_team")],
        )
    identities = Q()
    for d in document.datasets:
        identities |= Q(namespace=d.namespace, name=d.name)
    found = (
        {(ds.namespace, ds.name): ds for ds in Dataset.objects.filter(identities)}
        if document.datasets
        else {}
    )
    for d in document.datasets:
        existing = found.get((d.namespace, d.name))
        if existing is not None and existing.owner_id != team.pk:
            raise errors.NotDatasetOwner(
                f"{d.path} ({d.label}) is owned by another team",
                errors=[FieldError(f"{d.path}.name", "owned by another team", "owner_team")],
            )
    current = {key: {f: getattr(ds, f) for f in declarations.FIELDS} for key, ds in found.items()}
    owned = [
        f"{ns}/{name}"
        for ns, name in Dataset.objects.filter(owner=team)
        .order_by("namespace", "name")
        .values_list("namespace", "name")
    ]
    return declarations.plan(document, current=current, owned=owned)


# --- the lineage graph --------------------------------------------------------------------

_EDGE_FIELDS = (
    "id",
    "job_id",
    "job__namespace",
    "job__name",
    "job__team__slug",
    "dataset_namespace",
    "dataset_name",
    "dataset_id",
    "direction",
    "verified",
    "run_count",
    "last_seen_at",
)


def _edges(usage: QuerySet[DatasetUsage]) -> list[graph.Edge]:
    return [graph.Edge(*row) for row in usage.values_list(*_EDGE_FIELDS)]


def _static_edges(rows: QuerySet[StaticLineage]) -> list[graph.Edge]:
    """Static lineage rows as graph edges: ids negated (apart from usage rows' ids), no
    runs, seen when last stated."""
    registered = Dataset.objects.filter(
        namespace=OuterRef("dataset_namespace"), name=OuterRef("dataset_name")
    ).values("pk")[:1]
    return [
        graph.Edge(
            usage_id=-row[0],
            job_id=row[1],
            job_namespace=row[2],
            job_name=row[3],
            job_team=row[4],
            dataset_namespace=row[5],
            dataset_name=row[6],
            dataset_id=row[7],
            direction=row[8],
            verified=row[9],
            run_count=0,
            last_seen_at=row[10],
        )
        for row in rows.annotate(registered=Subquery(registered)).values_list(
            "id",
            "job_id",
            "job__namespace",
            "job__name",
            "job__team__slug",
            "dataset_namespace",
            "dataset_name",
            "registered",
            "direction",
            "verified",
            "stated_at",
        )
    ]


def _identity_in(identities: set[tuple[str, str]]) -> Q:
    match = Q(pk__in=[])
    for namespace, name in sorted(identities):
        match |= Q(dataset_namespace=namespace, dataset_name=name)
    return match


def lineage_graph(
    *,
    dataset: tuple[str, str] | None = None,
    job: tuple[str, str] | None = None,
    depth: int = graph.DEFAULT_DEPTH,
    direction: str = graph.BOTH,
    include_unverified: bool = False,
    include_static: bool = False,
) -> dict:
    """The lineage graph around one dataset or one job, from observed usage
    (``DatasetUsage``): every team's edges, as the catalog records them.

    One or two queries find the root (a dataset the catalog does not know is looked for
    in usage), then one query per level and walk direction (``both`` walks upstream and
    downstream: two per level), whatever the number of nodes.

    Args:
        dataset: the root dataset's ``(namespace, name)``, normalised here; or
        job: the root job's ``(namespace, name)``, exactly as events named it.
        depth: job hops to walk, 1 to ``graph.MAX_DEPTH`` (5).
        direction: ``upstream``, ``downstream`` or ``both``.
        include_unverified: add the unverified edges (marked ``verified: false``);
            verified edges only by default.
        include_static: add static lineage (``StaticLineage``: what JobEvents state a
            job reads and writes, with ``run_count`` 0, and datasets only DatasetEvents
            named, as roots); one more query per level and walk direction.

    Returns:
        ``graph.Graph.as_dict()``: ``{root, truncated, nodes, edges}``; a dataset node is
        ``{id, type: dataset, namespace, name, catalogued, dataset_id}``, a job node
        ``{id, type: job, namespace, name, team}``, an edge ``{source, target, direction:
        read|write, run_count, last_seen (aware UTC), verified}``.

    Raises:
        LineageNodeNotFound: the dataset is neither registered nor seen in any usage, or
            the job was never seen (404).
    """
    usage = DatasetUsage.objects.all()
    static = StaticLineage.objects.filter(job__isnull=False)
    if not include_unverified:
        usage, static = usage.filter(verified=True), static.filter(verified=True)
    result, datasets, jobs = _graph_root(dataset=dataset, job=job, include_static=include_static)
    for walk in (graph.UPSTREAM, graph.DOWNSTREAM):
        if direction not in (walk, graph.BOTH):
            continue
        frontier, frontier_jobs = set(datasets), set(jobs)
        seen = set(frontier)
        for _ in range(depth):
            if not frontier and not frontier_jobs:
                break
            near = graph.READ if walk == graph.DOWNSTREAM else graph.WRITE
            reaching = Q(job_id__in=frontier_jobs) | Q(
                job_id__in=usage.filter(_identity_in(frontier), direction=near).values("job_id")
            )
            if include_static:
                reaching |= Q(
                    job_id__in=static.filter(_identity_in(frontier), direction=near).values(
                        "job_id"
                    )
                )
            edges = _edges(usage.filter(reaching))
            if include_static:
                edges += _static_edges(static.filter(reaching))
            reached, _ = graph.level(
                result,
                edges,
                walk=walk,
                datasets=frontier,
                jobs=frontier_jobs,
            )
            frontier, frontier_jobs = reached - seen, set()
            seen |= frontier
            if len(result.nodes) > graph.MAX_NODES:
                result.truncated = bool(frontier)
                break
    return result.as_dict()


def _graph_root(
    *, dataset: tuple[str, str] | None, job: tuple[str, str] | None, include_static: bool
) -> tuple[graph.Graph, set[tuple[str, str]], set[int]]:
    """The graph holding only its root, and the root as a first frontier."""
    if job is not None:
        found = Job.objects.filter(namespace=job[0], name=job[1]).select_related("team").first()
        if found is None:
            raise errors.LineageNodeNotFound(f"no job {job[0]}/{job[1]} was seen in lineage")
        result = graph.Graph(root=graph.job_node_id(*job))
        result.add_job(*job, found.team.slug if found.team else None)
        return result, set(), {found.pk}
    assert dataset is not None
    try:
        identity = normalise_dataset_identity(*dataset)
    except ValueError as exc:
        raise unknown_datasets.dataset_not_found(
            *dataset, problem=errors.LineageNodeNotFound
        ) from exc
    pair = (identity.namespace, identity.name)
    dataset_id = (
        Dataset.objects.filter(namespace=pair[0], name=pair[1]).values_list("pk", flat=True).first()
    )
    if (
        dataset_id is None
        and not DatasetUsage.objects.filter(
            dataset_namespace=pair[0], dataset_name=pair[1]
        ).exists()
        and not (
            include_static
            and StaticLineage.objects.filter(
                dataset_namespace=pair[0], dataset_name=pair[1]
            ).exists()
        )
    ):
        raise unknown_datasets.dataset_not_found(*pair, problem=errors.LineageNodeNotFound)
    result = graph.Graph(root=graph.dataset_node_id(*pair))
    result.add_dataset(*pair, dataset_id)
    return result, {pair}, set()


# --- schemas ----------------------------------------------------------------------------


def schema_observation_list(*, dataset: Dataset) -> QuerySet[SchemaObservation]:
    """The dataset's schema timeline: one observation per change, newest first (the first
    row is its schema as last seen)."""
    return (
        SchemaObservation.objects.filter(dataset=dataset)
        .select_related("team")
        .order_by("-observed_at", "-id")
    )


def unannounced_schema_changes(*, teams: Iterable[Team] | None = None) -> QuerySet[SchemaChange]:
    """Breaking schema changes (a column removed or retyped) that no change notice
    covered (``catalog.schema_changes`` gives the rule): the governance report, and what
    the web UI lists.

    Args:
        teams: only changes of datasets these teams own; None: every team's.

    Returns:
        ``SchemaChange`` rows with ``dataset``, its ``owner``, ``observation`` and
        ``previous`` joined, most recently observed first.
    """
    queryset = SchemaChange.objects.filter(covered_by__isnull=True).select_related(
        "dataset", "dataset__owner", "observation", "previous"
    )
    if teams is not None:
        queryset = queryset.filter(dataset__owner__in=[team.pk for team in teams])
    return queryset.order_by("-observed_at", "-id")
