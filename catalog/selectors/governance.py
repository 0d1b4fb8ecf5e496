"""Reads for change notices, claims, transfers, observed usage and declarations."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import (
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)

from problems import FieldError

from .. import (
    declarations,
    errors,
)
from ..models import (
    ChangeNotice,
    ChangeNoticeAcknowledgement,
    Claim,
    Dataset,
    DatasetTransfer,
    DatasetUsage,
    RunConflict,
    Subscription,
    Team,
)
from .datasets import _one

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
