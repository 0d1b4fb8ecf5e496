"""Writes for datasets: registering and updating them (with their field rules, the audit
trail and the watchdog's monitor), applying a declarations document, and attaching a
polled dataset to its storage group."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

import objectstore
from problems import REQUIRED_DETAIL, FieldError, Problem, ValidationProblem, invalid_choice
from schedules import CalendarError, calendars, cron_checks
from schedules.periods import validate_timezone

from .. import (
    at_risk,
    change_notices,
    declarations,
    errors,
    freshness,
    freshness_state,
    selectors,
    unusually_late,
    watchdog_feed,
)
from ..actors import Actor
from ..identity import IdentityError, dataset_location, normalise_dataset_identity
from ..models import AuditEntry, Dataset, DatasetUsage, StorageGroup
from . import ownership, subscriptions


def _storage_sources() -> dict:
    return getattr(settings, "TIDEMARK_STORAGE_SOURCES", {})


def _validate_dataset_fields(values: dict[str, Any]) -> None:
    """Field rules that need more than a type: integer bounds (``Dataset.INTEGER_BOUNDS``,
    the API's limits), booleans, zones, cron (``schedules.check_cron``: a precise error,
    or refused when it never fires; its warnings are ``sla_schedule.sla_warnings``),
    storage source. A single error that names its field is also the problem's detail."""
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
    for bool_field in ("accepts_future_partitions",):
        if bool_field in values and not isinstance(values[bool_field], bool):
            problems.append(FieldError(bool_field, "Must be true or false.", "boolean"))
    for tz_field in ("partition_timezone", "sla_timezone"):
        if tz_field in values:
            try:
                validate_timezone(values[tz_field])
            except ValueError as exc:
                problems.append(FieldError(tz_field, str(exc), "iana_time_zone"))
    if values.get("sla_cron"):
        cron_problem = cron_checks.field_problem("sla_cron", values["sla_cron"])
        if cron_problem is not None:
            problems.append(cron_problem)
    source = values.get("storage_source")
    if source and source not in _storage_sources():
        if _storage_sources():
            problems.append(invalid_choice("storage_source", source, sorted(_storage_sources())))
        else:
            problems.append(
                FieldError(
                    "storage_source",
                    f"unknown storage source {source!r}: no storage source is configured "
                    "(TIDEMARK_STORAGE_SOURCES)",
                    "configured_source",
                )
            )
    if problems:
        raise ValidationProblem.of("Some dataset fields are not valid.", problems)


def _check_calendar(dataset: Dataset, *, now: datetime) -> None:
    """The SLA calendar's rules on the dataset's values as they will be stored: a holidays
    country and subdivision the ``holidays`` package knows (whether or not the calendar is
    on, so a stored code is always valid), and with a business-day calendar a cron that
    fires on business days (``schedules.calendars``).

    Raises:
        ValidationProblem: naming ``sla_holidays_country``, ``sla_holidays_subdivision``
            or ``sla_cron``, the value, and where the valid codes are listed (400).
    """
    try:
        calendars.validate(
            dataset.sla_holidays_country or None, dataset.sla_holidays_subdivision or None
        )
        sla = freshness_state.sla_of(dataset)
        if sla is not None and sla.calendar is not None:
            sla.next_deadline(now)
    except CalendarError as exc:
        field = f"sla_{exc.field}"
        detail = f"{field} {exc.value!r}: {exc}"
        raise ValidationProblem(detail, errors=[FieldError(field, detail, "sla_calendar")]) from exc


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
    ownership.lock_namespace(identity.namespace)
    ownership.check_prefix_owner(
        team=actor.team, location=dataset_location(identity.namespace, identity.name)
    )
    dataset = Dataset(namespace=identity.namespace, name=identity.name, owner=actor.team, **fields)
    _check_calendar(dataset, now=timezone.now())
    _attach_poll_group(dataset, now=timezone.now())
    freshness.schedule(dataset, now=timezone.now())
    unusually_late.schedule(dataset, now=timezone.now())
    at_risk.schedule(dataset, now=timezone.now())
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
    *,
    actor: Actor,
    dataset: Dataset,
    override_reason: str = "",
    lifecycle_advice: str = change_notices.ADVICE_API,
    **changes: Any,
) -> Dataset:
    """Change a dataset's fields; only its owner team may.

    Changes to ``Dataset.AUDITED_FIELDS`` are written to the audit trail as
    ``{field: [old, new]}`` in the same transaction. ``lifecycle`` and ``sunset_at``
    follow the lifecycle rules (``change_notices.lifecycle_check``): deprecated needs a
    sunset at least the notice period away; becoming deprecated or retired needs a
    deprecation or retirement change notice in effect, unless ``override_reason`` gives
    a written reason, which is audited as ``dataset.lifecycle_override``.
    ``lifecycle_advice`` is what a refusal tells the person to do instead, for the
    caller's entry point (``change_notices.lifecycle_check``'s ``advice``).

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
        dataset=dataset,
        changes=changes,
        override_reason=override_reason,
        now=timezone.now(),
        advice=lifecycle_advice,
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
    owed_from = dataset.next_deadline_at
    for field_name, new in changes.items():
        old = getattr(dataset, field_name)
        if old != new and field_name in Dataset.AUDITED_FIELDS:
            audited[field_name] = [_jsonable(old), _jsonable(new)]
        setattr(dataset, field_name, new)
    if SLA_FIELDS & set(audited):
        _check_calendar(dataset, now=timezone.now())
    if SLA_FIELDS & set(audited):
        freshness.schedule(dataset, now=timezone.now(), owed_from=owed_from)
        unusually_late.schedule(dataset, now=timezone.now())
        at_risk.schedule(dataset, now=timezone.now())
    if POLL_FIELDS & set(audited):
        _attach_poll_group(dataset, now=timezone.now())
    dataset.full_clean(validate_unique=False, validate_constraints=False)
    dataset.save()
    if WATCHDOG_FIELDS & set(audited):
        watchdog_feed.sync_monitor(dataset, now=timezone.now())
    if SLA_FIELDS & set(audited):
        # Consumers' need-by against the new promise (the governance report reads it).
        subscriptions.subscription_need_by_gaps_refresh(dataset=dataset, now=timezone.now())
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
                    dataset_update(
                        actor=actor,
                        dataset=dataset,
                        lifecycle_advice=declarations.NEW_DATASET_LIFECYCLE_ADVICE,
                        **later,
                    )
            else:
                dataset = Dataset.objects.get(
                    namespace=declaration.namespace, name=declaration.name
                )
                dataset_update(
                    actor=actor,
                    dataset=dataset,
                    lifecycle_advice=declarations.LIFECYCLE_ADVICE,
                    **changes,
                )
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


CALENDAR_FIELDS = {
    "sla_calendar",
    "sla_holidays_country",
    "sla_holidays_subdivision",
    "sla_non_business_day",
}
SLA_FIELDS = {
    "sla_cron",
    "sla_timezone",
    "sla_grace_seconds",
    "partitioning",
    "partition_timezone",
    *CALENDAR_FIELDS,
}
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
                    f"{REQUIRED_DETAIL.rstrip('.')} when completion_signal is "
                    f"{dataset.completion_signal}.",
                    "required",
                )
            )
    if problems:
        raise ValidationProblem.of("The dataset's storage location is not valid.", problems)
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
