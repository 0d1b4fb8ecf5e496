"""Other identities of catalog datasets, recorded by lineage: received spellings that
normalise to a dataset's identity, and the symlinks a verified event declares for a
dataset, so usage naming them is usage of the dataset."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, models, transaction

from ..models import Dataset, DatasetAlias, DatasetUsage, Team
from . import ownership


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
) -> list[DatasetAlias]:
    """Record the identities a verified lineage event's ``symlinks`` facets declare as
    aliases of catalog datasets, so usage naming an alias is usage of the dataset.

    The rule, so that no alias hijacks another dataset: an alias is recorded only when
    the dataset it is declared for is registered and owned by ``team`` (the caller passes
    only verified events: the team claims the job namespace), the alias is no registered
    dataset's identity, no other team claims a dataset prefix covering it, and it is not
    an alias already (of whatever dataset, or a received spelling): the first
    declaration keeps it. Whatever is refused is simply not recorded (the event is kept).
    Usage already recorded under a new alias's identity is linked to its dataset.

    Args:
        links: ``(namespace, name, symlinks)`` per dataset of the event, identities
            normalised; ``symlinks`` as ``(namespace, name, type)``.
        seen_at: aware UTC event time.

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
        DatasetUsage.objects.filter(
            dataset_namespace=alias_ns, dataset_name=alias_name, dataset__isnull=True
        ).update(dataset=dataset)
        created.append(alias)
    return created
