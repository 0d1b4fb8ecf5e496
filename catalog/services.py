"""Writes to the catalog. Every function is keyword-only, typed and transactional."""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import functools
import hashlib
import json
import logging
import re
import time
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, OperationalError, connection, models, transaction
from django.db.models.functions import Greatest, Least
from django.utils import timezone

import objectstore
from problems import FieldError, Problem, ValidationProblem
from schedules import CronError, validate_cron
from schedules.periods import (
    LogicalInterval,
    PartitionKeyError,
    parse_partition_key,
    validate_timezone,
)

from . import (
    change_notices,
    declarations,
    delivery,
    doorbell,
    errors,
    freshness,
    keys,
    notices,
    restatements,
    schema_changes,
    schemas,
    selectors,
    watchdog_feed,
)
from .crashpoints import crashpoint
from .identity import (
    IdentityError,
    dataset_location,
    normalise_dataset_identity,
    normalise_dataset_prefix,
)
from .models import (
    ApiKey,
    AuditEntry,
    Claim,
    Dataset,
    DatasetAlias,
    DatasetTransfer,
    DatasetUsage,
    Delivery,
    Endpoint,
    IdempotencyRecord,
    Job,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
    SchemaObservation,
    StorageGroup,
    Subscription,
    Team,
    UnclaimedUsage,
)
from .notices import iso

logger = logging.getLogger(__name__)

_Model = TypeVar("_Model", bound=models.Model)

# How long a request waits for another holding the same Idempotency-Key before 409.
IDEMPOTENCY_LOCK_TIMEOUT = "50ms"


@dataclass(frozen=True)
class Actor:
    """Who is acting: a team, through an API key or a signed-in person."""

    team: Team
    api_key: ApiKey | None = None
    username: str | None = None

    @property
    def label(self) -> str:
        if self.api_key is not None:
            return f"key:{self.api_key.public_id}"
        return f"user:{self.username or '?'}"


# --- teams and keys ---------------------------------------------------------------------


@transaction.atomic
def team_create(
    *, slug: str, name: str, contact_email: str = "", paging_routing_key: str = ""
) -> Team:
    """Create a team.

    Args:
        paging_routing_key: the team's on-call channel (a PagerDuty Events API v2 routing
            key), handed to the watchdog for its critical datasets; "" for none.

    Raises:
        ValidationError: the slug is taken or malformed.
    """
    team = Team(
        slug=slug, name=name, contact_email=contact_email, paging_routing_key=paging_routing_key
    )
    team.full_clean()
    team.save()
    return team


@transaction.atomic
def api_key_create(
    *,
    team: Team,
    name: str,
    scopes: list[str],
    expires_at: datetime | None = None,
    delegated_datasets: list[Dataset] | None = None,
    granted_by: ApiKey | None = None,
) -> tuple[ApiKey, str]:
    """Create an API key for ``team``.

    Args:
        scopes: subset of ``ApiKey.Scope`` values.
        expires_at: aware UTC instant after which the key is refused; None: never.
        delegated_datasets: other teams' datasets this key may publish readiness for.
        granted_by: the key creating this one, if created over the API; a key can only
            grant scopes it holds itself, and never expires after it.

    Returns:
        ``(key, token)``; the token is the only copy of the secret: show it once.

    Raises:
        ValidationError: an unknown scope.
        ScopeNotHeld: ``granted_by`` lacks one of ``scopes`` (403).
    """
    unknown = sorted(set(scopes) - set(ApiKey.Scope.values))
    if unknown:
        raise ValidationError({"scopes": f"unknown scope(s): {', '.join(unknown)}"})
    if granted_by is not None and granted_by.expires_at is not None:
        # A key cannot outlive the key that made it.
        expires_at = min(expires_at or granted_by.expires_at, granted_by.expires_at)
    if granted_by is not None:
        missing = sorted(set(scopes) - set(granted_by.scopes))
        if missing:
            raise errors.ScopeNotHeld(
                f"this key cannot grant scope(s) it does not hold: {', '.join(missing)}",
                errors=[FieldError("scopes", "not held by the granting key", "scope_not_held")],
            )
    generated = keys.generate_key()
    key = ApiKey(
        team=team,
        name=name,
        public_id=generated.public_id,
        digest=generated.digest,
        scopes=sorted(set(scopes)),
        expires_at=expires_at,
    )
    key.full_clean()
    key.save()
    if delegated_datasets:
        key.delegated_datasets.set(delegated_datasets)
    return key, generated.token


# How long a process reuses an API key row (with its team) it read, in seconds. Every
# request still checks the secret and the expiry against it, but a revocation, or any
# other change to the key or its team, reaches other processes only within this bound
# (the revoking process forgets the key at once). Saves a query on every request.
API_KEY_CACHE_SECONDS = 5.0


@dataclass
class _CachedKey:
    key: ApiKey  # never handed out: each request gets its own copy
    until: float  # time.monotonic() after which the row is read again


_api_keys: dict[str, _CachedKey] = {}  # by public id; only keys that exist


def api_key_authenticate(*, token: str, now: datetime) -> ApiKey | None:
    """The usable key ``token`` names, or None (unknown, wrong secret, revoked or expired).

    The key row is read at most every ``API_KEY_CACHE_SECONDS`` per process.

    Side effects: refreshes ``last_used_at`` at most once a minute per key (and process),
    so hot publishers do not write on every request.
    """
    parsed = keys.parse_key(token)
    if parsed is None:
        return None
    cached = _api_keys.get(parsed.public_id)
    if cached is None or cached.until <= time.monotonic():
        row = ApiKey.objects.select_related("team").filter(public_id=parsed.public_id).first()
        if row is None:
            _api_keys.pop(parsed.public_id, None)
            return None
        cached = _CachedKey(key=row, until=time.monotonic() + API_KEY_CACHE_SECONDS)
        _api_keys[parsed.public_id] = cached
    row = cached.key
    if not keys.matches(parsed.secret, row.digest) or not row.is_usable(now):
        return None
    key = copy.copy(row)
    key.scopes = list(row.scopes)
    key.team = copy.copy(row.team)
    if row.last_used_at is None or now - row.last_used_at > timedelta(minutes=1):
        ApiKey.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return key


def _forget_api_key(public_id: str) -> None:
    """Drop a key from this process's cache (see ``API_KEY_CACHE_SECONDS``)."""
    _api_keys.pop(public_id, None)


@transaction.atomic
def api_key_revoke(*, key: ApiKey, now: datetime) -> ApiKey:
    """Revoke ``key`` from ``now`` on; revoking twice keeps the first instant.

    This process refuses the key at once; other processes within
    ``API_KEY_CACHE_SECONDS``.
    """
    ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=now)
    # Again after commit: a request of this process may have re-read the row meanwhile.
    _forget_api_key(key.public_id)
    transaction.on_commit(lambda: _forget_api_key(key.public_id))
    key.refresh_from_db()
    return key


# --- datasets ---------------------------------------------------------------------------


def _storage_sources() -> dict:
    return getattr(settings, "TIDEMARK_STORAGE_SOURCES", {})


def _validate_dataset_fields(values: dict[str, Any]) -> None:
    """Field rules that need more than a type: integer bounds (``Dataset.INTEGER_BOUNDS``,
    the API's limits), zones, cron, storage source."""
    problems: list[FieldError] = []
    for int_field, (low, high) in Dataset.INTEGER_BOUNDS.items():
        value = values.get(int_field)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(FieldError(int_field, "A valid integer is required.", "invalid"))
        elif value < low:
            problems.append(
                FieldError(
                    int_field, f"Ensure this value is greater than or equal to {low}.", "min_value"
                )
            )
        elif value > high:
            problems.append(
                FieldError(
                    int_field, f"Ensure this value is less than or equal to {high}.", "max_value"
                )
            )
    for tz_field in ("partition_timezone", "sla_timezone"):
        if tz_field in values:
            try:
                validate_timezone(values[tz_field])
            except ValueError as exc:
                problems.append(FieldError(tz_field, str(exc), "iana_time_zone"))
    if values.get("sla_cron"):
        try:
            validate_cron(values["sla_cron"])
        except CronError as exc:
            problems.append(
                FieldError("sla_cron", f"not a valid cron expression: {exc}", "cron_expression")
            )
    source = values.get("storage_source")
    if source and source not in _storage_sources():
        configured = ", ".join(sorted(_storage_sources())) or "none configured"
        problems.append(
            FieldError(
                "storage_source",
                f"unknown storage source {source!r} (configured: {configured})",
                "configured_source",
            )
        )
    if problems:
        raise ValidationProblem("Some dataset fields are not valid.", errors=problems)


def normalised_identity(namespace: str, name: str):
    """``normalise_dataset_identity`` with its errors as a 400 problem naming the field."""
    try:
        return normalise_dataset_identity(namespace, name)
    except IdentityError as exc:
        raise ValidationProblem(
            str(exc), errors=[FieldError(exc.field, str(exc), exc.rule)]
        ) from exc


@transaction.atomic
def dataset_register(*, actor: Actor, namespace: str, name: str, **fields: Any) -> Dataset:
    """Register a dataset owned by the actor's team.

    Args:
        namespace, name: OpenLineage identity; normalised before storing.
        fields: any other ``Dataset`` field (``criticality``, ``partitioning``, ``sla_cron``...).

    Raises:
        ValidationProblem: a field breaks a rule (400, naming the field).
        PrefixClaimed: another team claims a dataset prefix covering it (409, ``owner``).
        DatasetExists: the normalised identity is already registered (409).
    """
    identity = normalised_identity(namespace, name)
    _validate_dataset_fields(fields)
    _lock_namespace(identity.namespace)
    _check_prefix_owner(
        team=actor.team, location=dataset_location(identity.namespace, identity.name)
    )
    dataset = Dataset(namespace=identity.namespace, name=identity.name, owner=actor.team, **fields)
    _attach_poll_group(dataset, now=timezone.now())
    freshness.schedule(dataset, now=timezone.now())
    dataset.full_clean(validate_unique=False, validate_constraints=False)
    try:
        with transaction.atomic():
            dataset.save()
    except IntegrityError as exc:
        raise errors.DatasetExists(
            f"{identity.namespace}/{identity.name} is already registered",
            errors=[FieldError("name", "already registered in this namespace", "unique")],
        ) from exc
    watchdog_feed.sync_monitor(dataset, now=timezone.now())
    # Usage observed before registration (recorded by identity) now points at the row.
    DatasetUsage.objects.filter(
        dataset_namespace=dataset.namespace, dataset_name=dataset.name, dataset__isnull=True
    ).update(dataset=dataset)
    AuditEntry.objects.create(
        dataset=dataset,
        team=actor.team,
        actor=actor.label,
        action="dataset.registered",
        changes={f: [None, _jsonable(getattr(dataset, f))] for f in Dataset.AUDITED_FIELDS},
    )
    return dataset


@transaction.atomic
def dataset_update(
    *, actor: Actor, dataset: Dataset, override_reason: str = "", **changes: Any
) -> Dataset:
    """Change a dataset's fields; only its owner team may.

    Changes to ``Dataset.AUDITED_FIELDS`` are written to the audit trail as
    ``{field: [old, new]}`` in the same transaction. ``lifecycle`` and ``sunset_at``
    follow the lifecycle rules (``change_notices.lifecycle_check``): deprecated needs a
    sunset at least the notice period away; becoming deprecated or retired needs a
    deprecation or retirement change notice in effect, unless ``override_reason`` gives
    a written reason, which is audited as ``dataset.lifecycle_override``.

    Raises:
        NotDatasetOwner: the actor's team does not own the dataset (403).
        ValidationProblem: a field breaks a rule (400).
        SunsetTooSoon (422), LifecycleNoticeRequired (409).
    """
    if dataset.owner_id != actor.team.pk:
        raise errors.NotDatasetOwner(f"{dataset} is owned by team {dataset.owner.slug}")
    _validate_dataset_fields(changes)
    dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
    _check_partitioning_change(dataset, changes)
    override = change_notices.lifecycle_check(
        dataset=dataset, changes=changes, override_reason=override_reason, now=timezone.now()
    )
    if override:
        AuditEntry.objects.create(
            dataset=dataset,
            team=actor.team,
            actor=actor.label,
            action="dataset.lifecycle_override",
            changes={
                "lifecycle": [dataset.lifecycle, changes["lifecycle"]],
                "override_reason": [None, override],
            },
        )
    audited = {}
    for field_name, new in changes.items():
        old = getattr(dataset, field_name)
        if old != new and field_name in Dataset.AUDITED_FIELDS:
            audited[field_name] = [_jsonable(old), _jsonable(new)]
        setattr(dataset, field_name, new)
    if SLA_FIELDS & set(audited):
        freshness.schedule(dataset, now=timezone.now())
    if POLL_FIELDS & set(audited):
        _attach_poll_group(dataset, now=timezone.now())
    dataset.full_clean(validate_unique=False, validate_constraints=False)
    dataset.save()
    if WATCHDOG_FIELDS & set(audited):
        watchdog_feed.sync_monitor(dataset, now=timezone.now())
    if audited:
        AuditEntry.objects.create(
            dataset=dataset,
            team=actor.team,
            actor=actor.label,
            action="dataset.updated",
            changes=audited,
        )
    return dataset


@transaction.atomic
def declarations_apply(*, actor: Actor, document: declarations.Document) -> declarations.Plan:
    """Bring the actor's team's datasets to ``document``: an idempotent upsert.

    All or nothing: every declared dataset is created (``dataset_register``, then
    ``dataset_update`` for ``lifecycle``/``sunset_at`` so the lifecycle rules apply) or
    updated (``dataset_update`` with only the fields that differ) in one transaction, so
    the first problem refuses the whole document. Unchanged datasets are not touched and
    the team's datasets not in the document are left alone.

    Returns:
        The plan that was applied (``selectors.declarations_plan``).

    Raises:
        DeclarationForAnotherTeam, NotDatasetOwner (403); any problem of the services
        (ValidationProblem 400, LifecycleNoticeRequired 409, SunsetTooSoon 422,
        PartitioningLocked...) with the same code and status, its detail naming the
        dataset and its field paths prefixed with ``datasets[i].``.

    Side effects: those of ``dataset_register`` and ``dataset_update`` (audit entries).
    """
    result = selectors.declarations_plan(team=actor.team, document=document)
    for item in result.items:
        if item.action == "unchanged":
            continue
        declaration = item.declaration
        changes = {c.field: c.new for c in item.changes}
        try:
            if item.action == "create":
                create = {k: v for k, v in changes.items() if k in declarations.CREATE_FIELDS}
                dataset = dataset_register(
                    actor=actor,
                    namespace=declaration.namespace,
                    name=declaration.name,
                    **create,
                )
                later = {k: v for k, v in changes.items() if k in declarations.LIFECYCLE_FIELDS}
                if later:
                    dataset_update(actor=actor, dataset=dataset, **later)
            else:
                dataset = Dataset.objects.get(
                    namespace=declaration.namespace, name=declaration.name
                )
                dataset_update(actor=actor, dataset=dataset, **changes)
        except Problem as exc:
            raise _in_declaration(exc, declaration) from exc
    return result


def _in_declaration(exc: Problem, declaration: declarations.Declaration) -> Problem:
    """The same problem (class, code, status), naming the dataset and its path."""
    named = type(exc)(
        f"{declaration.path} ({declaration.label}): {exc.detail}",
        errors=[FieldError(f"{declaration.path}.{e.field}", e.detail, e.rule) for e in exc.errors]
        or [FieldError(declaration.path, exc.detail, exc.code)],
        extra={**exc.extra, "dataset": declaration.label},
    )
    return named


SLA_FIELDS = {"sla_cron", "sla_timezone", "sla_grace_seconds", "partitioning", "partition_timezone"}
WATCHDOG_FIELDS = SLA_FIELDS | {"criticality", "lifecycle"}
POLL_FIELDS = {"completion_signal", "storage_source", "location_template", "partitioning"}


def _attach_poll_group(dataset: Dataset, *, now: datetime) -> None:
    """Check the dataset's storage location and point ``poll_group`` at the group of its
    source and parent prefix (created due now), or at nothing when it is not polled.

    Raises:
        ValidationProblem: a polled signal without a source or template, or a template
            that breaks a rule (400, naming the field).
    """
    problems: list[FieldError] = []
    polled = dataset.completion_signal in Dataset.POLLED_SIGNALS
    location = None
    if dataset.location_template:
        try:
            location = objectstore.parse_template(
                dataset.location_template,
                partitioned=dataset.partitioning != Dataset.Partitioning.NONE,
            )
        except objectstore.TemplateError as exc:
            problems.append(FieldError("location_template", str(exc), "location_template"))
    for name in ("storage_source", "location_template"):
        if polled and not getattr(dataset, name):
            problems.append(
                FieldError(
                    name,
                    f"required when completion_signal is {dataset.completion_signal}",
                    "required_for_signal",
                )
            )
    if problems:
        raise ValidationProblem("The dataset's storage location is not valid.", errors=problems)
    if not polled or location is None or not dataset.storage_source:
        dataset.poll_group = None
        return
    min_interval = settings.TIDEMARK_POLL["min_interval_seconds"]
    group, created = StorageGroup.objects.get_or_create(
        source=dataset.storage_source,
        prefix=location.parent,
        defaults={"next_sweep_at": now, "interval_seconds": min_interval},
    )
    if not created:
        # A new member may be poll-only: look soon and learn the cadence again.
        StorageGroup.objects.filter(pk=group.pk).update(
            next_sweep_at=now, interval_seconds=min_interval
        )
    dataset.poll_group = group


def _check_partitioning_change(dataset: Dataset, changes: dict[str, Any]) -> None:
    """Keys and intervals of stored partitions follow the partitioning and its zone, so
    neither may change once partitions exist (register a new dataset instead)."""
    changed = [
        name
        for name in ("partitioning", "partition_timezone")
        if name in changes and changes[name] != getattr(dataset, name)
    ]
    if changed and dataset.partitions.exists():
        raise errors.PartitioningLocked(
            f"{dataset} already has partitions; {' and '.join(changed)} cannot change",
            errors=[
                FieldError(name, "fixed once partitions exist", "immutable") for name in changed
            ],
        )


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


# --- readiness --------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishResult:
    """What ``readiness_publish`` answers: an HTTP status, a JSON body, and whether the body
    is a replay of the first response to the same Idempotency-Key."""

    status_code: int
    body: dict[str, Any]
    replayed: bool = False
    deliveries_created: int = field(default=0, compare=False)


def readiness_publish(
    *,
    actor: Actor,
    namespace: str,
    name: str,
    partition: str,
    version: str | None = None,
    state: str = PartitionRevision.State.READY,
    manifest: dict | None = None,
    metadata: dict | None = None,
    code_version: str = "",
    restatement: int | None = None,
    idempotency_key: str | None = None,
    now: datetime,
) -> PublishResult:
    """Record that a partition (revision) is ready or failed, in one transaction.

    Steps, all or nothing: the Idempotency-Key record (if a key is sent), the partition
    upsert (row-locked, so concurrent publishers of one partition serialise and those of
    different partitions do not wait on each other), the revision upsert, the immutable
    ``ReadinessEvent``, the ``Notification`` and one ``Delivery`` per matching subscriber
    endpoint. After commit the delivery doorbell rings; a broker outage never fails the
    publish. On PostgreSQL the common case, a new partition without an Idempotency-Key,
    is all written by one statement, which is its own transaction (``_publish_at_once``).

    Rules:
        - without ``version`` the publish refers to the current revision (created with
          version ``""`` when there is none), so a repeat is a no-op;
        - a new version of a partition whose current revision is ready becomes current
          at once and is told as ``partition.restated`` (for unpartitioned datasets, each
          new version is a new snapshot: ``partition.ready``);
        - re-publishing a superseded version changes nothing (a promotion supersedes
          every other revision of the partitions it repoints);
        - a ready revision cannot become failed: publish a new version instead;
        - with ``restatement`` the revision is staged in that restatement (of this
          dataset, staged, the partition inside its range): ready but not current, told
          to no consumer and not changing freshness until the restatement is promoted
          (``restatements.revision_stage``);
        - a version staged in a restatement is published only through it;
        - ``metadata.schema`` holding an object is the dataset's schema in the shape of
          the OpenLineage SchemaDatasetFacet (``{"fields": [{"name", "type",
          "fields"?}]}``): a ready publish outside a restatement records it as a schema
          observation (``catalog.schema_changes``), which may reveal an unannounced
          breaking change; any other value of ``metadata.schema`` is plain metadata.

    Args:
        partition: key in the dataset's partitioning format; ``""`` when unpartitioned.
        state: ``ready`` or ``failed``.
        restatement: id of a staged restatement of the dataset to publish into.
        idempotency_key: the request's ``Idempotency-Key``, scoped to the actor's team.
        now: the instant the publish is recorded at (aware, UTC).

    Returns:
        ``PublishResult``; status 201 when something changed, 200 when it was a no-op.

    Raises:
        DatasetNotFound (404), PublishNotAllowed (403), DatasetRetired (409),
        InvalidPartitionKey (400), RevisionAlreadyReady (409), IdempotencyKeyReused (422),
        IdempotencyKeyInProgress (409), RevisionStaged (409), SchemaInvalid (400, naming
        ``metadata.schema.fields...``); with ``restatement`` also
        RestatementNotFound (404), RestatementClosed (409), PartitionOutsideRestatement
        (422).
    """
    identity = normalised_identity(namespace, name)
    try:
        schema_fields = schema_changes.readiness_schema(metadata)
    except schemas.SchemaInvalid as exc:
        raise errors.SchemaInvalid(
            "metadata.schema must hold the columns as a SchemaDatasetFacet does: "
            '{"fields": [{"name": ..., "type": ...}]}',
            errors=exc.errors,
        ) from exc
    records_schema = (
        schema_fields is not None and state == PartitionRevision.State.READY and restatement is None
    )
    request = {
        "actor": actor,
        "namespace": identity.namespace,
        "name": identity.name,
        "key": partition,
        "version": version,
        "state": state,
        "manifest": manifest,
        "metadata": metadata or {},
        "code_version": code_version,
        "now": now,
    }
    target = None
    if (
        idempotency_key is None
        and restatement is None
        and not records_schema  # its sighting commits with the publish
        and _writes_in_one_statement()
    ):
        result, target = _publish_at_once(**request)
        if result is not None:
            crashpoint("publish.after_commit")
            return result
    with transaction.atomic():
        record = None
        if idempotency_key is not None:
            request_fingerprint = _fingerprint(
                {
                    "namespace": identity.namespace,
                    "name": identity.name,
                    "partition": partition,
                    "version": version,
                    "state": state,
                    "manifest": manifest,
                    "metadata": metadata,
                    "code_version": code_version,
                    # Only when sent: the fingerprints of plain publishes stay as they were.
                    **({"restatement": restatement} if restatement is not None else {}),
                }
            )
            record, replay = _idempotency_begin(
                team=actor.team, key=idempotency_key, fingerprint=request_fingerprint, now=now
            )
            if replay is not None:
                return replay
        publish = (
            functools.partial(_publish, target=target)
            if restatement is None
            else functools.partial(_publish_staged, restatement_id=restatement)
        )
        result = publish(**request)
        if records_schema:
            schema_changes.schema_sightings_record(
                sightings=[
                    schema_changes.SchemaSighting(identity.namespace, identity.name, schema_fields)
                ],
                observed_at=now,
                source=SchemaObservation.Source.READINESS,
                team=actor.team,
                authorised=True,  # the owner or a key delegated by it
                now=now,
                readiness_event_id=result.body.get("event_id"),
            )
        if record is not None:
            record.status_code = result.status_code
            record.response_body = result.body
            record.save(update_fields=["status_code", "response_body"])
    crashpoint("publish.after_commit")
    return result


def _publish_staged(
    *,
    actor: Actor,
    restatement_id: int,
    namespace: str,
    name: str,
    key: str,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
) -> PublishResult:
    """A publish into a restatement: the checks of ``_publish``, then
    ``restatements.revision_stage``."""
    dataset = _publishable_dataset(actor, namespace, name, key)
    part, revision, event_id = restatements.revision_stage(
        actor=actor,
        dataset=dataset,
        restatement_id=restatement_id,
        key=key,
        version=version,
        state=state,
        manifest=manifest,
        metadata=metadata,
        code_version=code_version,
        now=now,
    )
    return _publish_response(
        dataset,
        part,
        revision,
        status_code=200 if event_id is None else 201,
        event_id=event_id,
        restatement_id=restatement_id,
    )


def _publishable_dataset(actor: Actor, namespace: str, name: str, key: str) -> Dataset:
    """The dataset a staged publish names, checked as ``_publish`` checks it."""
    dataset = Dataset.objects.select_related("owner").filter(namespace=namespace, name=name).first()
    _check_publishable(actor, dataset, namespace=namespace, name=name, key=key)
    return dataset


def _check_publishable(
    actor: Actor | None, dataset: Dataset | None, *, namespace: str, name: str, key: str
) -> LogicalInterval | None:
    """The checks every publish passes: the dataset exists, the actor may publish it
    (None: the poll, which may), it is not retired, and ``key`` is in its partitioning's
    format.

    Returns:
        The partition's logical interval (None when unpartitioned).

    Raises:
        DatasetNotFound (404), PublishNotAllowed (403), DatasetRetired (409),
        InvalidPartitionKey (400).
    """
    if dataset is None:
        raise errors.DatasetNotFound(
            f"no dataset {namespace}/{name} is registered",
            errors=[FieldError("name", "no such dataset in this namespace", "exists")],
        )
    if actor is not None:
        _check_may_publish(actor, dataset)
    if dataset.lifecycle == Dataset.Lifecycle.RETIRED:
        raise errors.DatasetRetired(
            f"{dataset} is retired; readiness can no longer be published",
            errors=[FieldError("name", "the dataset is retired", "lifecycle_retired")],
        )
    try:
        return parse_partition_key(dataset.partitioning, key, dataset.partition_timezone)
    except PartitionKeyError as exc:
        raise errors.InvalidPartitionKey(
            str(exc),
            errors=[FieldError("partition", str(exc), "partition_key_format")],
            extra={"expected_format": exc.expected_format},
        ) from exc


def _publish(
    *,
    actor: Actor | None,
    namespace: str,
    name: str,
    key: str,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
    found: dict | None = None,
    missed_event: bool = False,
    target: _PublishTarget | None = None,
) -> PublishResult:
    """The publish proper, in the caller's transaction. ``actor`` None means the fallback
    poll found it in storage (``found`` says what it saw); such a find is a no-op when the
    partition is ready. ``target``: ``_publish_target`` of this publish if already read
    (READ COMMITTED would read it afresh here no more consistently: nothing is locked)."""
    content, event_fields = _revision_content(
        actor=actor,
        version=version,
        state=state,
        manifest=manifest,
        metadata=metadata,
        code_version=code_version,
        found=found,
        missed_event=missed_event,
        now=now,
    )
    for attempt in range(1, TARGET_READS + 1):
        if target is None:
            target = _publish_target(namespace, name, key)
        dataset = target.dataset
        interval = _check_publishable(actor, dataset, namespace=namespace, name=name, key=key)
        if target.subscribers is None or target.partition_exists:
            break
        result, current = _publish_new_partition(
            target=target,
            key=key,
            interval=interval,
            version=version,
            content=content,
            event_fields=event_fields,
            now=now,
        )
        if result is not None:
            return result
        if current:
            break  # created meanwhile by a concurrent publish: the lock below decides
        if attempt < TARGET_READS:
            # The dataset or its subscribers changed since the target was read: judge the
            # publish again on them as they are now.
            target = None
    part, part_created = _partition_lock_or_create(
        dataset=dataset, key=key, interval=interval, exists=target.partition_exists is not None
    )
    current = None if part_created else part.current_revision
    if version is None or part_created:
        revision = current
    else:
        revision = PartitionRevision.objects.filter(partition=part, version=version).first()
    if revision is not None and revision.restatement_id is not None and revision != current:
        raise errors.RevisionStaged(
            f"partition {key!r} version {version!r} is staged in restatement "
            f"{revision.restatement_id}: publish it with that restatement, and promote it",
            errors=[FieldError("version", "staged in a restatement", "restatement")],
            extra={"rule": "staged_via_restatement", "restatement": revision.restatement_id},
        )
    if revision is not None and current is not None and revision.pk < current.pk:
        # A late retry of a superseded version must not roll the partition back.
        return _publish_response(dataset, part, revision, status_code=200)
    promoted = current is not None and current.restatement_id is not None
    if revision is not None and promoted and revision.pk != current.pk:
        # Nor undo a promotion: a version published while the restatement was staged (a
        # newer row than the promoted one) was superseded by it.
        return _publish_response(dataset, part, revision, status_code=200)
    if (
        revision is None
        and current is not None
        and current.state == PartitionRevision.State.READY
        and current.detected_by == PartitionRevision.DetectedBy.POLL
        and current.version == ""
        and state == PartitionRevision.State.READY
    ):
        # The late event for what the poll already found: the same content, now labelled.
        # Consumers were told once; a restatement would tell them twice.
        current.version = version or ""
        current.code_version = code_version or current.code_version
        current.metadata = {**current.metadata, **metadata}
        current.save(update_fields=["version", "code_version", "metadata"])
        return _publish_response(dataset, part, current, status_code=200)
    current_is_ready = current is not None and current.state == PartitionRevision.State.READY
    # A failed new version never hides the last good one from readers.
    becomes_current = (revision is None or current is None or revision.pk != current.pk) and (
        state == PartitionRevision.State.READY or not current_is_ready
    )
    event_fields["restated_version"] = (
        current.version if becomes_current and current_is_ready else None
    )

    event_id = None
    if revision is None or revision.state != state:
        if revision is not None and revision.state == PartitionRevision.State.READY:
            raise errors.RevisionAlreadyReady(
                f"partition {key!r} version {revision.version or '(unversioned)'!r} is already "
                "ready; publish a new version to restate it",
                errors=[FieldError("state", "a ready revision cannot change state", "terminal")],
            )
        if revision is None and _writes_in_one_statement():
            revision, event_id, maybe_late = _insert_revision_with_outbox(
                dataset=dataset,
                part=part,
                version=version or "",
                content=content,
                event_fields=event_fields,
                becomes_current=becomes_current,
                now=now,
            )
        else:
            if revision is None:
                revision = PartitionRevision.objects.create(
                    partition=part, version=version or "", **content
                )
            else:
                for field_name, value in content.items():
                    setattr(revision, field_name, value)
                revision.save(update_fields=list(content))
            event = ReadinessEvent.objects.create(
                dataset=dataset, partition=part, revision=revision, **event_fields
            )
            event_id = event.pk
            crashpoint("publish.after_event")
            _notify(dataset=dataset, part=part, revision=revision, event=event, now=now)
            maybe_late = True  # partition_arrived looks
        _revision_arrived(
            dataset=dataset, key=key, revision=revision, maybe_late=maybe_late, now=now
        )
    if becomes_current and part.current_revision_id != revision.pk:
        part.current_revision = revision
        part.save(update_fields=["current_revision", "updated_at"])
    changed = becomes_current or event_id is not None
    return _publish_response(
        dataset, part, revision, status_code=201 if changed else 200, event_id=event_id
    )


def _publish_at_once(
    *,
    actor: Actor,
    namespace: str,
    name: str,
    key: str,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
) -> tuple[PublishResult | None, _PublishTarget | None]:
    """The common publish, a first revision of a new partition, committed by its one
    statement (``_CREATE_PARTITION_SQL``) without a transaction around it (PostgreSQL
    only). BEGIN, COMMIT and reading the target were three of a publish's four round
    trips: the statement acts on the target this process kept of the dataset
    (``_kept_publish_target``) and writes only if that is still current; otherwise the
    target is read, outside a transaction too, and the statement tried again. A plain
    repeat is answered from one read (``_publish_repeat``).

    Only what needs nothing else in the same transaction takes this way: not a dataset the
    watchdog watches (its ping must commit with the partition); the caller keeps a publish
    recording a schema off it. Closing the partition's late incident (if the statement saw
    one open) commits just after, in its own transaction; ``freshness.recover_arrived``
    closes one that a crash in between left open.

    Returns:
        ``(response, None)`` when published; else ``(None, target)``, for the
        transactional way: the target it may act on (None: it reads it).

    Raises:
        What ``_check_publishable`` raises about the target as read (nothing is written).
    """
    content, event_fields = _revision_content(
        actor=actor,
        version=version,
        state=state,
        manifest=manifest,
        metadata=metadata,
        code_version=code_version,
        now=now,
    )

    def write(target: _PublishTarget, interval: LogicalInterval | None):
        """``(response or None, whether the target was current; None: not tried, the
        publish is not a new partition of an unwatched dataset)``."""
        if (
            target.partition_exists
            or target.subscribers is None
            or watchdog_feed.watches(target.dataset)
        ):
            return None, None
        return _publish_new_partition(
            target=target,
            key=key,
            interval=interval,
            version=version,
            content=content,
            event_fields=event_fields,
            now=now,
        )

    repeat = functools.partial(_publish_repeat, key=key, version=version, state=state)
    kept = _kept_publish_target(namespace, name)
    # A kept target may be out of date: only a publish it plainly allows (by the owner,
    # of a dataset not retired, with a key in its format) acts on it; anything else, and
    # every refusal, is judged on a fresh one.
    if kept is not None and kept.dataset.owner_id == actor.team.pk:
        try:
            interval = _check_publishable(
                actor, kept.dataset, namespace=namespace, name=name, key=key
            )
        except Problem:
            kept = None
    else:
        kept = None
    if kept is not None:
        result, current = write(kept, interval)
        if result is not None:
            return result, None
        if current:  # the partition exists: the kept target is the one to act on
            kept = dataclasses.replace(kept, partition_exists=True)
            result = repeat(kept)
            return result, (None if result is not None else kept)
    target = _publish_target(namespace, name, key)
    interval = _check_publishable(actor, target.dataset, namespace=namespace, name=name, key=key)
    result, current = write(target, interval)
    if result is None and current is False:
        return None, None  # changed since this very read: the transactional way reads again
    if result is None and target.partition_exists:
        result = repeat(target)
    return result, (None if result is not None else target)


# The partition's current revision, and the id of its first event in its state.
_CURRENT_REVISION_SQL = """
SELECT p.id, p.start_at, p.end_at, r.id, r.version, r.state, r.ready_at, (
    SELECT e.id FROM catalog_readinessevent e
    WHERE e.revision_id = r.id AND e.state = r.state ORDER BY e.id LIMIT 1
)
FROM catalog_partition p JOIN catalog_partitionrevision r ON r.id = p.current_revision_id
WHERE p.dataset_id = %s AND p.key = %s
"""


def _publish_repeat(
    target: _PublishTarget, *, key: str, version: str | None, state: str
) -> PublishResult | None:
    """The answer to a repeat of what the partition's current revision already says (no
    ``version``, or its version, and its state), read without a lock or a transaction:
    nothing is written, so the answer holds as of the read. None (the transactional way
    decides) for anything else."""
    with connection.cursor() as cursor:
        cursor.execute(_CURRENT_REVISION_SQL, [target.dataset.pk, key])
        row = cursor.fetchone()
    if row is None:
        return None
    part_id, start_at, end_at, revision_id, current_version, current_state, ready_at, event = row
    if current_state != state or version not in (None, current_version):
        return None
    part = Partition(id=part_id, dataset=target.dataset, key=key, start_at=start_at, end_at=end_at)
    revision = PartitionRevision(
        id=revision_id, partition=part, version=current_version, state=state, ready_at=ready_at
    )
    part.current_revision = revision
    return _publish_response(target.dataset, part, revision, status_code=200, event_id=event)


def _revision_content(
    *,
    actor: Actor | None,
    version: str | None,
    state: str,
    manifest: dict | None,
    metadata: dict,
    code_version: str,
    now: datetime,
    found: dict | None = None,
    missed_event: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a new revision (or a revision changing state) records, and the fields of its
    ``ReadinessEvent`` (``actor`` None: the poll found it)."""
    content = {
        "state": state,
        "ready_at": now if state == PartitionRevision.State.READY else None,
        "manifest": manifest,
        "metadata": metadata,
        "code_version": code_version,
        "detected_by": PartitionRevision.DetectedBy.EVENT
        if actor is not None
        else PartitionRevision.DetectedBy.POLL,
    }
    event_fields = {
        "state": state,
        "source": ReadinessEvent.Source.API if actor is not None else ReadinessEvent.Source.POLL,
        "published_by": actor.team if actor is not None else None,
        "api_key": actor.api_key if actor is not None else None,
        "restated_version": None,  # a new partition restates nothing; _publish sets it
        "payload": {
            "version": version,
            "state": state,
            "manifest": manifest,
            "metadata": metadata,
            "code_version": code_version,
            **({"found": found, "missed_event": missed_event} if actor is None else {}),
        },
    }
    return content, event_fields


def _publish_new_partition(
    *,
    target: _PublishTarget,
    key: str,
    interval: LogicalInterval | None,
    version: str | None,
    content: dict[str, Any],
    event_fields: dict[str, Any],
    now: datetime,
) -> tuple[PublishResult | None, bool]:
    """Create the partition with its first revision and all it owes in one statement, if
    ``target`` is current: ``(response, True)``; ``(None, current)`` when nothing was
    written (the partition exists, or the target is not current)."""
    created, current = _create_partition_with_revision(
        target=target,
        key=key,
        interval=interval,
        version=version or "",
        content=content,
        event_fields=event_fields,
        now=now,
    )
    if created is None:
        return None, current
    dataset = target.dataset
    part, revision, event_id, maybe_late = created
    _revision_arrived(dataset=dataset, key=key, revision=revision, maybe_late=maybe_late, now=now)
    return _publish_response(dataset, part, revision, status_code=201, event_id=event_id), True


def readiness_found(
    *,
    dataset: Dataset,
    partition: str,
    manifest: dict | None,
    found: dict,
    missed_event: bool,
    now: datetime,
) -> bool:
    """Record a partition the fallback poll found complete in storage, in one transaction.

    Same effects as a published ready event (revision, ``ReadinessEvent`` with source
    ``poll``, notifications, freshness recovery), with ``detected_by = poll``. A partition
    already ready (published, or found before) is left alone, so a partition both
    published and found is told once.

    Args:
        partition: the key read from the storage path.
        found: what the poll saw (file counts, the reason), kept on the revision.
        missed_event: the dataset otherwise publishes events, so one was lost.

    Returns:
        True when this call recorded the partition as ready.
    """
    with transaction.atomic():
        result = _publish(
            actor=None,
            namespace=dataset.namespace,
            name=dataset.name,
            key=partition,
            version=None,
            state=PartitionRevision.State.READY,
            manifest=manifest,
            metadata={"poll": found},
            code_version="",
            now=now,
            found=found,
            missed_event=missed_event,
        )
    return result.status_code == 201


@transaction.atomic
def readiness_incomplete(
    *, dataset: Dataset, partition: str, manifest: dict | None, found: dict, now: datetime
) -> None:
    """Record what the poll saw of a partition that is not complete yet (e.g. 2 of 3
    expected files), as its pending revision, so the API says why it is not ready.

    Leaves any partition that has a revision from a producer untouched.
    """
    try:
        interval = parse_partition_key(dataset.partitioning, partition, dataset.partition_timezone)
    except PartitionKeyError:
        return
    part, _ = _partition_lock_or_create(dataset=dataset, key=partition, interval=interval)
    current = part.current_revision
    if current is not None and (
        current.state != PartitionRevision.State.PENDING
        or current.detected_by != PartitionRevision.DetectedBy.POLL
    ):
        return
    metadata = {"poll": found}
    if current is None:
        current = PartitionRevision.objects.create(
            partition=part,
            version="",
            state=PartitionRevision.State.PENDING,
            manifest=manifest,
            metadata=metadata,
            detected_by=PartitionRevision.DetectedBy.POLL,
        )
        part.current_revision = current
        part.save(update_fields=["current_revision", "updated_at"])
    elif current.manifest != manifest or current.metadata != metadata:
        current.manifest = manifest
        current.metadata = metadata
        current.save(update_fields=["manifest", "metadata"])


def _check_may_publish(actor: Actor, dataset: Dataset) -> None:
    if dataset.owner_id == actor.team.pk:
        return
    if (
        actor.api_key is not None
        and actor.api_key.delegated_datasets.filter(pk=dataset.pk).exists()
    ):
        return
    raise errors.PublishNotAllowed(
        f"{dataset} is owned by team {dataset.owner.slug}; only its keys, or a key delegated "
        "for this dataset, may publish"
    )


def _partition_lock_or_create(
    *, dataset: Dataset, key: str, interval: LogicalInterval | None, exists: bool = False
) -> tuple[Partition, bool]:
    """The partition row, locked for this transaction; created if missing.

    One ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` (PostgreSQL and SQLite alike): a
    new row is ours and locked by the insert itself; a concurrent creator waits on the
    unique index until the first commits and then finds the row, which it locks.

    Args:
        exists: the caller's own insert of the row just conflicted, so lock it first (and
            insert it only if it has gone since).

    Returns:
        ``(partition, created)``.
    """
    if exists:
        # No join here: the current revision must be read after the lock is granted, or a
        # waiter would act on the revision as it was before the holder changed it.
        part = Partition.objects.select_for_update().filter(dataset=dataset, key=key).first()
        if part is not None:
            return part, False
    now = timezone.now()
    start, end = (interval.start, interval.end) if interval else (None, None)
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Partition._meta.db_table} "  # noqa: S608 - table name from the model
            "(dataset_id, key, start_at, end_at, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (dataset_id, key) DO NOTHING RETURNING id",
            [dataset.pk, key, adapt(start), adapt(end), adapt(now), adapt(now)],
        )
        row = cursor.fetchone()
    if row is not None:
        part = Partition(
            id=row[0], dataset=dataset, key=key, start_at=start, end_at=end, created_at=now
        )
        part.updated_at = now
        return part, True
    # No join here (see above).
    return Partition.objects.select_for_update().get(dataset=dataset, key=key), False


# What publishing reads of a dataset: wide rows cost more to build than to fetch.
_PUBLISH_DATASET_FIELDS = (
    "id",
    "namespace",
    "name",
    "owner_id",
    "lifecycle",
    "partitioning",
    "partition_timezone",
    "criticality",
    "sla_cron",
)
_PUBLISH_DATASET_COLUMNS = [
    f.attname for f in Dataset._meta.concrete_fields if f.attname in _PUBLISH_DATASET_FIELDS
]
_PUBLISH_DATASET_SQL = (
    f"SELECT {', '.join(_PUBLISH_DATASET_COLUMNS)} FROM {Dataset._meta.db_table} "  # noqa: S608
    "WHERE namespace = %s AND name = %s"
)
# PostgreSQL: the same row also says whether the partition exists and, for a publish that
# creates it (``_create_partition_with_revision``), brings the dataset's subscribers, as
# JSON ``notices.Subscriber`` rows, and the target's version: a hash of both, which
# ``_CREATE_PARTITION_SQL`` computes again to write only when it still holds.
_TARGET_FROM = """FROM catalog_dataset, LATERAL (
    SELECT coalesce(json_agg(
        json_build_array(endpoint_id, event_types, partition_pattern) ORDER BY id
    ), '[]')::text AS rows
    FROM catalog_subscription
    WHERE dataset_id = catalog_dataset.id AND endpoint_id IS NOT NULL
) AS subscribers"""
_TARGET_VERSION = (
    f"md5(row({', '.join(f'catalog_dataset.{c}' for c in _PUBLISH_DATASET_COLUMNS)}, "
    "subscribers.rows)::text)"
)
_PUBLISH_DATASET_PG_SQL = (
    f"SELECT {', '.join(f'catalog_dataset.{c}' for c in _PUBLISH_DATASET_COLUMNS)}, "  # noqa: S608
    "EXISTS (SELECT 1 FROM catalog_partition "
    "WHERE dataset_id = catalog_dataset.id AND key = %s), "
    f"subscribers.rows, {_TARGET_VERSION} {_TARGET_FROM} "
    "WHERE catalog_dataset.namespace = %s AND catalog_dataset.name = %s"
)


@dataclass(frozen=True)
class _PublishTarget:
    """What ``_publish_target`` reads: the dataset (None: not registered) and, on
    PostgreSQL, whether the partition exists, the dataset's subscribers (else None) and
    the target's version (``_TARGET_VERSION``)."""

    dataset: Dataset | None
    partition_exists: bool | None = None
    subscribers: list[notices.Subscriber] | None = None
    version: str | None = None


# Reads of a publish's target before it goes on with one read moments ago even if the
# statement found that out of date again (only a dataset changing that fast could).
TARGET_READS = 3

# The last target read of each dataset, per process, by (namespace, name): ``(dataset
# row, subscribers, version)``; the least recently read is forgotten first. A publish may
# act on it without reading it again, since the statement that writes checks the version
# first (and writes nothing if it changed).
PUBLISH_TARGETS_KEPT = 1024
_publish_targets: dict[tuple[str, str], tuple[tuple, list, str]] = {}


def _publish_target(namespace: str, name: str, key: str) -> _PublishTarget:
    """The dataset with this (normalised) identity, only ``_PUBLISH_DATASET_FIELDS``
    loaded (the rest deferred), and where ``_writes_in_one_statement()`` whether the
    partition ``key`` exists, the dataset's subscribers and the target's version, in one
    statement (kept for ``_kept_publish_target``).

    Raw SQL: every publish runs it, and compiling the ORM query cost more than running it.
    """
    on_pg = _writes_in_one_statement()
    with connection.cursor() as cursor:
        if on_pg:
            cursor.execute(_PUBLISH_DATASET_PG_SQL, [key, namespace, name])
        else:
            cursor.execute(_PUBLISH_DATASET_SQL, [namespace, name])
        row = cursor.fetchone()
    if row is None:
        _publish_targets.pop((namespace, name), None)
        return _PublishTarget(None)
    columns = len(_PUBLISH_DATASET_COLUMNS)
    dataset = Dataset.from_db(connection.alias, _PUBLISH_DATASET_COLUMNS, row[:columns])
    if not on_pg:
        return _PublishTarget(dataset)
    subscribers, version = json.loads(row[columns + 1]), row[columns + 2]
    if _publish_targets.pop((namespace, name), None) is None:
        while len(_publish_targets) >= PUBLISH_TARGETS_KEPT:
            _publish_targets.pop(next(iter(_publish_targets)), None)  # read longest ago
    _publish_targets[namespace, name] = (row[:columns], subscribers, version)
    return _PublishTarget(dataset, row[columns], subscribers, version)


def _kept_publish_target(namespace: str, name: str) -> _PublishTarget | None:
    """The target last read of this dataset by this process, as if its partition were
    missing, or None; not to be trusted before a statement checks its version."""
    kept = _publish_targets.get((namespace, name))
    if kept is None:
        return None
    row, subscribers, version = kept
    dataset = Dataset.from_db(connection.alias, _PUBLISH_DATASET_COLUMNS, row)
    return _PublishTarget(dataset, False, subscribers, version)


def _writes_in_one_statement() -> bool:
    """Whether a new revision and what it owes are written in one statement: on
    PostgreSQL (data-modifying ``WITH``); SQLite writes them one by one."""
    return connection.vendor == "postgresql"


# PostgreSQL: what a new revision owes, after a ``revision`` CTE (id, partition_id): its
# readiness event, the notification (deduplicated by the event's id) and one delivery per
# endpoint. Every column the models fill is given, as the ORM would (auto_now and
# auto_now_add from ``stamp``); tests/catalog/test_publish_one_statement.py compares the
# rows with the ORM's.
_OUTBOX_CTES = """
event AS (
    INSERT INTO catalog_readinessevent
        (dataset_id, partition_id, revision_id, state, source, published_by_id, api_key_id,
         restated_version, payload, received_at)
    SELECT %(dataset)s, revision.partition_id, revision.id, %(state)s, %(source)s,
           %(published_by)s, %(api_key)s, %(restated_version)s, %(event_payload)s::jsonb,
           %(stamp)s
    FROM revision
    RETURNING id
), notification AS (
    INSERT INTO catalog_notification (id, type, dataset_id, dedup_key, payload, created_at)
    SELECT %(notification)s, %(type)s, %(dataset)s, 'readiness-event:' || event.id,
           %(notification_payload)s::jsonb, %(stamp)s
    FROM event
    RETURNING id
), deliveries AS (
    INSERT INTO catalog_delivery
        (notification_id, endpoint_id, state, attempts, attempts_before_replay,
         next_attempt_at, last_error_kind, last_error, created_at)
    SELECT notification.id, endpoint.id, %(pending)s, 0, 0, %(now)s, '', '', %(stamp)s
    FROM notification, unnest(%(endpoints)s::bigint[]) AS endpoint (id)
)"""
# Whether the partition has an open late incident for ``freshness.partition_arrived``.
_MAYBE_LATE = """%(ready)s AND EXISTS (
    SELECT 1 FROM catalog_latepartition
    WHERE dataset_id = %(dataset)s AND partition_key = %(key)s AND recovered_at IS NULL
)"""

# A new revision of a locked partition with everything it owes, and (if it becomes
# current) the partition's pointer to it, in one round trip.
_INSERT_REVISION_SQL = f"""
WITH revision AS (
    INSERT INTO catalog_partitionrevision
        (partition_id, version, state, manifest, metadata, code_version, detected_by,
         ready_at, created_at)
    VALUES (%(partition)s, %(version)s, %(state)s, %(manifest)s::jsonb, %(metadata)s::jsonb,
            %(code_version)s, %(detected_by)s, %(ready_at)s, %(stamp)s)
    RETURNING id, partition_id
), {_OUTBOX_CTES}, pointer AS (
    UPDATE catalog_partition SET current_revision_id = revision.id, updated_at = %(stamp)s
    FROM revision
    WHERE catalog_partition.id = revision.partition_id AND %(becomes_current)s
)
SELECT revision.id, event.id, {_MAYBE_LATE}
FROM revision, event
"""  # noqa: S608 - constant fragments, no input

# A new partition, created already pointing at its first revision (whose id is drawn
# first: the foreign keys are checked at commit), and everything the revision owes, in one
# round trip, if the publish target (``_publish_target``) still has the version the
# publish acted on. One row: whether it had, and, if the partition was created (the
# version held and the insert did not conflict), its ids.
_CREATE_PARTITION_SQL = f"""
WITH target AS (
    SELECT 1 {_TARGET_FROM}
    WHERE catalog_dataset.id = %(dataset)s AND {_TARGET_VERSION} = %(target_version)s
), partition AS (
    INSERT INTO catalog_partition
        (dataset_id, key, start_at, end_at, current_revision_id, created_at, updated_at)
    SELECT %(dataset)s, %(key)s, %(start)s, %(end)s,
           nextval(pg_get_serial_sequence('catalog_partitionrevision', 'id')),
           %(stamp)s, %(stamp)s
    FROM target
    ON CONFLICT (dataset_id, key) DO NOTHING
    RETURNING id, current_revision_id
), revision AS (
    INSERT INTO catalog_partitionrevision
        (id, partition_id, version, state, manifest, metadata, code_version, detected_by,
         ready_at, created_at)
    SELECT current_revision_id, id, %(version)s, %(state)s, %(manifest)s::jsonb,
           %(metadata)s::jsonb, %(code_version)s, %(detected_by)s, %(ready_at)s, %(stamp)s
    FROM partition
    RETURNING id, partition_id
), {_OUTBOX_CTES}
SELECT EXISTS (SELECT 1 FROM target), revision.partition_id, revision.id, event.id,
       {_MAYBE_LATE}
FROM (VALUES (1)) AS one (x) LEFT JOIN (revision CROSS JOIN event) ON true
"""  # noqa: S608 - constant fragments, no input


def _create_partition_with_revision(
    *,
    target: _PublishTarget,
    key: str,
    interval: LogicalInterval | None,
    version: str,
    content: dict[str, Any],
    event_fields: dict[str, Any],
    now: datetime,
) -> tuple[tuple[Partition, PartitionRevision, int, bool] | None, bool]:
    """PostgreSQL only: create the partition with its first revision and everything that
    owes (``_CREATE_PARTITION_SQL``), the common publish, in one statement: the rows the
    statement-by-statement path of ``_publish`` writes in eight. The statement writes only
    if ``target`` (its dataset, subscribers and version, read earlier or kept by this
    process) is still current. Rings the doorbell after commit.

    Returns:
        ``(created, current)``: ``created`` is ``(partition, revision, event id,
        maybe_late)``, or None when nothing was written (the partition exists, or the
        target is not current); ``current``: the target's version still held;
        ``maybe_late``: the partition has an open late incident (ready revisions only).
    """
    dataset = target.dataset
    start, end = (interval.start, interval.end) if interval else (None, None)
    stamp = timezone.now()  # what auto_now and auto_now_add would set
    part = Partition(dataset=dataset, key=key, start_at=start, end_at=end, created_at=stamp)
    part.updated_at = stamp
    revision = PartitionRevision(partition=part, version=version, created_at=stamp, **content)
    kind, data = _readiness_notice(
        dataset, part, revision, restated_version=None, missed_event=_missed(event_fields)
    )
    endpoint_ids = notices.matching_endpoints(target.subscribers, type=kind, partition_key=key)
    params = _outbox_params(dataset, revision, event_fields, kind, data, endpoint_ids, now=now)
    params.update(start=start, end=end, target_version=target.version)
    with connection.cursor() as cursor:
        cursor.execute(_CREATE_PARTITION_SQL, params)
        current, part.pk, revision.pk, event_id, maybe_late = cursor.fetchone()
    if part.pk is None:
        return None, current
    revision.partition = _saved(part)  # its id is known now
    part.current_revision = _saved(revision)
    _outbox_written(endpoint_ids)
    return (part, revision, event_id, maybe_late), current


def _insert_revision_with_outbox(
    *,
    dataset: Dataset,
    part: Partition,
    version: str,
    content: dict[str, Any],
    event_fields: dict[str, Any],
    becomes_current: bool,
    now: datetime,
) -> tuple[PartitionRevision, int, bool]:
    """PostgreSQL only: write a new revision of the locked ``part`` and everything it
    owes in two statements (the subscribers, then ``_INSERT_REVISION_SQL``): the rows the
    statement-by-statement path of ``_publish`` writes in six or seven. Rings the doorbell
    after commit.

    Returns:
        ``(revision, event id, maybe_late)``; ``maybe_late``: the partition has an open
        late incident (ready revisions only).
    """
    stamp = timezone.now()  # what auto_now and auto_now_add would set
    revision = PartitionRevision(partition=part, version=version, created_at=stamp, **content)
    kind, data = _readiness_notice(
        dataset,
        part,
        revision,
        restated_version=event_fields["restated_version"],
        missed_event=_missed(event_fields),
    )
    endpoint_ids = notices.subscriber_endpoints(
        dataset_id=dataset.pk, type=kind, partition_key=part.key
    )
    params = _outbox_params(dataset, revision, event_fields, kind, data, endpoint_ids, now=now)
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_REVISION_SQL, {**params, "becomes_current": becomes_current})
        revision.pk, event_id, maybe_late = cursor.fetchone()
    _saved(revision)
    if becomes_current:
        part.current_revision = revision
        part.updated_at = stamp
    _outbox_written(endpoint_ids)
    return revision, event_id, maybe_late


def _missed(event_fields: dict[str, Any]) -> bool:
    return bool(event_fields["payload"].get("missed_event"))


def _outbox_params(
    dataset: Dataset,
    revision: PartitionRevision,
    event_fields: dict[str, Any],
    kind: str,
    data: dict[str, Any],
    endpoint_ids: set[int],
    *,
    now: datetime,
) -> dict[str, Any]:
    """The parameters of ``_INSERT_REVISION_SQL`` and ``_CREATE_PARTITION_SQL`` (but
    ``becomes_current``, ``start`` and ``end``): JSON as text for ``::jsonb``."""
    notification_id = uuid.uuid4()
    published_by, api_key = event_fields["published_by"], event_fields["api_key"]
    return {
        "dataset": dataset.pk,
        "partition": revision.partition.pk,
        "key": revision.partition.key,
        "version": revision.version,
        "state": revision.state,
        # SQL NULL, not JSON null, as the ORM stores None.
        "manifest": None if revision.manifest is None else json.dumps(revision.manifest),
        "metadata": json.dumps(revision.metadata),
        "code_version": revision.code_version,
        "detected_by": revision.detected_by,
        "ready_at": revision.ready_at,
        "source": event_fields["source"],
        "published_by": published_by.pk if published_by is not None else None,
        "api_key": api_key.pk if api_key is not None else None,
        "restated_version": event_fields["restated_version"],
        "event_payload": json.dumps(event_fields["payload"]),
        "notification": notification_id,
        "type": kind,
        "notification_payload": json.dumps(
            notices.notification_payload(notification_id, type=kind, data=data, now=now)
        ),
        "pending": Delivery.State.PENDING,
        "endpoints": sorted(endpoint_ids),
        "ready": revision.state == PartitionRevision.State.READY,
        "now": now,
        "stamp": revision.created_at,
    }


def _saved(instance: _Model) -> _Model:
    """Mark an instance built in Python as the row a raw statement just wrote."""
    instance._state.adding, instance._state.db = False, connection.alias
    return instance


def _outbox_written(endpoint_ids: set[int]) -> None:
    # The crash points of the statement-by-statement path: here one statement wrote all
    # the rows, so a crash at either loses them all (inside a transaction) or keeps them
    # all (``_publish_at_once``: committed), never some.
    crashpoint("publish.after_event")
    crashpoint("publish.between_outbox_inserts")
    if endpoint_ids:
        doorbell.ring_deliveries()


def _revision_arrived(
    *, dataset: Dataset, key: str, revision: PartitionRevision, maybe_late: bool, now: datetime
) -> None:
    """After a new readiness event: a ready revision closes the partition's late incident
    (if ``maybe_late``: one may be open) and pings the watchdog."""
    if revision.state != PartitionRevision.State.READY:
        return
    if maybe_late:
        # A savepoint in a publish's transaction; its own after ``_publish_at_once``.
        with transaction.atomic():
            freshness.partition_arrived(dataset=dataset, partition_key=key, now=now)
    watchdog_feed.ping_partition(dataset, partition_key=key, revision_id=revision.pk, now=now)


def _notify(
    *,
    dataset: Dataset,
    part: Partition,
    revision: PartitionRevision,
    event: ReadinessEvent,
    now: datetime,
) -> None:
    """Write the notification for ``event`` and a delivery per matching subscriber endpoint."""
    kind, data = _readiness_notice(
        dataset,
        part,
        revision,
        restated_version=event.restated_version,
        missed_event=bool(event.payload.get("missed_event")),
    )
    notification = notices.notification_write(
        type=kind, dataset=dataset, dedup_key=f"readiness-event:{event.pk}", data=data, now=now
    )
    crashpoint("publish.between_outbox_inserts")

    notices.fan_out(notification=notification, dataset=dataset, partition_key=part.key, now=now)


def _readiness_notice(
    dataset: Dataset,
    part: Partition,
    revision: PartitionRevision,
    *,
    restated_version: str | None,
    missed_event: bool,
) -> tuple[str, dict[str, Any]]:
    """The notification type and ``data`` telling a readiness event of ``revision``."""
    if revision.state == PartitionRevision.State.FAILED:
        kind = Notification.Type.PARTITION_FAILED
    elif restated_version is not None and dataset.partitioning != Dataset.Partitioning.NONE:
        kind = Notification.Type.PARTITION_RESTATED
    else:
        kind = Notification.Type.PARTITION_READY
    data = {
        "dataset": {"namespace": dataset.namespace, "name": dataset.name},
        "partition": part.key,
        "logical_start": iso(part.start_at),
        "logical_end": iso(part.end_at),
        "version": revision.version or None,
        "previous_version": (restated_version or None)
        if kind == Notification.Type.PARTITION_RESTATED
        else None,
        "state": revision.state,
        "ready_at": iso(revision.ready_at),
        "manifest": revision.manifest,
        "metadata": revision.metadata,
        "detected_by": revision.detected_by,
        "missed_event": missed_event,
    }
    return kind, data


def _publish_response(
    dataset: Dataset,
    part: Partition,
    revision: PartitionRevision,
    *,
    status_code: int,
    event_id: int | None = None,
    restatement_id: int | None = None,
) -> PublishResult:
    if event_id is None:
        event_id = (
            ReadinessEvent.objects.filter(revision=revision, state=revision.state)
            .values_list("pk", flat=True)
            .first()
        )
    current_version = part.current_revision.version if part.current_revision else revision.version
    body = {
        "dataset": {"namespace": dataset.namespace, "name": dataset.name},
        "partition": part.key,
        "logical_start": iso(part.start_at),
        "logical_end": iso(part.end_at),
        "version": revision.version or None,
        "state": revision.state,
        "ready_at": iso(revision.ready_at),
        "current_version": current_version or None,
        "event_id": event_id,
    }
    if restatement_id is not None:
        body["restatement"] = restatement_id
    return PublishResult(status_code=status_code, body=body)


def _fingerprint(payload: dict[str, Any]) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _idempotency_begin(
    *, team: Team, key: str, fingerprint: str, now: datetime
) -> tuple[IdempotencyRecord | None, PublishResult | None]:
    """Claim ``key`` for this request, or return the stored response to replay.

    Must run inside the caller's transaction: the record commits with the work, so a
    failed request leaves no record and may be retried. A concurrent request holding the
    key makes this one wait at most ``IDEMPOTENCY_LOCK_TIMEOUT`` before 409.

    Returns:
        ``(record, None)`` when this request owns the key, ``(None, replay)`` otherwise.

    Raises:
        IdempotencyKeyReused (422), IdempotencyKeyInProgress (409).
    """
    expires_at = now + timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    existing = IdempotencyRecord.objects.select_for_update().filter(team=team, key=key).first()
    if existing is None:
        try:
            with transaction.atomic():
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute(f"SET LOCAL lock_timeout = '{IDEMPOTENCY_LOCK_TIMEOUT}'")
                record = IdempotencyRecord.objects.create(
                    team=team, key=key, fingerprint=fingerprint, expires_at=expires_at
                )
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
            return record, None
        except OperationalError as exc:
            raise errors.IdempotencyKeyInProgress(
                "another request with this Idempotency-Key is still being processed; "
                "retry after it completes"
            ) from exc
        except IntegrityError:
            existing = IdempotencyRecord.objects.select_for_update().get(team=team, key=key)
    if existing.expires_at <= now:
        existing.fingerprint = fingerprint
        existing.status_code = None
        existing.response_body = None
        existing.expires_at = expires_at
        existing.save()
        return existing, None
    if existing.fingerprint != fingerprint:
        raise errors.IdempotencyKeyReused(
            "this Idempotency-Key was first used with a different request body",
            errors=[FieldError("Idempotency-Key", "reused with a different body", "reuse")],
        )
    if existing.status_code is None:
        raise errors.IdempotencyKeyInProgress("the first request with this key has not finished")
    return None, PublishResult(
        status_code=existing.status_code, body=existing.response_body, replayed=True
    )


# --- subscriptions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Caution:
    """Something a caller should know about a request that succeeded (``code`` stable
    snake_case, ``detail`` for people, ``sunset_at`` when it is about a sunset)."""

    code: str
    detail: str
    sunset_at: datetime | None = None


@dataclass(frozen=True)
class SubscriptionResult:
    """``subscription_create``'s answer; ``endpoint_secret`` is set only when the webhook
    endpoint was new: it is the one time its signing secret is shown. ``warnings``: e.g.
    the dataset is deprecated."""

    subscription: Subscription
    created: bool
    endpoint_secret: str | None = None
    warnings: tuple[Caution, ...] = ()


@transaction.atomic
def subscription_create(
    *,
    actor: Actor,
    dataset: Dataset,
    job_namespace: str = "",
    job_name: str = "",
    endpoint_url: str | None = None,
    event_types: list[str] | None = None,
    partition_pattern: str = "",
    since: datetime | None = None,
    now: datetime | None = None,
) -> SubscriptionResult:
    """Declare that the actor's team (optionally one of its jobs) reads ``dataset``.

    Declaring the same (team, dataset, job) again updates its endpoint and filters.

    Args:
        endpoint_url: webhook URL to notify, reused when the team already has it; ``""``
            removes it; None keeps what an earlier declaration set.
        event_types: notification types to receive; empty or None: all.
        partition_pattern: fnmatch pattern on partition keys (``2026-*``); empty: all.
        since: aware instant, at most ``MAX_SINCE_DAYS`` back: notifications about the
            dataset from then on are delivered too (a new consumer catching up). Without
            it a subscription receives what happens from its creation on, never history.
        now: aware UTC instant (default: the current time).

    Returns:
        A ``SubscriptionResult``; a new webhook endpoint gets a signing secret, returned
        once in ``endpoint_secret``; subscribing to a deprecated dataset succeeds with a
        ``dataset_deprecated`` warning naming its sunset.

    Raises:
        ValidationProblem: ``endpoint_url``'s host is an IP address the outbound guard
            blocks (400, rule ``public_address``; ``delivery.webhook_address_refusal``:
            a host name is not resolved here, delivery checks it at connect time).
        DatasetRetired: the dataset is retired (409).
        JobNamespaceOfAnotherTeam: ``job_namespace`` is claimed by another team (403).
    """
    now = now or timezone.now()
    refusal = delivery.webhook_address_refusal(endpoint_url) if endpoint_url else None
    if refusal:
        raise ValidationProblem(
            refusal, errors=[FieldError("endpoint_url", refusal, "public_address")]
        )
    if dataset.lifecycle == Dataset.Lifecycle.RETIRED:
        raise errors.DatasetRetired(
            f"{dataset} is retired; it can no longer be subscribed to",
            errors=[FieldError("dataset_id", "the dataset is retired", "lifecycle_retired")],
        )
    if job_namespace:
        owner = selectors.claimants(kind=Claim.Kind.JOB_NAMESPACE, patterns=[job_namespace]).get(
            job_namespace
        )
        if owner is not None and owner.pk != actor.team.pk:
            # Declaring another team's job would put words in its mouth.
            raise errors.JobNamespaceOfAnotherTeam(
                f"job namespace {job_namespace!r} is claimed by team {owner.slug}; a "
                "subscription names one of your own team's jobs",
                errors=[FieldError("job_namespace", "claimed by another team", "claimed")],
            )
    warnings = []
    if dataset.lifecycle == Dataset.Lifecycle.DEPRECATED:
        sunset = f" and retires at {iso(dataset.sunset_at)}" if dataset.sunset_at else ""
        warnings.append(
            Caution(
                code="dataset_deprecated",
                detail=f"{dataset} is deprecated{sunset}; plan to read its successor",
                sunset_at=dataset.sunset_at,
            )
        )
    defaults: dict[str, Any] = {
        "event_types": sorted(set(event_types or [])),
        "partition_pattern": partition_pattern,
    }
    new_secret = None
    if endpoint_url is not None:  # None: keep the endpoint a previous declaration set
        defaults["endpoint"] = None
        if endpoint_url:
            endpoint, endpoint_created = Endpoint.objects.get_or_create(
                team=actor.team, kind=Endpoint.Kind.WEBHOOK, url=endpoint_url
            )
            if endpoint_created:
                new_secret = delivery.endpoint_set_new_secret(endpoint=endpoint, now=now)
            defaults["endpoint"] = endpoint
    subscription, created = Subscription.objects.update_or_create(
        team=actor.team,
        dataset=dataset,
        job_namespace=job_namespace,
        job_name=job_name,
        defaults=defaults,
    )
    if since is not None and subscription.endpoint is not None:
        _catch_up(subscription, since=since, now=now)
    return SubscriptionResult(subscription, created, new_secret, tuple(warnings))


MAX_SINCE_DAYS = 30


# Notifications about a dataset that are not for its subscribers: the watchdog's monitor
# definitions (they hold the pipeline's ping key, a secret) and pings; and change-notice
# reminders, which went to the consumer teams that had not acknowledged at the time.
NOT_FOR_SUBSCRIBERS = (
    Notification.Type.WATCHDOG_MONITOR,
    Notification.Type.WATCHDOG_PING,
    Notification.Type.CHANGE_NOTICE_REMINDER,
)


def _catch_up(subscription: Subscription, *, since: datetime, now: datetime) -> int:
    """Deliver the dataset's notifications since ``since`` that match the subscription's
    filters to its endpoint (each at most once: the outbox's unique key); never those
    ``NOT_FOR_SUBSCRIBERS``."""
    if since < now - timedelta(days=MAX_SINCE_DAYS):
        raise ValidationProblem(
            f"since may be at most {MAX_SINCE_DAYS} days back",
            errors=[FieldError("since", f"more than {MAX_SINCE_DAYS} days back", "max_age")],
        )
    history = (
        Notification.objects.filter(dataset=subscription.dataset, created_at__gte=since)
        .exclude(type__in=NOT_FOR_SUBSCRIBERS)
        .order_by("created_at")
    )
    rows = [
        Delivery(notification=n, endpoint=subscription.endpoint, next_attempt_at=now)
        for n in history
        if (not subscription.event_types or n.type in subscription.event_types)
        and (
            not subscription.partition_pattern
            or "partition" not in n.payload["data"]  # about the whole dataset
            or fnmatch.fnmatchcase(n.payload["data"]["partition"], subscription.partition_pattern)
        )
    ]
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    if rows:
        doorbell.ring_deliveries()
    return len(rows)


@transaction.atomic
def subscription_delete(*, actor: Actor, subscription_id: int) -> None:
    """Delete one of the actor's team's subscriptions.

    Raises:
        SubscriptionNotFound: no such subscription of this team (404; another team's
            subscriptions are not revealed).
    """
    deleted = 0
    if 0 < subscription_id <= 2**63 - 1:
        deleted, _ = Subscription.objects.filter(pk=subscription_id, team=actor.team).delete()
    if not deleted:
        raise errors.SubscriptionNotFound(f"your team has no subscription {subscription_id}")


def subscription_declare_for_job(
    *, team: Team, job_namespace: str, job_name: str, identities: list[tuple[str, str]]
) -> int:
    """Declare that ``team``'s job reads each registered dataset among ``identities``: a
    verified OpenLineage JobEvent's inputs. Creates a subscription of the team naming the
    job, with no endpoint and no filters, for each registered dataset it lacks one for; an
    existing one (its endpoint and filters) is left as it is. Identities the catalog does
    not know are skipped. Call inside the caller's transaction; safe under concurrency
    (an insert that loses a race is ignored).

    Args:
        team: the job's verified owner (it claims the job namespace).
        job_namespace, job_name: the OpenLineage job identity, as received.
        identities: ``(namespace, name)`` dataset identities, already normalised.

    Returns:
        How many subscriptions it created (0 when all existed; one that a concurrent
        declaration inserted first is counted too).
    """
    if not identities:
        return 0
    match = models.Q()
    for namespace, name in identities:
        match |= models.Q(namespace=namespace, name=name)
    declared = Subscription.objects.filter(
        team=team, dataset=models.OuterRef("pk"), job_namespace=job_namespace, job_name=job_name
    )
    wanted = Dataset.objects.filter(match).filter(~models.Exists(declared))
    rows = [
        Subscription(team=team, dataset=dataset, job_namespace=job_namespace, job_name=job_name)
        for dataset in wanted.order_by("pk")
    ]
    Subscription.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


# --- claims, jobs and observed usage (recorded by lineage) -----------------------------

MAX_CLAIM_PATTERN_LENGTH = 255
# A database role: the server's dataset namespace (lower case, as catalog.identity keeps
# it), then the role as the server names it.
_DB_ROLE_PATTERN = re.compile(r"^[a-z][a-z0-9+.\-]*://[^/]+/[^/]+$")


# How many of the other teams' datasets a refused prefix claim names.
CLAIM_CONFLICT_LISTED = 20


def _lock_namespace(namespace: str) -> None:
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


def _covering_prefix_claims(identities: set[tuple[str, str]]) -> dict[tuple[str, str], Claim]:
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


def _check_prefix_owner(*, team: Team, location: str) -> None:
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
        (``held_usage_attribute``).
    """
    if kind not in Claim.Kind.values:
        raise ValidationProblem(
            f"unknown claim kind {kind!r}",
            errors=[FieldError("kind", f"one of {', '.join(Claim.Kind.values)}", "choice")],
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
        _lock_namespace(_prefix_namespace(pattern))
    claim = Claim.objects.select_related("team").filter(kind=kind, pattern=pattern).first()
    if claim is None:
        if kind == Claim.Kind.DATASET_PREFIX:
            _check_prefix_claimable(team=actor.team, prefix=pattern)
        try:
            with transaction.atomic():
                claim = Claim.objects.create(team=actor.team, kind=kind, pattern=pattern)
            _audit_claim(actor=actor, claim=claim, action="claim.created")
            if kind == Claim.Kind.DB_ROLE:
                held_usage_attribute(team=actor.team, pattern=pattern)
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


# --- dataset ownership transfers ----------------------------------------------------------


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
    _check_prefix_owner(team=receiver, location=dataset_location(dataset.namespace, dataset.name))
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
    _lock_namespace(dataset.namespace)
    transfer = _open_transfer(actor=actor, dataset=dataset, transfer_id=transfer_id)
    if transfer.to_team_id != actor.team.pk:
        raise errors.NotDatasetOwner(
            f"only team {transfer.to_team.slug} may accept transfer {transfer_id}"
        )
    dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
    _check_prefix_owner(
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


def job_record(*, namespace: str, name: str, team: Team | None, seen_at: datetime) -> Job:
    """Record that the job ``namespace`` / ``name`` was seen at ``seen_at``.

    Creates the job, or widens its first/last seen times. Call inside the caller's
    transaction (lineage processing).

    Args:
        namespace, name: the OpenLineage job identity, as received (at most 255 and 1024
            characters).
        team: the verified owner (the reporting team claims the job namespace), which
            becomes the job's ``team``; None for an unverified report, which never changes
            the owner.
        seen_at: aware instant (the event's time), UTC.

    On PostgreSQL this is one statement (``INSERT ... ON CONFLICT DO UPDATE``, which
    locks the job row until the caller's transaction ends); elsewhere (SQLite, the
    embedded mode) a get-or-create and, when a seen time widens or the owner changes, an
    update.

    Returns:
        The job row: on PostgreSQL as this call left it; elsewhere with its seen times as
        before this call when it existed.
    """
    if connection.vendor == "postgresql":
        return _job_upsert(namespace=namespace, name=name, team=team, seen_at=seen_at)
    job, created = Job.objects.get_or_create(
        namespace=namespace,
        name=name,
        defaults={"team": team, "first_seen_at": seen_at, "last_seen_at": seen_at},
    )
    if created:
        return job
    changes: dict[str, Any] = {}
    if team is not None and job.team_id != team.pk:
        changes["team"] = team
    # Seen times only widen, so a stale read can only skip an update that is not needed.
    if seen_at < job.first_seen_at:
        changes["first_seen_at"] = Least(models.F("first_seen_at"), seen_at)
    if seen_at > job.last_seen_at:
        changes["last_seen_at"] = Greatest(models.F("last_seen_at"), seen_at)
    if changes:
        Job.objects.filter(pk=job.pk).update(**changes)
        if team is not None:
            job.team = team
    return job


def _job_upsert(*, namespace: str, name: str, team: Team | None, seen_at: datetime) -> Job:
    """``job_record`` in one PostgreSQL statement."""
    columns = ["id", "namespace", "name", "team_id", "first_seen_at", "last_seen_at", "created_at"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {Job._meta.db_table} AS j
                (namespace, name, team_id, first_seen_at, last_seen_at, created_at)
            VALUES (%s, %s, %s, %s, %s, %s)
            ON CONFLICT ON CONSTRAINT uniq_job_identity DO UPDATE SET
                team_id = COALESCE(EXCLUDED.team_id, j.team_id),
                first_seen_at = LEAST(j.first_seen_at, EXCLUDED.first_seen_at),
                last_seen_at = GREATEST(j.last_seen_at, EXCLUDED.last_seen_at)
            RETURNING {", ".join(columns)}
            """,  # noqa: S608 - model table and placeholders only
            [namespace, name, team.pk if team else None, seen_at, seen_at, timezone.now()],
        )
        row = cursor.fetchone()
    job = Job(**dict(zip(columns, row, strict=True)))
    job._state.adding = False
    job._state.db = connection.alias
    if team is not None:
        job.team = team
    return job


def usage_observe(
    *,
    job: Job,
    namespace: str,
    name: str,
    direction: str,
    team: Team,
    verified: bool,
    seen_at: datetime,
) -> DatasetUsage:
    """Record that ``job`` read or wrote a dataset, as ``team`` reported, at ``seen_at``.

    Upserts the usage row of (job, identity, direction, team, verified): created with both
    seen times at ``seen_at``, or widened; linked to the registered dataset with this
    identity, or whose symlink alias it is (``DatasetAlias``), if any. Does not count a
    run: ``usage_count_run`` does, once per run. Call inside the caller's transaction.

    Args:
        namespace, name: the dataset identity, already normalised with
            ``catalog.identity.normalise_dataset_identity``.
        direction: ``read`` or ``write`` (``DatasetUsage.Direction``).
        verified: the reporting team claims the job's namespace.
        seen_at: aware instant (the event's time), UTC.

    Returns:
        The usage row.
    """
    dataset_id = (
        Dataset.objects.filter(namespace=namespace, name=name).values_list("pk", flat=True).first()
    )
    if dataset_id is None:  # a symlink declared for a catalog dataset
        dataset_id = (
            DatasetAlias.objects.filter(
                alias_namespace=namespace, alias_name=name, kind=DatasetAlias.Kind.SYMLINK
            )
            .values_list("dataset_id", flat=True)
            .first()
        )
    usage, created = DatasetUsage.objects.get_or_create(
        job=job,
        dataset_namespace=namespace,
        dataset_name=name,
        direction=direction,
        team=team,
        verified=verified,
        defaults={"dataset_id": dataset_id, "first_seen_at": seen_at, "last_seen_at": seen_at},
    )
    if created:
        return usage
    changes: dict[str, Any] = {}
    if dataset_id is not None and usage.dataset_id != dataset_id:
        changes["dataset_id"] = dataset_id
    if seen_at < usage.first_seen_at:
        changes["first_seen_at"] = Least(models.F("first_seen_at"), seen_at)
    if seen_at > usage.last_seen_at:
        changes["last_seen_at"] = Greatest(models.F("last_seen_at"), seen_at)
    if changes:
        DatasetUsage.objects.filter(pk=usage.pk).update(**changes)
    return usage


def usage_count_run(*, usage: DatasetUsage) -> None:
    """Add one run to ``usage.run_count`` (in SQL, safe under concurrency). The caller
    makes sure each run is counted once per usage row (lineage keeps a per-run edge)."""
    DatasetUsage.objects.filter(pk=usage.pk).update(run_count=models.F("run_count") + 1)


def usages_observe(
    *,
    job: Job,
    edges: list[tuple[str, str, str]],
    team: Team,
    verified: bool,
    seen_at: datetime,
) -> dict[tuple[str, str, str], int]:
    """Record that ``job`` read or wrote each of several datasets, as ``team`` reported,
    at ``seen_at``: ``usage_observe`` for a whole event at once.

    On PostgreSQL one statement looks up the datasets registered with these identities
    (or declaring them as symlink aliases) and upserts every usage row (``INSERT ... ON
    CONFLICT DO UPDATE``, seen times widened with LEAST/GREATEST), locking the rows in
    the order of ``edges``; elsewhere (SQLite, the embedded mode) ``usage_observe`` runs
    for each edge. Does not count runs: ``usage_count_runs`` does. Call inside the
    caller's transaction.

    Args:
        edges: distinct ``(direction, namespace, name)``, identities already normalised
            with ``catalog.identity.normalise_dataset_identity``; sort them (by identity)
            so that concurrent callers lock rows in one order.
        verified: the reporting team claims the job's namespace.
        seen_at: aware instant (the event's time), UTC.

    Returns:
        The usage row's id for each edge, keyed by the edge.
    """
    if not edges:
        return {}
    if connection.vendor != "postgresql":
        return {
            (direction, namespace, name): usage_observe(
                job=job,
                namespace=namespace,
                name=name,
                direction=direction,
                team=team,
                verified=verified,
                seen_at=seen_at,
            ).pk
            for direction, namespace, name in edges
        }
    values = ", ".join(["(%s, %s, %s, %s)"] * len(edges))
    params: list[Any] = [job.pk, team.pk, verified, seen_at, seen_at, timezone.now()]
    for position, (direction, namespace, name) in enumerate(edges):
        params += [position, direction, namespace, name]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {DatasetUsage._meta.db_table} AS u (
                job_id, team_id, verified, first_seen_at, last_seen_at, created_at,
                run_count, dataset_id, direction, dataset_namespace, dataset_name
            )
            SELECT %s::bigint, %s::bigint, %s::boolean, %s::timestamptz, %s::timestamptz,
                %s::timestamptz, 0, COALESCE(d.id, a.dataset_id), e.direction, e.namespace,
                e.name
            FROM (VALUES {values}) AS e (position, direction, namespace, name)
            LEFT JOIN {Dataset._meta.db_table} d
                ON d.namespace = e.namespace AND d.name = e.name
            LEFT JOIN {DatasetAlias._meta.db_table} a
                ON a.alias_namespace = e.namespace AND a.alias_name = e.name
                AND a.kind = 'symlink'
            ORDER BY e.position
            ON CONFLICT ON CONSTRAINT uniq_dataset_usage DO UPDATE SET
                dataset_id = COALESCE(EXCLUDED.dataset_id, u.dataset_id),
                first_seen_at = LEAST(u.first_seen_at, EXCLUDED.first_seen_at),
                last_seen_at = GREATEST(u.last_seen_at, EXCLUDED.last_seen_at)
            RETURNING u.direction, u.dataset_namespace, u.dataset_name, u.id
            """,  # noqa: S608 - model tables and placeholders only
            params,
        )
        return {(direction, namespace, name): pk for direction, namespace, name, pk in cursor}


def usage_count_runs(*, usage_ids: list[int], runs: int = 1) -> None:
    """Add ``runs`` runs to the ``run_count`` of each of these usage rows, in one
    statement (in SQL, safe under concurrency). The caller makes sure each run is counted
    once per usage row (lineage keeps a per-run edge; collectors count new executions)."""
    if not usage_ids or runs <= 0:
        return
    if connection.vendor != "postgresql":
        DatasetUsage.objects.filter(pk__in=usage_ids).update(run_count=models.F("run_count") + runs)
        return
    # Hand-written: every processed lineage event runs it, and the ORM's compiling of the
    # F() update cost more than the statement.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {DatasetUsage._meta.db_table} SET run_count = run_count + %s "  # noqa: S608
            "WHERE id = ANY(%s::bigint[])",
            [runs, list(usage_ids)],
        )


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
    claims = _covering_prefix_claims(set(wanted))
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


def usages_hold(
    *, job: Job, pattern: str, counts: dict[tuple[str, str, str], int], seen_at: datetime
) -> int:
    """Keep what the database role behind ``job`` was seen accessing while no team claims
    it (``pattern``: the ``db_role`` claim pattern), attributed to no team, until a team
    claims the role (``held_usage_attribute``). Call inside the caller's transaction.

    Args:
        counts: accesses per ``(direction, namespace, name)`` (identities normalised),
            added to what is held.
        seen_at: aware UTC instant they were seen at.

    Returns:
        The number of held rows touched.
    """
    for (direction, namespace, name), count in sorted(counts.items()):
        held, created = UnclaimedUsage.objects.get_or_create(
            job=job,
            dataset_namespace=namespace,
            dataset_name=name,
            direction=direction,
            defaults={
                "pattern": pattern,
                "first_seen_at": seen_at,
                "last_seen_at": seen_at,
                "access_count": count,
            },
        )
        if not created:
            UnclaimedUsage.objects.filter(pk=held.pk).update(
                access_count=models.F("access_count") + count,
                first_seen_at=Least(models.F("first_seen_at"), seen_at),
                last_seen_at=Greatest(models.F("last_seen_at"), seen_at),
            )
    return len(counts)


def held_usage_attribute(*, team: Team, pattern: str) -> int:
    """Make what was held for the database role ``pattern`` (``usages_hold``) verified
    usage of ``team``, which now claims it: its jobs get ``team`` as owner, each held row
    becomes (or widens) a usage row with its seen times, and its access count is added to
    the usage's ``run_count``; the held rows are deleted. Running it twice, or from the
    claim and a collector at once, attributes each held row once (they are locked and
    deleted in the caller's transaction).

    Returns:
        The number of held rows attributed.
    """
    held = list(
        UnclaimedUsage.objects.select_for_update()
        .filter(pattern=pattern)
        .select_related("job")
        .order_by("job_id", "dataset_namespace", "dataset_name", "direction")
    )
    for row in held:
        job = job_record(
            namespace=row.job.namespace, name=row.job.name, team=team, seen_at=row.last_seen_at
        )
        edge = (row.direction, row.dataset_namespace, row.dataset_name)
        ids = usages_observe(
            job=job, edges=[edge], team=team, verified=True, seen_at=row.first_seen_at
        )
        usages_observe(job=job, edges=[edge], team=team, verified=True, seen_at=row.last_seen_at)
        usage_count_runs(usage_ids=list(ids.values()), runs=row.access_count)
    if held:
        UnclaimedUsage.objects.filter(pk__in=[row.pk for row in held]).delete()
    return len(held)
