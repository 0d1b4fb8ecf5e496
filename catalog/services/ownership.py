"""Who owns what: claims on slices of shared namespaces (job namespaces, database roles,
dataset prefixes), the namespace lock and prefix checks that registrations and transfers
share, and transfers of a dataset to another team."""

from __future__ import annotations

import re
import unicodedata

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from problems import FieldError, ValidationProblem, invalid_choice

from .. import errors, watchdog_feed
from ..actors import Actor
from ..identity import IdentityError, dataset_location, normalise_dataset_prefix
from ..models import AuditEntry, Claim, Dataset, DatasetTransfer, Team
from . import usage

MAX_CLAIM_PATTERN_LENGTH = 255
# A database role: the server's dataset namespace (lower case, as catalog.identity keeps
# it), then the role as the server names it.
_DB_ROLE_PATTERN = re.compile(r"^[a-z][a-z0-9+.\-]*://[^/]+/[^/]+$")


# How many of the other teams' datasets a refused prefix claim names.
CLAIM_CONFLICT_LISTED = 20


def lock_namespace(namespace: str) -> None:
    """Serialise, until commit, the writes that decide who owns datasets of one normalised
    dataset namespace: prefix claims, registrations and accepted transfers."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"tidemark.dataset-namespace:{namespace}"],
            )


def _prefix_namespace(prefix: str) -> str:
    """The dataset namespace of a normalised prefix (``s3://lake/sales/`` -> ``s3://lake``)."""
    head, sep, rest = prefix.partition("://")
    if sep:
        return f"{head}://{rest.split('/', 1)[0]}"
    return head.split("/", 1)[0]


def _covering_prefix_claim(*, location: str) -> Claim | None:
    """The dataset prefix claim covering ``location`` (prefixes never overlap across
    teams; the longest one wins among one team's), or None."""
    prefixes = [
        location[:end] for end in range(1, min(len(location), MAX_CLAIM_PATTERN_LENGTH) + 1)
    ]
    return (
        Claim.objects.select_related("team")
        .filter(kind=Claim.Kind.DATASET_PREFIX, pattern__in=prefixes)
        .order_by("-pattern")
        .first()
    )


def covering_prefix_claims(identities: set[tuple[str, str]]) -> dict[tuple[str, str], Claim]:
    """``_covering_prefix_claim`` for many identities in one query: the prefix claims in
    their namespaces (a prefix starts with its namespace), matched here; identities no
    claim covers are left out."""
    if not identities:
        return {}
    in_namespaces = models.Q()
    for namespace in sorted({namespace for namespace, _ in identities}):
        in_namespaces |= models.Q(pattern__startswith=namespace)
    claims = sorted(  # longest first: the longest covering prefix wins
        Claim.objects.select_related("team").filter(in_namespaces, kind=Claim.Kind.DATASET_PREFIX),
        key=lambda claim: claim.pattern,
        reverse=True,
    )
    covering = {}
    for namespace, name in identities:
        location = dataset_location(namespace, name)
        claim = next((c for c in claims if location.startswith(c.pattern)), None)
        if claim is not None:
            covering[(namespace, name)] = claim
    return covering


def check_prefix_owner(*, team: Team, location: str) -> None:
    """Raise PrefixClaimed when a team other than ``team`` claims a prefix of ``location``."""
    claim = _covering_prefix_claim(location=location)
    if claim is not None and claim.team_id != team.pk:
        raise errors.PrefixClaimed(
            f"team {claim.team.slug} claims the dataset prefix {claim.pattern!r}, "
            f"which covers {location}",
            errors=[FieldError("name", "inside another team's dataset prefix", "prefix_claimed")],
            extra={"owner": claim.team.slug, "prefix": claim.pattern},
        )


def _check_prefix_claimable(*, team: Team, prefix: str) -> None:
    """Refuse a prefix overlapping another team's prefix claim, or covering datasets that
    other teams own.

    Raises:
        ClaimTaken: another team's prefix claim contains or is contained in it (409,
            ``owner``).
        ClaimOverDatasets: other teams own datasets under it (409, ``datasets``: at most
            ``CLAIM_CONFLICT_LISTED`` of them with their owners, ``more``: whether there are more).
    """
    prefixes = [prefix[:end] for end in range(1, len(prefix) + 1)]
    overlapping = (
        Claim.objects.select_related("team")
        .filter(kind=Claim.Kind.DATASET_PREFIX)
        .filter(models.Q(pattern__in=prefixes) | models.Q(pattern__startswith=prefix))
        .exclude(team=team)
        .order_by("pattern")
        .first()
    )
    if overlapping is not None:
        raise errors.ClaimTaken(
            f"team {overlapping.team.slug} claims the overlapping dataset prefix "
            f"{overlapping.pattern!r}",
            errors=[FieldError("pattern", "overlaps another team's prefix", "overlap")],
            extra={"owner": overlapping.team.slug, "prefix": overlapping.pattern},
        )
    namespace = _prefix_namespace(prefix)
    name_start = prefix[len(namespace) + 1 :]
    others = list(
        Dataset.objects.filter(namespace=namespace, name__startswith=name_start)
        .exclude(owner=team)
        .select_related("owner")
        .order_by("namespace", "name")[: CLAIM_CONFLICT_LISTED + 1]
    )
    if others:
        listed = others[:CLAIM_CONFLICT_LISTED]
        owners = sorted({d.owner.slug for d in listed})
        raise errors.ClaimOverDatasets(
            f"teams {', '.join(owners)} own datasets under {prefix!r}; transfer them first",
            errors=[FieldError("pattern", "covers other teams' datasets", "datasets_owned")],
            extra={
                "datasets": [
                    {"id": d.pk, "namespace": d.namespace, "name": d.name, "owner": d.owner.slug}
                    for d in listed
                ],
                "more": len(others) > CLAIM_CONFLICT_LISTED,
            },
        )


def _audit_claim(*, actor: Actor, claim: Claim, action: str) -> None:
    values = {"kind": claim.kind, "pattern": claim.pattern}
    AuditEntry.objects.create(
        team=actor.team,
        actor=actor.label,
        action=action,
        changes={
            field: [None, value] if action == "claim.created" else [value, None]
            for field, value in values.items()
        },
    )


@transaction.atomic
def claim_create(*, actor: Actor, kind: str, pattern: str) -> tuple[Claim, bool]:
    """Claim a slice of a shared namespace for the actor's team.

    Claiming what the team already claims changes nothing.

    Args:
        kind: a ``Claim.Kind`` value (``job_namespace``, ``db_role``, ``dataset_prefix``).
        pattern: 1 to 255 characters, no whitespace or control characters, matched
            exactly. For ``job_namespace``, the OpenLineage job namespace
            (``airflow://team-a``, ``dbt-sales``); for ``db_role``, the server's dataset
            namespace, a slash and the role (``postgres://db.example:5432/reporting``);
            for ``dataset_prefix``, a dataset namespace and the start of a name
            (``s3://lake/sales/``), normalised by
            ``catalog.identity.normalise_dataset_prefix`` and matched as a prefix of
            ``namespace/name``.

    Returns:
        ``(claim, created)``.

    Raises:
        ValidationProblem: an unknown kind or a malformed pattern (400, naming the field).
        ClaimTaken: another team claims it, or (``dataset_prefix``) a prefix overlapping
            it in either direction (409, ``owner``).
        ClaimOverDatasets: (``dataset_prefix``) other teams own datasets under it (409,
            naming them and their owners).

    Side effects:
        A new claim is audited as ``claim.created``; a new ``db_role`` claim makes what
        collectors saw the role access while unclaimed the team's verified usage
        (``usage.held_usage_attribute``).
    """
    if kind not in Claim.Kind.values:
        raise ValidationProblem(
            f"unknown claim kind {kind!r}",
            errors=[invalid_choice("kind", kind, Claim.Kind.values)],
        )
    if not pattern or len(pattern) > MAX_CLAIM_PATTERN_LENGTH:
        raise ValidationProblem(
            f"pattern must be 1 to {MAX_CLAIM_PATTERN_LENGTH} characters",
            errors=[FieldError("pattern", "1 to 255 characters", "length")],
        )
    if any(ch.isspace() or unicodedata.category(ch)[0] in "CZ" for ch in pattern):
        raise ValidationProblem(
            "pattern must not contain whitespace, control or invisible characters",
            errors=[FieldError("pattern", "whitespace or control character", "whitespace")],
        )
    if kind == Claim.Kind.DB_ROLE and not _DB_ROLE_PATTERN.match(pattern):
        raise ValidationProblem(
            "a db_role pattern is '<scheme>://<authority>/<role>'",
            errors=[FieldError("pattern", "scheme://authority/role", "format")],
        )
    if kind == Claim.Kind.DATASET_PREFIX:
        try:
            pattern = normalise_dataset_prefix(pattern)
        except IdentityError as exc:
            raise ValidationProblem(
                str(exc), errors=[FieldError("pattern", str(exc), exc.rule)]
            ) from exc
        if len(pattern) > MAX_CLAIM_PATTERN_LENGTH:
            raise ValidationProblem(
                f"the normalised prefix is longer than {MAX_CLAIM_PATTERN_LENGTH} characters",
                errors=[FieldError("pattern", "1 to 255 characters", "length")],
            )
        lock_namespace(_prefix_namespace(pattern))
    claim = Claim.objects.select_related("team").filter(kind=kind, pattern=pattern).first()
    if claim is None:
        if kind == Claim.Kind.DATASET_PREFIX:
            _check_prefix_claimable(team=actor.team, prefix=pattern)
        try:
            with transaction.atomic():
                claim = Claim.objects.create(team=actor.team, kind=kind, pattern=pattern)
            _audit_claim(actor=actor, claim=claim, action="claim.created")
            if kind == Claim.Kind.DB_ROLE:
                usage.held_usage_attribute(team=actor.team, pattern=pattern)
            return claim, True
        except IntegrityError:  # claimed concurrently
            claim = Claim.objects.select_related("team").get(kind=kind, pattern=pattern)
    if claim.team_id != actor.team.pk:
        raise errors.ClaimTaken(
            f"team {claim.team.slug} already claims {kind} {pattern!r}",
            errors=[FieldError("pattern", "claimed by another team", "unique")],
            extra={"owner": claim.team.slug},
        )
    return claim, False


@transaction.atomic
def claim_release(*, actor: Actor, claim_id: int) -> None:
    """Release one of the actor's team's claims. Events already received keep the
    verification they were given when they arrived.

    Raises:
        ClaimNotFound: no such claim of this team (404; other teams' are not revealed).

    Side effects:
        Audited as ``claim.released``.
    """
    claim = None
    if 0 < claim_id <= 2**63 - 1:
        claim = Claim.objects.select_for_update().filter(pk=claim_id, team=actor.team).first()
    if claim is None:
        raise errors.ClaimNotFound(f"your team has no claim {claim_id}")
    claim.delete()
    _audit_claim(actor=actor, claim=claim, action="claim.released")


def _audit_transfer(*, actor: Actor, transfer: DatasetTransfer, action: str) -> None:
    AuditEntry.objects.create(
        dataset_id=transfer.dataset_id,
        team=actor.team,
        actor=actor.label,
        action=action,
        changes={
            "transfer": [None, transfer.pk],
            "owner": [transfer.from_team.slug, transfer.to_team.slug],
            "state": [None, transfer.state],
        },
    )


@transaction.atomic
def dataset_transfer_propose(*, actor: Actor, dataset: Dataset, to_team: str) -> DatasetTransfer:
    """Propose handing ``dataset`` to the team ``to_team``; only its owner team may.

    Args:
        to_team: the receiving team's slug.

    Returns:
        The open transfer (state ``proposed``).

    Raises:
        NotDatasetOwner: the actor's team does not own the dataset (403).
        TeamNotFound: no team ``to_team`` (404).
        ValidationProblem: ``to_team`` is the owner itself (400).
        PrefixClaimed: a third team claims a dataset prefix covering it (409, ``owner``).
        TransferPending: the dataset already has an open transfer (409).

    Side effects:
        Audited on the dataset as ``dataset.transfer_proposed``.
    """
    dataset = Dataset.objects.select_for_update().select_related("owner").get(pk=dataset.pk)
    if dataset.owner_id != actor.team.pk:
        raise errors.NotDatasetOwner(f"{dataset} is owned by team {dataset.owner.slug}")
    receiver = Team.objects.filter(slug=to_team).first()
    if receiver is None:
        raise errors.TeamNotFound(f"no team {to_team!r}")
    if receiver.pk == dataset.owner_id:
        raise ValidationProblem(
            "a dataset is transferred to another team",
            errors=[FieldError("to_team", "the dataset's owner already", "other_team")],
        )
    check_prefix_owner(team=receiver, location=dataset_location(dataset.namespace, dataset.name))
    transfer = DatasetTransfer(
        dataset=dataset, from_team=dataset.owner, to_team=receiver, proposed_by=actor.label
    )
    try:
        with transaction.atomic():
            transfer.save()
    except IntegrityError as exc:
        raise errors.TransferPending(
            f"{dataset} already has an open transfer; cancel it first"
        ) from exc
    _audit_transfer(actor=actor, transfer=transfer, action="dataset.transfer_proposed")
    return transfer


def _open_transfer(*, actor: Actor, dataset: Dataset, transfer_id: int) -> DatasetTransfer:
    """The transfer of ``dataset`` that the actor's team is a side of, locked."""
    transfer = None
    if 0 < transfer_id <= 2**63 - 1:
        transfer = (
            DatasetTransfer.objects.select_for_update(of=("self",))
            .select_related("from_team", "to_team")
            .filter(pk=transfer_id, dataset=dataset)
            .filter(models.Q(from_team=actor.team) | models.Q(to_team=actor.team))
            .first()
        )
    if transfer is None:
        raise errors.TransferNotFound(f"{dataset} has no transfer {transfer_id} of your team")
    if transfer.state != DatasetTransfer.State.PROPOSED:
        raise errors.TransferClosed(f"transfer {transfer_id} is already {transfer.state}")
    return transfer


@transaction.atomic
def dataset_transfer_accept(*, actor: Actor, dataset: Dataset, transfer_id: int) -> Dataset:
    """Accept an open transfer to the actor's team: the dataset's owner becomes the
    actor's team, in this one transaction.

    Returns:
        The dataset with its new owner.

    Raises:
        TransferNotFound: no such transfer with the actor's team as a side (404).
        NotDatasetOwner: the actor's team is the proposing side (403).
        TransferClosed: it was already accepted or cancelled (409).
        PrefixClaimed: a third team now claims a dataset prefix covering it (409).

    Side effects:
        Audited on the dataset as ``dataset.transfer_accepted``; the watchdog monitor
        follows the new owner.
    """
    lock_namespace(dataset.namespace)
    transfer = _open_transfer(actor=actor, dataset=dataset, transfer_id=transfer_id)
    if transfer.to_team_id != actor.team.pk:
        raise errors.NotDatasetOwner(
            f"only team {transfer.to_team.slug} may accept transfer {transfer_id}"
        )
    dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
    check_prefix_owner(
        team=transfer.to_team, location=dataset_location(dataset.namespace, dataset.name)
    )
    now = timezone.now()
    updated = DatasetTransfer.objects.filter(
        pk=transfer.pk, state=DatasetTransfer.State.PROPOSED
    ).update(state=DatasetTransfer.State.ACCEPTED, decided_by=actor.label, decided_at=now)
    if updated != 1 or dataset.owner_id != transfer.from_team_id:
        raise errors.TransferClosed(f"transfer {transfer_id} is no longer open")
    transfer.state = DatasetTransfer.State.ACCEPTED
    dataset.owner = transfer.to_team
    dataset.save(update_fields=["owner", "updated_at"])
    watchdog_feed.sync_monitor(dataset, now=now)
    _audit_transfer(actor=actor, transfer=transfer, action="dataset.transfer_accepted")
    return dataset


@transaction.atomic
def dataset_transfer_cancel(*, actor: Actor, dataset: Dataset, transfer_id: int) -> DatasetTransfer:
    """Cancel an open transfer; either side may.

    Raises:
        TransferNotFound: no such transfer with the actor's team as a side (404).
        TransferClosed: it was already accepted or cancelled (409).

    Side effects:
        Audited on the dataset as ``dataset.transfer_cancelled``.
    """
    transfer = _open_transfer(actor=actor, dataset=dataset, transfer_id=transfer_id)
    transfer.state = DatasetTransfer.State.CANCELLED
    transfer.decided_by = actor.label
    transfer.decided_at = timezone.now()
    transfer.save(update_fields=["state", "decided_by", "decided_at"])
    _audit_transfer(actor=actor, transfer=transfer, action="dataset.transfer_cancelled")
    return transfer
