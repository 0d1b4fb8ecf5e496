"""Other identities of catalog datasets, recorded by lineage: received spellings that
normalise to a dataset's identity, and the symlinks a verified event declares for a
dataset, so usage naming them is usage of the dataset.

Usage of a symlink alias is recorded under its dataset's identity when it is written
(``catalog.services.usage``); usage recorded under an identity before it became an alias
is folded into the dataset's rows when the alias is declared (``usages_fold``), and
again by a periodic sweep (``alias_usage_fold_due``) for what a transaction that had not
seen the declaration recorded meanwhile. Symlink aliases are never changed or removed
(but with their dataset), so nothing is ever unfolded."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db import IntegrityError, models, transaction
from django.db.models import Exists, OuterRef, Q

from ..models import Dataset, DatasetAlias, DatasetUsage, Team
from . import ownership

UsageMerge = Callable[[dict[int, int]], dict[int, int]]
"""Moves what refers to usage rows about to be merged away: given ``{merged row id: id
of the row it merges into}``, points every reference at the row merged into and returns,
per row merged into, how many runs both rows had counted (lineage passes
``lineage.services.runs.run_edges_merge``: the catalog knows no runs)."""


def dataset_alias_record(
    *, alias_namespace: str, alias_name: str, namespace: str, name: str, seen_at: datetime
) -> None:
    """Keep a received spelling of a dataset identity that normalises to ``namespace`` +
    ``name``; nothing when the spelling is already normal, or was kept before.

    Args:
        seen_at: aware instant the spelling was first seen at (UTC).
    """
    if (alias_namespace, alias_name) == (namespace, name):
        return
    DatasetAlias.objects.bulk_create(
        [
            DatasetAlias(
                alias_namespace=alias_namespace,
                alias_name=alias_name,
                namespace=namespace,
                name=name,
                first_seen_at=seen_at,
            )
        ],
        ignore_conflicts=True,
    )


# Identities looked up per statement by ``dataset_symlinks_record``.
IDENTITY_LOOKUP_CHUNK = 200


def dataset_symlinks_record(
    *,
    team: Team,
    links: list[tuple[str, str, tuple[tuple[str, str, str], ...]]],
    seen_at: datetime,
    merge_dependents: UsageMerge,
) -> list[DatasetAlias]:
    """Record the identities a verified lineage event's ``symlinks`` facets declare as
    aliases of catalog datasets, so usage naming an alias is usage of the dataset.

    The rule, so that no alias hijacks another dataset: an alias is recorded only when
    the dataset it is declared for is registered and owned by ``team`` (the caller passes
    only verified events: the team claims the job namespace), the alias is no registered
    dataset's identity, no other team claims a dataset prefix covering it, and it is not
    an alias already (of whatever dataset, or a received spelling): the first
    declaration keeps it. Whatever is refused is simply not recorded (the event is kept).
    Usage already recorded under a new alias's identity is folded into the dataset's
    (``usages_fold``). Call inside the caller's transaction.

    Args:
        links: ``(namespace, name, symlinks)`` per dataset of the event, identities
            normalised; ``symlinks`` as ``(namespace, name, type)``.
        seen_at: aware UTC event time.
        merge_dependents: moves what refers to usage rows merged away (``UsageMerge``).

    Returns:
        The aliases created.
    """
    wanted = {
        (alias_ns, alias_name): (namespace, name, kind)
        for namespace, name, symlinks in links
        for alias_ns, alias_name, kind in symlinks
        if (alias_ns, alias_name) != (namespace, name)
    }
    if not wanted:
        return []

    def matching(queryset, pairs, namespace_field: str, name_field: str) -> list:
        # In chunks: one OR term per pair, and SQLite refuses an expression 1,000 deep.
        pairs, rows = sorted(pairs), []
        for start in range(0, len(pairs), IDENTITY_LOOKUP_CHUNK):
            match = models.Q()
            for namespace, name in pairs[start : start + IDENTITY_LOOKUP_CHUNK]:
                match |= models.Q(**{namespace_field: namespace, name_field: name})
            rows.extend(queryset.filter(match))
        return rows

    known = matching(
        DatasetAlias.objects.values_list("alias_namespace", "alias_name"),
        wanted,
        "alias_namespace",
        "alias_name",
    )
    for pair in known:
        wanted.pop(tuple(pair), None)
    if not wanted:  # the usual case: every event of a job repeats its symlinks
        return []
    targets = {(namespace, name) for namespace, name, _ in wanted.values()} | set(wanted)
    datasets = matching(
        Dataset.objects.only("id", "namespace", "name", "owner_id"), targets, "namespace", "name"
    )
    by_identity = {(d.namespace, d.name): d for d in datasets}
    claims = ownership.covering_prefix_claims(set(wanted))
    created = []
    for (alias_ns, alias_name), (namespace, name, kind) in sorted(wanted.items()):
        dataset = by_identity.get((namespace, name))
        if dataset is None or dataset.owner_id != team.pk:
            continue
        if (alias_ns, alias_name) in by_identity:  # a registered dataset is no alias
            continue
        claim = claims.get((alias_ns, alias_name))
        if claim is not None and claim.team_id != team.pk:
            continue
        alias = DatasetAlias(
            alias_namespace=alias_ns,
            alias_name=alias_name,
            namespace=namespace,
            name=name,
            kind=DatasetAlias.Kind.SYMLINK,
            dataset=dataset,
            symlink_type=kind,
            declared_by=team,
            first_seen_at=seen_at,
        )
        with transaction.atomic():  # a concurrent declaration of the same alias wins
            try:
                alias.save()
            except IntegrityError:
                continue
        usages_fold(alias=alias, merge_dependents=merge_dependents)
        created.append(alias)
    return created


_FOLD_ORDER = ("dataset_namespace", "dataset_name", "direction", "job_id", "team_id", "verified")


def usages_fold(*, alias: DatasetAlias, merge_dependents: UsageMerge) -> int:
    """Fold the usage rows recorded under the symlink ``alias``'s identity into its
    dataset's: each becomes the dataset's row of the same job, direction, team and
    verified (renamed, or merged into that row when it exists: seen times widened, runs
    added, less the runs both had counted). Call inside the caller's transaction.

    Rows are locked in one order (identity, direction, job, team, verified), the order
    lineage processing takes them in, so a fold never deadlocks with processing.

    Args:
        alias: a symlink alias (``kind`` symlink, ``dataset`` set).
        merge_dependents: moves what refers to the rows merged away (``UsageMerge``),
            called once, before they are deleted.

    Returns:
        The number of usage rows folded (renamed or merged away).
    """
    assert alias.kind == DatasetAlias.Kind.SYMLINK and alias.dataset_id is not None
    at_alias = Q(dataset_namespace=alias.alias_namespace, dataset_name=alias.alias_name)
    at_dataset = Q(dataset_namespace=alias.namespace, dataset_name=alias.name)
    jobs = set(DatasetUsage.objects.filter(at_alias).values_list("job_id", flat=True))
    if not jobs:
        return 0
    rows = DatasetUsage.objects.select_for_update().filter(at_alias | at_dataset, job_id__in=jobs)
    sources: list[DatasetUsage] = []
    targets: dict[tuple, DatasetUsage] = {}
    for usage in rows.order_by(*_FOLD_ORDER):
        if (usage.dataset_namespace, usage.dataset_name) == (alias.namespace, alias.name):
            targets[_fold_key(usage)] = usage
        else:
            sources.append(usage)
    merges: dict[int, int] = {}
    for usage in sources:
        target = targets.get(_fold_key(usage))
        if target is None:  # the dataset has no such row yet: this one becomes it
            DatasetUsage.objects.filter(pk=usage.pk).update(
                dataset_namespace=alias.namespace,
                dataset_name=alias.name,
                dataset_id=alias.dataset_id,
            )
            continue
        merges[usage.pk] = target.pk
        target.first_seen_at = min(target.first_seen_at, usage.first_seen_at)
        target.last_seen_at = max(target.last_seen_at, usage.last_seen_at)
        target.run_count += usage.run_count
    if merges:
        counted_twice = merge_dependents(merges)
        merged_into = set(merges.values())
        for target in targets.values():
            if target.pk in merged_into:
                DatasetUsage.objects.filter(pk=target.pk).update(
                    dataset_id=alias.dataset_id,
                    first_seen_at=target.first_seen_at,
                    last_seen_at=target.last_seen_at,
                    run_count=target.run_count - counted_twice.get(target.pk, 0),
                )
        # The dependents were moved: deleting cascades to nothing.
        DatasetUsage.objects.filter(pk__in=list(merges)).delete()
    return len(sources)


def _fold_key(usage: DatasetUsage) -> tuple:
    return (usage.job_id, usage.direction, usage.team_id, usage.verified)


def alias_usage_fold_due(*, merge_dependents: UsageMerge, limit: int = 100) -> int:
    """Fold the usage still recorded under a symlink alias's identity: what a transaction
    that had not yet seen the alias's declaration recorded while it was declared. Each
    alias is folded in a transaction of its own. An alias whose identity has since been
    registered as a dataset is left alone (the dataset is itself, not the alias).

    Args:
        merge_dependents: as for ``usages_fold``.
        limit: at most this many aliases per call.

    Returns:
        The number of usage rows folded.
    """
    usage = DatasetUsage.objects.filter(
        dataset_namespace=OuterRef("alias_namespace"), dataset_name=OuterRef("alias_name")
    )
    registered = Dataset.objects.filter(
        namespace=OuterRef("alias_namespace"), name=OuterRef("alias_name")
    )
    due = list(
        DatasetAlias.objects.filter(kind=DatasetAlias.Kind.SYMLINK)
        .filter(Exists(usage), ~Exists(registered))
        .order_by("pk")[:limit]
    )
    folded = 0
    for alias in due:
        with transaction.atomic():
            folded += usages_fold(alias=alias, merge_dependents=merge_dependents)
    return folded
