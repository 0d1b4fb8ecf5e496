"""Reads for the catalog's web pages: who a signed-in person is (their teams, whether they
are governance staff), the catalog list with each row's freshness and latest ready
partition in a bounded number of queries, and what a dataset page shows beyond the API's
selectors (its partition timeline's rows, its consumers, its audit trail).

The pages read only the catalog's tables; usage and lineage come from ``DatasetUsage``
and ``Job``, which lineage feeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet, Subquery

from . import future_partitions, recovery, selectors
from .freshness_state import Freshness, datasets_freshness
from .models import (
    AuditEntry,
    Dataset,
    DatasetUsage,
    Delivery,
    Endpoint,
    LatePartition,
    Membership,
    Notification,
    Partition,
    PartitionRevision,
    Subscription,
    Team,
)

GOVERNANCE_PERMISSION = "catalog.view_datasetusage"
# The catalog page's freshness filter: {value: label}. Fresh and awaiting are one choice
# (both: nothing late, nothing due).
FRESHNESS_FILTERS = {
    "late": "late",
    "due": "due",
    "on_time": "fresh or awaiting",
    "no_sla": "no SLA",
}


# --- people ---------------------------------------------------------------------------------


def person_memberships(*, user) -> list[Membership]:
    """The signed-in ``user``'s team memberships, team joined, by team slug ([] when
    anonymous)."""
    if not user.is_authenticated:
        return []
    return list(Membership.objects.filter(user=user).select_related("team").order_by("team__slug"))


def person_is_governance(*, user) -> bool:
    """Governance staff see every team's report rows: staff users, or users holding
    ``catalog.view_datasetusage`` (superusers hold every permission). Everyone else sees
    their own teams' rows, as an API key without the ``governance`` scope does."""
    return bool(user.is_authenticated and (user.is_staff or user.has_perm(GOVERNANCE_PERMISSION)))


def person_team(*, user, slug: str) -> Membership | None:
    """The ``user``'s membership of team ``slug`` (team joined), or None: not a member."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, team__slug=slug).select_related("team").first()


# --- the catalog list -----------------------------------------------------------------------


def _latest_ready_key(now: datetime) -> Subquery:
    """The key of the dataset's newest partition whose current revision is ready and whose
    period has started by ``now``: one index walk on ``partition_newest`` (dataset,
    -start_at) per row of the page."""
    return Subquery(
        Partition.objects.filter(
            future_partitions.started(now),
            dataset=OuterRef("pk"),
            current_revision__state=PartitionRevision.State.READY,
        )
        .order_by("-start_at")
        .values("key")[:1]
    )


def dataset_rows(
    *,
    owner: str | None = None,
    namespace: str | None = None,
    criticality: str | None = None,
    lifecycle: str | None = None,
    freshness_state: str | None = None,
    search: str | None = None,
    now: datetime,
) -> QuerySet[Dataset]:
    """Datasets for the catalog page, ordered by namespace then name, owner joined and
    ``latest_ready`` annotated (the key of the latest ready partition, or None).

    Args:
        owner: team slug; namespace: exact, normalised; criticality, lifecycle: values of
            their choices; search: case-insensitive substring of name or description.
        freshness_state: a key of ``FRESHNESS_FILTERS``, as each row's badge
            (``rows_freshness``) says it: ``no_sla`` (no SLA or unpartitioned),
            ``late``, ``due``, ``on_time`` (fresh or awaiting). SQL decides the datasets
            with an open late incident (late) and those whose stored next deadline has
            not passed (their state hangs on judged deadlines only: fresh or awaiting);
            the others (a deadline passed and not judged yet: inside its grace, or the
            evaluation behind) are judged as the badge judges them, in three queries
            however many there are.
        now: aware UTC instant.
    """
    listed = selectors.dataset_list(
        owner=owner,
        namespace=namespace,
        criticality=criticality,
        lifecycle=lifecycle,
        search=search,
    )
    queryset = listed.annotate(latest_ready=_latest_ready_key(now))
    if not freshness_state:
        return queryset
    no_sla = Q(sla_cron="") | Q(partitioning=Dataset.Partitioning.NONE)
    if freshness_state == "no_sla":
        return queryset.filter(no_sla)
    late = Exists(LatePartition.objects.filter(dataset=OuterRef("pk"), recovered_at__isnull=True))
    undecided = list(listed.exclude(no_sla).exclude(late).filter(next_deadline_at__lte=now))
    states = datasets_freshness(undecided, now=now, latest={})
    judged = {
        state: [pk for pk, found in states.items() if found.state == state]
        for state in ("late", "due")
    }
    if freshness_state == "late":
        return queryset.exclude(no_sla).filter(late | Q(pk__in=judged["late"]))
    if freshness_state == "due":
        return queryset.filter(pk__in=judged["due"])
    return queryset.exclude(no_sla).exclude(late).exclude(pk__in=judged["late"] + judged["due"])


def rows_freshness(datasets: list[Dataset], *, now: datetime) -> dict[int, Freshness]:
    """Each row's freshness (``dataset_rows`` rows, ``latest_ready`` annotated), in two
    queries for the page: ``{dataset id: Freshness}``."""
    latest = {d.pk: d.latest_ready for d in datasets}
    return datasets_freshness(datasets, now=now, latest=latest)


def namespace_choices() -> list[str]:
    """Every registered namespace, sorted (one query)."""
    return list(
        Dataset.objects.order_by("namespace").values_list("namespace", flat=True).distinct()
    )


def team_choices() -> list[str]:
    """Every team slug, sorted."""
    return list(Team.objects.order_by("slug").values_list("slug", flat=True))


# --- a dataset ------------------------------------------------------------------------------


def timeline_partitions(*, dataset: Dataset, since: datetime) -> dict[str, dict]:
    """What the timeline needs of the partitions starting at or after ``since`` (aware
    UTC), in one query: ``{key: {state, ready_at, first_ready_at, detected_by, version,
    revisions}}`` (``state`` None when the partition has no current revision;
    ``first_ready_at`` when a revision published outside a restatement was first ready,
    the partition's arrival, which a later restatement does not move; ``revisions``
    counts every revision, staged ones included)."""
    first_ready = Min(
        "revisions__ready_at",
        filter=Q(
            revisions__state=PartitionRevision.State.READY,
            revisions__restatement__isnull=True,
        ),
    )
    rows = (
        Partition.objects.filter(dataset=dataset, start_at__gte=since)
        .annotate(revision_count=Count("revisions"), first_ready_at=first_ready)
        .values(
            "key",
            "current_revision__state",
            "current_revision__ready_at",
            "current_revision__detected_by",
            "current_revision__version",
            "revision_count",
            "first_ready_at",
        )
    )
    return {
        row["key"]: {
            "state": row["current_revision__state"],
            "ready_at": row["current_revision__ready_at"],
            "first_ready_at": row["first_ready_at"],
            "detected_by": row["current_revision__detected_by"],
            "version": row["current_revision__version"],
            "revisions": row["revision_count"],
        }
        for row in rows
    }


def timeline_late(*, dataset: Dataset, keys: list[str]) -> dict[str, LatePartition]:
    """The late incidents of these partition keys: ``{key: LatePartition}``."""
    rows = LatePartition.objects.filter(dataset=dataset, partition_key__in=keys)
    return {row.partition_key: row for row in rows}


@dataclass(frozen=True)
class Consumer:
    """A consumer of a dataset: a team, with its declarations and its observed reads."""

    team: Team
    subscriptions: list[Subscription]
    reads: list[DatasetUsage]


def dataset_consumers(*, dataset: Dataset) -> list[Consumer]:
    """Declared subscriptions and observed readers (verified and unverified usage) of
    ``dataset``, grouped by team (its owner included when its own jobs read it), by team
    slug; two queries."""
    subscriptions = list(
        Subscription.objects.filter(dataset=dataset)
        .select_related("team", "endpoint")
        .order_by("team__slug", "job_namespace", "job_name")
    )
    reads = list(
        DatasetUsage.objects.filter(dataset=dataset, direction=DatasetUsage.Direction.READ)
        .select_related("team", "job")
        .order_by("team__slug", "-last_seen_at")
    )
    teams: dict[int, Consumer] = {}
    for sub in subscriptions:
        teams.setdefault(sub.team_id, Consumer(sub.team, [], [])).subscriptions.append(sub)
    for usage in reads:
        teams.setdefault(usage.team_id, Consumer(usage.team, [], [])).reads.append(usage)
    return sorted(teams.values(), key=lambda c: c.team.slug)


def audit_trail(*, dataset: Dataset, limit: int = 50) -> list[AuditEntry]:
    """The dataset's newest ``limit`` audit entries, newest first."""
    return list(AuditEntry.objects.filter(dataset=dataset).order_by("-created_at", "-id")[:limit])


# --- a team ---------------------------------------------------------------------------------


ATTEMPTS_SHOWN = 5


def endpoint_health(*, team: Team, now: datetime) -> list[Endpoint]:
    """The team's endpoints with their delivery counts (``selectors.endpoint_list``),
    ``success_rate`` (succeeded over finished deliveries, succeeded and dead letters, in
    the health window, the whole hours since the one 24 hours ago, as
    ``selectors.endpoint_list`` counts them; in percent; None when none finished),
    ``recent_attempts`` (the last ``ATTEMPTS_SHOWN`` of its delivery log, newest first)
    and ``recover_since`` (the recovery form's default, ``recovery.recover_default_since``).

    Cost: one query for the endpoints, then one per endpoint (a range of the attempt
    log's index) and one more per endpoint with an outage on record.
    """
    endpoints = list(selectors.endpoint_list(team=team, now=now))
    for endpoint in endpoints:
        finished = endpoint.n_succeeded + endpoint.n_dead_recent
        endpoint.success_rate = (
            round(100 * endpoint.n_succeeded / finished, 1) if finished else None
        )
        endpoint.recent_attempts = list(
            selectors.delivery_attempt_list(endpoint=endpoint)[:ATTEMPTS_SHOWN]
        )
        endpoint.recover_since = recovery.recover_default_since(endpoint=endpoint, now=now)
    return endpoints


# --- governance -----------------------------------------------------------------------------


def critical_without_sla(*, team: Team | None) -> QuerySet[Dataset]:
    """Critical datasets (not retired) with no SLA (none set, or unpartitioned): nothing
    judges their freshness and the watchdog cannot watch them. ``team``: only its own;
    None: every team's. Owner joined, by identity."""
    queryset = (
        Dataset.objects.filter(criticality=Dataset.Criticality.CRITICAL)
        .exclude(lifecycle=Dataset.Lifecycle.RETIRED)
        .filter(Q(sla_cron="") | Q(partitioning=Dataset.Partitioning.NONE))
        .select_related("owner")
        .order_by("namespace", "name")
    )
    return queryset if team is None else queryset.filter(owner=team)


def critical_without_monitor(*, team: Team | None) -> QuerySet[Dataset]:
    """Critical datasets with an SLA (not retired) whose watchdog monitor definition was
    never delivered to the watchdog (no succeeded ``watchdog.monitor`` delivery): on-call
    would not be paged when they are late. ``team``: only its own; None: every team's.
    Owner joined, by identity."""
    delivered = Delivery.objects.filter(
        notification__dataset=OuterRef("pk"),
        notification__type=Notification.Type.WATCHDOG_MONITOR,
        state=Delivery.State.SUCCEEDED,
    )
    queryset = (
        Dataset.objects.filter(criticality=Dataset.Criticality.CRITICAL)
        .exclude(lifecycle=Dataset.Lifecycle.RETIRED)
        .exclude(sla_cron="")
        .exclude(partitioning=Dataset.Partitioning.NONE)
        .filter(~Exists(delivered))
        .select_related("owner")
        .order_by("namespace", "name")
    )
    return queryset if team is None else queryset.filter(owner=team)
