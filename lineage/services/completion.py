"""OpenLineage as a completion signal: a verified COMPLETE or FAIL run event publishes
the partition it wrote of each output dataset that chose OpenLineage as its completion
signal (``Dataset.CompletionSignal.OPENLINEAGE``), through the catalog's publish
(``catalog.services.publishing.readiness_publish``) and its rules."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import Q

from catalog.actors import Actor
from catalog.models import Dataset, PartitionRevision
from catalog.services import publishing
from problems import FieldError, Problem

from .. import completion, openlineage
from ..models import LineageEvent

logger = logging.getLogger(__name__)

STATES = {"COMPLETE": PartitionRevision.State.READY, "FAIL": PartitionRevision.State.FAILED}


def completion_publish(
    *, event: LineageEvent, parsed: openlineage.OpenLineageEvent, now: datetime
) -> list[FieldError]:
    """Publish what a run event says of its outputs that take OpenLineage as their
    completion signal: COMPLETE publishes the partition ready, FAIL failed.

    Who may: only a verified event (its team claimed the job namespace when it was
    received) of the team that owns the dataset. The partition is the one the event
    states (``lineage.completion.output_partition``). The revision's version is the
    run's id, so the same run's event twice publishes once, and another run of the same
    partition is a new revision (a restatement of a ready one, as a publish of a new
    version is). The publish's metadata names the run and job (``openlineage``).

    Each publish is under its own savepoint in the caller's transaction: one the
    publish's rules refuse (a partition in the future, a ready revision that a FAIL
    would make failed, a retired dataset ...) is undone alone and reported.

    Args:
        event: the stored event (its ``team`` and ``verified``).
        parsed: the event, checked (``lineage.openlineage.parse_event``).
        now: aware UTC instant the publishes are recorded at.

    Returns:
        What was not published and why, one problem per output (``outputs.N``); empty
        when every such output was published, or the event publishes nothing.
    """
    state = STATES.get(parsed.event_type or "")
    if parsed.kind != openlineage.RUN or state is None or not parsed.outputs:
        return []
    match = Q()
    for ref in parsed.outputs:
        match |= Q(namespace=ref.namespace, name=ref.name)
    chosen = {
        (d.namespace, d.name): d
        for d in Dataset.objects.filter(
            match, completion_signal=Dataset.CompletionSignal.OPENLINEAGE
        )
    }
    problems: list[FieldError] = []
    for ref in parsed.outputs:
        dataset = chosen.pop((ref.namespace, ref.name), None)  # named twice: once
        if dataset is None:
            continue
        problem = _publish_one(event, parsed, ref, dataset, state=state, now=now)
        if problem is not None:
            problems.append(FieldError(ref.field, problem[1], problem[0]))
    return problems


def _publish_one(
    event: LineageEvent,
    parsed: openlineage.OpenLineageEvent,
    ref: openlineage.DatasetRef,
    dataset: Dataset,
    *,
    state: str,
    now: datetime,
) -> tuple[str, str] | None:
    """Publish one output; ``(rule, detail)`` when it was not published."""
    if not event.verified:
        return (
            "completion_unverified",
            f"not published: {dataset} takes OpenLineage as its completion signal, and only "
            "verified events (of a job namespace the owner team claims) publish it",
        )
    if dataset.owner_id != event.team_id:
        return (
            "completion_not_owner",
            f"not published: {dataset} is another team's; only its owner's events publish it",
        )
    index = int(ref.field.rsplit(".", 1)[1])
    try:
        key, source = completion.output_partition(
            event.payload["outputs"][index],
            event.payload["run"].get("facets"),
            partitioning=dataset.partitioning,
            time_zone=dataset.partition_timezone,
        )
    except completion.PartitionNotStated as exc:
        return exc.rule, f"not published: {exc}"
    try:
        with transaction.atomic():  # a savepoint: a refused publish is undone alone
            result = publishing.readiness_publish(
                actor=Actor(team=event.team, api_key=event.api_key, source="lineage"),
                namespace=dataset.namespace,
                name=dataset.name,
                partition=key,
                version=str(parsed.run_id),
                state=state,
                metadata={
                    "openlineage": {
                        "run_id": str(parsed.run_id),
                        "job": {"namespace": parsed.job_namespace, "name": parsed.job_name},
                        "event_type": parsed.event_type,
                        "event_time": parsed.event_time.isoformat(),
                        "partition_from": source,
                    }
                },
                now=now,
            )
    except Problem as exc:
        return "completion_refused", f"not published: {exc}"[:500]
    logger.info(
        "lineage event %s published %s partition %r %s (%s)",
        event.pk,
        dataset,
        key,
        state,
        result.status_code,
    )
    return None
