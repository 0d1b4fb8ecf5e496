"""One event, checked: ``parse_event`` (the rules are the package docstring's)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from problems import FieldError, invalid_choice
from problems import required as missing

from ..errors import EventInvalid
from .datasets import DatasetRef, dataset_list, dataset_ref, sql_read_datasets, with_facets
from .event_time import parse_event_time
from .facets import ParentRun, check_facets, parent_run
from .fields import (
    JOB,
    MAX_JOB_NAME_LENGTH,
    MAX_JOB_NAMESPACE_LENGTH,
    RUN,
    kind_of,
    object_member,
    run_id_member,
    text_member,
)

SPEC_VERSION = "2-0-2"
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")


@dataclass(frozen=True)
class OpenLineageEvent:
    """The core of one OpenLineage event (spec 2-0-2), checked.

    ``event_time`` is aware UTC. ``event_type`` is None when the RunEvent has none (and for
    job and dataset events). ``run_id`` is set for RunEvents only; ``job_*`` for run and job
    events; ``dataset`` for DatasetEvents; ``inputs`` / ``outputs`` hold the datasets
    whose identity normalised; ``sql_reads`` the tables the ``sql`` job facet's query
    reads (RunEvents only). ``problems`` lists what was flagged and left unused.
    """

    kind: str
    event_type: str | None
    event_time: datetime
    event_time_assumed_utc: bool
    run_id: uuid.UUID | None
    job_namespace: str | None
    job_name: str | None
    parent: ParentRun | None
    inputs: tuple[DatasetRef, ...]
    outputs: tuple[DatasetRef, ...]
    dataset: DatasetRef | None
    problems: tuple[FieldError, ...]
    sql_reads: tuple[DatasetRef, ...] = ()


def parse_event(data: Any) -> OpenLineageEvent:
    """Check one decoded OpenLineage event (RunEvent, JobEvent or DatasetEvent, spec 2-0-2).

    Args:
        data: the JSON body, decoded (any JSON value).

    Returns:
        The checked core (see the module docstring for the rules).

    Raises:
        EventInvalid: a required identifier is missing, empty or malformed, or the body is
            not an object (422; ``errors`` names every offending field with its rule).
        EventTimeInvalid: ``eventTime`` is present but not a date-time (400).
    """
    if not isinstance(data, dict):
        raise EventInvalid(
            "an OpenLineage event is a JSON object",
            errors=[FieldError("body", "must be a JSON object", "object")],
        )
    kind = kind_of(data)
    errors: list[FieldError] = []
    problems: list[FieldError] = []

    raw_time = data.get("eventTime")
    if raw_time is None or raw_time == "":
        errors.append(missing("eventTime"))

    event_type = data.get("eventType")
    if kind != RUN or event_type is None:
        event_type = None
    elif event_type not in EVENT_TYPES:
        errors.append(invalid_choice("eventType", event_type, EVENT_TYPES))

    run_id = None
    if kind == RUN:
        run = object_member(data, "run", "run.runId", errors)
        if run is not None:
            run_id = run_id_member(run.get("runId"), "run.runId", errors)

    job_namespace = job_name = None
    if kind in (RUN, JOB):
        job = object_member(data, "job", "job.namespace", errors, also_missing=("job.name",))
        if job is not None:
            job_namespace = text_member(job, "namespace", "job", MAX_JOB_NAMESPACE_LENGTH, errors)
            job_name = text_member(job, "name", "job", MAX_JOB_NAME_LENGTH, errors)
            problems += check_facets(job.get("facets"), "job.facets", "job")

    inputs: list[DatasetRef] = []
    outputs: list[DatasetRef] = []
    dataset = None
    if kind in (RUN, JOB):
        inputs = dataset_list(data, "inputs", "inputFacets", "input", errors, problems)
        outputs = dataset_list(data, "outputs", "outputFacets", "output", errors, problems)
    else:
        static = object_member(
            data, "dataset", "dataset.namespace", errors, also_missing=("dataset.name",)
        )
        if static is not None:
            dataset = dataset_ref(static, "dataset", errors, problems)
            facet_problems = check_facets(static.get("facets"), "dataset.facets", "dataset")
            problems += facet_problems
            dataset = with_facets(
                dataset, static.get("facets"), "dataset", facet_problems, problems
            )

    if errors:
        raise EventInvalid(
            "; ".join(f"{e.field}: {e.detail}" for e in errors)[:1000], errors=errors
        )

    event_time, assumed_utc = parse_event_time(raw_time)
    parent = None
    sql_reads: list[DatasetRef] = []
    if kind == RUN:
        run_facets = data["run"].get("facets")
        run_problems = check_facets(run_facets, "run.facets", "run")
        problems += run_problems
        if not any(p.field.startswith("run.facets.parent") for p in run_problems):
            parent = parent_run(run_facets)
        if not any(p.field.startswith("job.facets.sql") for p in problems):
            sql_reads = sql_read_datasets(data["job"].get("facets"), [*outputs, *inputs], problems)
    return OpenLineageEvent(
        kind=kind,
        event_type=event_type,
        event_time=event_time,
        event_time_assumed_utc=assumed_utc,
        run_id=run_id,
        job_namespace=job_namespace,
        job_name=job_name,
        parent=parent,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        dataset=dataset,
        problems=tuple(problems),
        sql_reads=tuple(sql_reads),
    )


def event_fingerprint(data: Any) -> str:
    """SHA-256 (hex) of the event's canonical JSON (sorted keys, no spaces): the same
    event sent twice, whatever its key order or spacing, has the same fingerprint."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
