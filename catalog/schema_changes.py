"""Schema observations and unannounced breaking changes.

Lineage (the ``schema`` dataset facet) and readiness events (``metadata.schema``) show
what columns a dataset has; ``schema_sightings_record`` keeps them as a timeline of
``SchemaObservation`` rows, one per change (``catalog.schemas`` fingerprints and compares
them), and diffs each new observation against the one before it (and, for an event that
arrives late, the one after it). A change that removed or retyped a column is a
``SchemaChange``.

**Covered or unannounced.** A breaking change observed at ``t`` is covered by a change
notice of the dataset when the notice is of kind ``breaking_schema_change``, was
announced at or before ``t``, is in effect at ``t`` (its ``effective_at`` is at or before
``t``, or it took effect early, through apply-early, at or before ``t``), and ``t`` is
less than ``TIDEMARK_SCHEMA_CHANGES["notice_covers_days"]`` days (7 by default) after its
``effective_at``: a notice announces one change around its date, not every change after
it. A change seen before the announced date broke the promise the notice made, so it is
not covered. Other kinds do not cover: a location move or a retirement announces that the
dataset moves or goes, not that its columns change under the same name. An unannounced
change is told once to the owner team's contacts (``schema.unannounced_change``, through
the durable owner-notice outbox) and listed by ``selectors.unannounced_schema_changes``.

**Whose sightings count.** A lineage event's schema is recorded only when the event's
team owns the dataset; a readiness publish's always (only the owner or a delegated key
publishes). A verified event proves only that its team owns the job namespace, not that
it may speak for the datasets the job reads: another team's input facet (back-dated with
its ``eventTime``) could otherwise put a false breaking change in the owner's history.

**Cost.** Nothing runs for an event without a schema. With one, a single statement looks
up every named dataset with the observation before the event's time (for names that are
no catalog dataset's, one more looks for symlink aliases, and one more finds their
datasets); an unchanged schema costs one more only when it moves ``last_seen_at`` (by
steps of at least ``LAST_SEEN_STEP``, an hour). Only a change takes a per-dataset
advisory lock (PostgreSQL), so two workers never both record one change.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Greatest

from . import notices, schemas
from .models import (
    ChangeNotice,
    Dataset,
    DatasetAlias,
    Notification,
    SchemaChange,
    SchemaObservation,
    Team,
)
from .notices import iso


@dataclass(frozen=True)
class SchemaSighting:
    """One dataset's schema as one event showed it: the normalised identity and the
    fields (``schemas.read_fields`` output)."""

    namespace: str
    name: str
    fields: schemas.Fields


# ``last_seen_at`` moves only by steps of at least this: a job sending the same schema on
# every event would otherwise rewrite the row for each of them.
LAST_SEEN_STEP = timedelta(hours=1)


def _covers_days() -> int:
    config = getattr(settings, "TIDEMARK_SCHEMA_CHANGES", {}) or {}
    return int(config.get("notice_covers_days", 7))


def schema_sightings_record(
    *,
    sightings: list[SchemaSighting],
    observed_at: datetime,
    source: str,
    team: Team | None,
    authorised: bool,
    now: datetime,
    job_namespace: str = "",
    job_name: str = "",
    run_id: uuid.UUID | None = None,
    lineage_event_id: int | None = None,
    readiness_event_id: int | None = None,
) -> list[SchemaChange]:
    """Record what schemas one event showed, and the breaking changes they reveal.

    Call inside the caller's transaction (lineage processing, a readiness publish).
    An identity that is a symlink alias of a catalog dataset counts for that dataset;
    identities no registered dataset has are ignored, as are datasets the sighting may
    not speak for (not ``authorised`` and ``team`` is not the owner; see the module
    docstring). Per dataset: a schema the same as the observation just before
    ``observed_at`` widens that observation's ``last_seen_at`` (by steps of at least
    ``LAST_SEEN_STEP``); a different one becomes a
    new observation (or moves the next one earlier when that one has the same schema),
    is diffed against its neighbours, and each breaking difference is a ``SchemaChange``
    (once per pair); an unannounced one is told to the owner team once.

    Args:
        sightings: at most one per identity counts (the last).
        observed_at: aware UTC event time (lineage ``eventTime``; a publish's time).
        source: ``SchemaObservation.Source``.
        team: the team whose event it is.
        authorised: the caller was checked to speak for every dataset named (a readiness
            publish); otherwise only the datasets ``team`` owns count (lineage).
        now: aware UTC instant notifications are stamped with.
        job_namespace, job_name, run_id, lineage_event_id, readiness_event_id: what showed
            it, kept on a new observation.

    Returns:
        The ``SchemaChange`` rows created (covered or not), by dataset id.
    """
    wanted = {(s.namespace, s.name): s for s in sightings}
    if not wanted:
        return []
    datasets = _datasets_with_previous(wanted, observed_at)
    missing = set(wanted) - {(d.namespace, d.name) for d in datasets}
    if missing:  # perhaps symlink aliases of catalog datasets: look once more
        resolved = _resolve_symlinks({pair: wanted[pair] for pair in missing})
        if resolved:
            wanted.update(resolved)
            datasets += _datasets_with_previous(resolved, observed_at)
    widen: list[int] = []
    changed: list[tuple[_Target, str, schemas.Fields]] = []
    for dataset in datasets:
        if not authorised and (team is None or dataset.owner_id != team.pk):
            continue
        fields = wanted[(dataset.namespace, dataset.name)].fields
        digest = schemas.fingerprint(fields)
        if dataset.previous_fingerprint == digest:
            if dataset.previous_last_seen_at + LAST_SEEN_STEP <= observed_at:
                widen.append(dataset.previous_id)
        else:
            changed.append((dataset, digest, fields))
    if widen:
        SchemaObservation.objects.filter(pk__in=widen).update(
            last_seen_at=Greatest(F("last_seen_at"), observed_at)
        )
    origin = {
        "source": source,
        "team": team,
        "job_namespace": job_namespace[:255],
        "job_name": job_name[:1024],
        "run_id": run_id,
        "lineage_event_id": lineage_event_id,
        "readiness_event_id": readiness_event_id,
    }
    found: list[SchemaChange] = []
    for dataset, digest, fields in changed:
        found += _record_change(
            dataset, digest, fields, observed_at=observed_at, origin=origin, now=now
        )
    return found


@dataclass(frozen=True)
class _Target:
    """A catalog dataset a sighting names, with the observation just before the
    sighting's time (``previous_*`` None without one)."""

    pk: int
    namespace: str
    name: str
    owner_id: int
    previous_id: int | None
    previous_fingerprint: str | None
    previous_last_seen_at: datetime | None


def _datasets_with_previous(
    wanted: dict[tuple[str, str], SchemaSighting], observed_at: datetime
) -> list[_Target]:
    """The catalog datasets with these identities, each with the observation just before
    ``observed_at``, in one query (on PostgreSQL a lateral join: this runs for every
    lineage event that carries a schema)."""
    if connection.vendor == "postgresql":
        pairs = sorted(wanted)
        values = ", ".join(["(%s, %s)"] * len(pairs))
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                SELECT d.id, d.namespace, d.name, d.owner_id,
                    o.id, o.fingerprint, o.last_seen_at
                FROM {Dataset._meta.db_table} d
                LEFT JOIN LATERAL (
                    SELECT id, fingerprint, last_seen_at
                    FROM {SchemaObservation._meta.db_table}
                    WHERE dataset_id = d.id AND observed_at <= %s
                    ORDER BY observed_at DESC, id DESC
                    LIMIT 1
                ) o ON true
                WHERE (d.namespace, d.name) IN ({values})
                ORDER BY d.id
                """,  # noqa: S608 - model tables and placeholders only
                [observed_at, *(part for pair in pairs for part in pair)],
            )
            return [_Target(*row) for row in cursor.fetchall()]
    match = Q()
    for namespace, name in wanted:
        match |= Q(namespace=namespace, name=name)
    before = SchemaObservation.objects.filter(
        dataset=OuterRef("pk"), observed_at__lte=observed_at
    ).order_by("-observed_at", "-id")
    rows = (
        Dataset.objects.filter(match)
        .annotate(
            previous_id=Subquery(before.values("id")[:1]),
            previous_fingerprint=Subquery(before.values("fingerprint")[:1]),
            previous_last_seen_at=Subquery(before.values("last_seen_at")[:1]),
        )
        .order_by("pk")
        .values_list(
            "pk",
            "namespace",
            "name",
            "owner_id",
            "previous_id",
            "previous_fingerprint",
            "previous_last_seen_at",
        )
    )
    return [_Target(*row) for row in rows]


def _resolve_symlinks(
    wanted: dict[tuple[str, str], SchemaSighting],
) -> dict[tuple[str, str], SchemaSighting]:
    """The sightings of ``wanted`` whose identity is a symlink alias of a catalog dataset,
    keyed by the dataset's identity instead (one query)."""
    match = Q()
    for namespace, name in wanted:
        match |= Q(alias_namespace=namespace, alias_name=name)
    aliases = DatasetAlias.objects.filter(match, kind=DatasetAlias.Kind.SYMLINK).values_list(
        "alias_namespace", "alias_name", "namespace", "name"
    )
    return {
        (namespace, name): wanted[(alias_namespace, alias_name)]
        for alias_namespace, alias_name, namespace, name in aliases
    }


def _lock_dataset_schema(dataset_id: int) -> None:
    """Serialise, until commit, the recording of one dataset's schema changes."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"tidemark.dataset-schema:{dataset_id}"],
            )


def _record_change(
    dataset: _Target,
    digest: str,
    fields: schemas.Fields,
    *,
    observed_at: datetime,
    origin: dict[str, Any],
    now: datetime,
) -> list[SchemaChange]:
    """A schema differing from the one seen before ``observed_at``, under the dataset's
    lock: read its neighbours again, then insert (or move) and diff."""
    _lock_dataset_schema(dataset.pk)
    timeline = SchemaObservation.objects.filter(dataset_id=dataset.pk)
    previous = timeline.filter(observed_at__lte=observed_at).order_by("-observed_at", "-id").first()
    if previous is not None and previous.fingerprint == digest:  # recorded meanwhile
        SchemaObservation.objects.filter(pk=previous.pk).update(
            last_seen_at=Greatest(F("last_seen_at"), observed_at)
        )
        return []
    following = timeline.filter(observed_at__gt=observed_at).order_by("observed_at", "id").first()
    if following is not None and following.fingerprint == digest:
        # A late event: the next change point was this schema all along, seen earlier.
        SchemaObservation.objects.filter(pk=following.pk).update(observed_at=observed_at)
        return []
    observation = SchemaObservation.objects.create(
        dataset_id=dataset.pk,
        fingerprint=digest,
        fields=fields,
        observed_at=observed_at,
        last_seen_at=min(observed_at, following.observed_at) if following else observed_at,
        **origin,
    )
    pairs = [(previous, observation)] if previous is not None else []
    if following is not None:
        pairs.append((observation, following))
    found = []
    for old, new in pairs:
        change = _detect(dataset, old, new, now=now)
        if change is not None:
            found.append(change)
    return found


def covering_notice(*, dataset_id: int, observed_at: datetime) -> ChangeNotice | None:
    """The change notice that covers a breaking schema change of the dataset observed at
    ``observed_at`` (the module docstring gives the rule), or None: unannounced.

    Args:
        observed_at: aware UTC instant the new schema was first seen.

    Returns:
        The most recently announced covering notice, or None.
    """
    window = timedelta(days=_covers_days())
    return (
        ChangeNotice.objects.filter(
            dataset_id=dataset_id,
            kind=ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE,
            announced_at__lte=observed_at,
            effective_at__gt=observed_at - window,
        )
        .filter(Q(effective_at__lte=observed_at) | Q(took_effect_at__lte=observed_at))
        .order_by("-announced_at", "-id")
        .first()
    )


def _detect(
    dataset: _Target, old: SchemaObservation, new: SchemaObservation, *, now: datetime
) -> SchemaChange | None:
    """The breaking change from ``old`` to ``new`` (consecutive observations), recorded
    once; an unannounced one is told to the owner team once."""
    difference = schemas.diff(old.fields, new.fields)
    if not difference.breaking:
        return None
    notice = covering_notice(dataset_id=dataset.pk, observed_at=new.observed_at)
    change, created = SchemaChange.objects.get_or_create(
        observation=new,
        previous=old,
        defaults={
            "dataset_id": dataset.pk,
            "observed_at": new.observed_at,
            "removed": difference.removed,
            "retyped": difference.retyped,
            "added": difference.added,
            "covered_by": notice,
        },
    )
    if created and notice is None:
        _tell_owner(change, now=now)
    return change if created else None


def change_data(change: SchemaChange) -> dict[str, Any]:
    """The ``data`` of the owner notice telling ``change`` (and of its report row)."""
    dataset = change.dataset
    observation = change.observation
    return {
        "change_id": change.pk,
        "dataset": {"id": dataset.pk, "namespace": dataset.namespace, "name": dataset.name},
        "owner": dataset.owner.slug,
        "observed_at": iso(change.observed_at),
        "removed": change.removed,
        "retyped": change.retyped,
        "added": change.added,
        "source": observation.source,
        "job": (
            {"namespace": observation.job_namespace, "name": observation.job_name}
            if observation.job_namespace
            else None
        ),
        "run_id": str(observation.run_id) if observation.run_id else None,
        "readiness_event_id": observation.readiness_event_id,
        "report_path": "/api/v1/reports/unannounced-changes",
    }


def _tell_owner(change: SchemaChange, *, now: datetime) -> None:
    change = SchemaChange.objects.select_related("dataset", "dataset__owner", "observation").get(
        pk=change.pk
    )
    notices.notify_owner(
        team=change.dataset.owner,
        type=Notification.Type.SCHEMA_UNANNOUNCED_CHANGE,
        data=change_data(change),
        dedup_key=f"schema-change:{change.pk}",
        now=now,
    )


def readiness_schema(metadata: dict | None) -> schemas.Fields | None:
    """The schema a readiness publish carries: ``metadata.schema.fields`` when
    ``metadata.schema`` is an object (the SchemaDatasetFacet shape); any other
    ``metadata.schema`` (a string naming a database schema, say) is plain metadata.

    Raises:
        schemas.SchemaInvalid: an object whose ``fields`` are not a schema (errors name
            ``metadata.schema.fields...``).
    """
    schema = (metadata or {}).get("schema")
    if not isinstance(schema, dict):
        return None
    return schemas.read_fields(schema.get("fields"), "metadata.schema.fields")
