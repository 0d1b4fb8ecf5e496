"""OpenLineage events (spec 2-0-2, ``spec/OpenLineage.json``): the core validated, facets opaque.

Pure: no ORM. The openlineage-python models validate nothing they are given, so this
module checks the core of an event itself, as Marquez does, and keeps every facet as the
JSON it arrived as:

- **Kind** (the spec's ``oneOf``): as Marquez does, a ``schemaURL`` whose fragment is
  ``#/$defs/JobEvent`` or ``#/$defs/DatasetEvent`` names the kind; otherwise a body
  with ``run`` or ``eventType`` is a RunEvent; else one with ``dataset`` and no ``job`` a
  DatasetEvent; else one with ``job`` a JobEvent. Anything else is judged as a RunEvent,
  the common case. A JobEvent or DatasetEvent's ``eventType``, if sent, is not kept.
- **Required identifiers** (``EventInvalid``, 422, naming each field): ``eventTime``,
  ``run.runId`` (a UUID), ``job.namespace`` and ``job.name`` (at most 255 and 1024
  characters), and ``namespace`` / ``name`` of every dataset (``inputs.N``, ``outputs.N``,
  ``dataset``); ``eventType``, when given, one of the spec's six.
- **eventTime** (``EventTimeInvalid``, 400, when present but not a date-time): RFC 3339;
  one without an offset is read as UTC and the event says so
  (``event_time_assumed_utc``); fractions beyond microseconds are truncated.
- **Facets** (run, job, dataset, input and output facets): unknown and custom facets are
  kept as they are; a dataset's well-formed ``schema`` facet is read into its ``schema``
  (``catalog.schemas``: a column without ``name``, a non-string ``type`` ... is flagged),
  its well-formed ``symlinks`` facet into its ``symlinks``. A standard facet missing what
  its schema requires (an ``ownership`` owner without ``name``, a ``parent`` without
  ``run.runId`` ...) or any facet that is not an object does not sink the event: it is
  listed in ``problems`` and left unused.
- **Dataset identities** are normalised with ``catalog.identity`` (the function used at
  registration); one that breaks a naming rule (whitespace, a malformed namespace) is
  listed in ``problems`` and not recorded as usage.
- **SQL**: a RunEvent's well-formed ``sql`` job facet is parsed (``lineage.sql``) when
  one of its datasets is on a SQL engine (which tells where the query ran); the tables
  its query reads are ``sql_reads``. A query that does not parse is listed in
  ``problems`` (its statements that parse still count).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from catalog import schemas
from catalog.identity import IdentityError, normalise_dataset_identity
from problems import FieldError, invalid_choice
from problems import required as missing

from . import sql
from .errors import EventInvalid, EventTimeInvalid

SPEC_VERSION = "2-0-2"
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
RUN, JOB, DATASET = "run", "job", "dataset"
MAX_JOB_NAMESPACE_LENGTH = 255
MAX_JOB_NAME_LENGTH = 1024
MAX_RUN_ID_LENGTH = 64
MAX_SYMLINKS = 64  # identifiers of one dataset's symlinks facet (a dataset has a few)


@dataclass(frozen=True)
class DatasetRef:
    """A dataset named by an event: normalised identity plus the spelling received.

    ``field`` says where it was (``inputs.0``, ``outputs.1``, ``dataset``).
    """

    field: str
    namespace: str
    name: str
    received_namespace: str
    received_name: str
    # The well-formed ``schema`` facet's columns (``catalog.schemas.read_fields``); None
    # when the dataset carried none, or a malformed one (flagged in ``problems``).
    schema: schemas.Fields | None = dataclasses.field(default=None, compare=False, hash=False)
    # The well-formed ``symlinks`` facet's identifiers, normalised: ``(namespace, name,
    # type)``; one whose identity breaks a naming rule is flagged and left out.
    symlinks: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class ParentRun:
    """The run that started this one, from a well-formed ``parent`` run facet."""

    run_id: uuid.UUID
    job_namespace: str
    job_name: str


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
    kind = _kind_of(data)
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
        run = _object(data, "run", "run.runId", errors)
        if run is not None:
            run_id = _run_id(run.get("runId"), "run.runId", errors)

    job_namespace = job_name = None
    if kind in (RUN, JOB):
        job = _object(data, "job", "job.namespace", errors, also_missing=("job.name",))
        if job is not None:
            job_namespace = _text(job, "namespace", "job", MAX_JOB_NAMESPACE_LENGTH, errors)
            job_name = _text(job, "name", "job", MAX_JOB_NAME_LENGTH, errors)
            problems += _facets(job.get("facets"), "job.facets", "job")

    inputs: list[DatasetRef] = []
    outputs: list[DatasetRef] = []
    dataset = None
    if kind in (RUN, JOB):
        inputs = _datasets(data, "inputs", "inputFacets", "input", errors, problems)
        outputs = _datasets(data, "outputs", "outputFacets", "output", errors, problems)
    else:
        static = _object(
            data, "dataset", "dataset.namespace", errors, also_missing=("dataset.name",)
        )
        if static is not None:
            dataset = _dataset(static, "dataset", errors, problems)
            facet_problems = _facets(static.get("facets"), "dataset.facets", "dataset")
            problems += facet_problems
            dataset = _with_facets(
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
        run_problems = _facets(run_facets, "run.facets", "run")
        problems += run_problems
        if not any(p.field.startswith("run.facets.parent") for p in run_problems):
            parent = _parent(run_facets)
        if not any(p.field.startswith("job.facets.sql") for p in problems):
            sql_reads = _sql_reads(data["job"].get("facets"), [*outputs, *inputs], problems)
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


# --- eventTime --------------------------------------------------------------------------

_DATE_TIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}(?::\d{2})?)"
    r"(?:[.,](?P<fraction>\d{1,12}))?"
    r"(?P<offset>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)


def parse_event_time(value: Any) -> tuple[datetime, bool]:
    """Read an RFC 3339 date-time (``2026-11-28T06:12:03.418Z``, ``...+10:00``).

    Args:
        value: the ``eventTime`` member as decoded.

    Returns:
        ``(instant in aware UTC, assumed_utc)``; ``assumed_utc`` is True when the text had
        no offset and was read as UTC. Digits beyond microseconds are dropped.

    Raises:
        EventTimeInvalid: not a string of that form, or not a real instant (400).
    """
    match = _DATE_TIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise _bad_time(value)
    text = f"{match['date']}T{match['time']}"
    if match["fraction"]:
        text += "." + match["fraction"][:6].ljust(6, "0")
    offset = match["offset"]
    if offset in ("Z", "z"):
        text += "+00:00"
    elif offset:
        digits = offset[1:].replace(":", "")
        text += f"{offset[0]}{digits[:2]}:{digits[2:] or '00'}"
    try:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC), True
        return parsed.astimezone(UTC), False
    except (ValueError, OverflowError) as exc:
        raise _bad_time(value) from exc


def _bad_time(value: Any) -> EventTimeInvalid:
    shown = value[:40] if isinstance(value, str) else type(value).__name__
    return EventTimeInvalid(
        f"eventTime must be an RFC 3339 date-time such as 2026-11-28T06:12:03Z, got {shown!r}",
        errors=[FieldError("eventTime", "not an RFC 3339 date-time", "date_time")],
    )


# --- core fields ------------------------------------------------------------------------


# The ``schemaURL`` fragment (``.../OpenLineage.json#/$defs/JobEvent``) names a job or
# dataset event, and Marquez reads it first (its EventTypeResolver), so a JobEvent that
# also sends an ``eventType`` is a JobEvent. Any other fragment, RunEvent included, leaves
# the kind to the body's shape: Marquez would take it as a RunEvent, but bodies shaped as
# job or dataset events under a RunEvent schemaURL were accepted as such before.
_KIND_FRAGMENTS = {"JobEvent": JOB, "DatasetEvent": DATASET}


def _kind_of(data: dict) -> str:
    schema_url = data.get("schemaURL")
    if isinstance(schema_url, str) and "#" in schema_url:
        fragment = schema_url.rsplit("#", 1)[1].rstrip("/").rsplit("/", 1)[-1]
        if fragment in _KIND_FRAGMENTS:
            return _KIND_FRAGMENTS[fragment]
    if "run" in data or "eventType" in data:
        return RUN
    if "dataset" in data and "job" not in data:
        return DATASET
    if "job" in data:
        return JOB
    return RUN


def _object(
    data: dict,
    key: str,
    missing_field: str,
    errors: list[FieldError],
    also_missing: tuple[str, ...] = (),
) -> dict | None:
    """``data[key]`` when it is an object; a missing one is reported as its required
    members (``missing_field`` and ``also_missing``) being missing."""
    value = data.get(key)
    if value is None:
        for field in (missing_field, *also_missing):
            errors.append(missing(field))
        return None
    if not isinstance(value, dict):
        errors.append(FieldError(key, f"{key} must be an object", "object"))
        return None
    return value


def _text(data: dict, key: str, path: str, max_length: int, errors: list[FieldError]) -> str | None:
    field = f"{path}.{key}"
    value = data.get(key)
    if value is None or value == "":
        errors.append(missing(field))
    elif not isinstance(value, str):
        errors.append(FieldError(field, f"{field} must be a string", "string"))
    elif len(value) > max_length:
        errors.append(
            FieldError(field, f"{field} is longer than {max_length} characters", "max_length")
        )
    else:
        return value
    return None


def _run_id(value: Any, field: str, errors: list[FieldError]) -> uuid.UUID | None:
    if value is None or value == "":
        errors.append(missing(field))
        return None
    parsed = _uuid(value)
    if parsed is None:
        errors.append(FieldError(field, f"{field} must be a UUID", "uuid"))
    return parsed


def _uuid(value: Any) -> uuid.UUID | None:
    if not isinstance(value, str) or len(value) > MAX_RUN_ID_LENGTH:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _datasets(
    data: dict,
    key: str,
    facets_key: str,
    location: str,
    errors: list[FieldError],
    problems: list[FieldError],
) -> list[DatasetRef]:
    items = data.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        errors.append(FieldError(key, f"{key} must be an array", "array"))
        return []
    refs = []
    for index, item in enumerate(items):
        path = f"{key}.{index}"
        if not isinstance(item, dict):
            errors.append(FieldError(path, f"{path} must be an object", "object"))
            continue
        ref = _dataset(item, path, errors, problems)
        facet_problems = _facets(item.get("facets"), f"{path}.facets", "dataset")
        problems += facet_problems
        problems += _facets(item.get(facets_key), f"{path}.{facets_key}", location)
        if ref is not None:
            refs.append(_with_facets(ref, item.get("facets"), path, facet_problems, problems))
    return refs


def _with_facets(
    ref: DatasetRef | None,
    facets: Any,
    path: str,
    facet_problems: list[FieldError],
    problems: list[FieldError],
) -> DatasetRef | None:
    """``ref`` with what its well-formed dataset facets declare: its ``schema`` and its
    ``symlinks``. A flagged facet is left unused."""
    if not isinstance(facets, dict):
        return ref
    changes: dict[str, Any] = {}
    schema = facets.get("schema")
    # Checked (once) here rather than in _STANDARD_FACETS, as it is read here anyway; a
    # schema facet without columns says nothing.
    if isinstance(schema, dict) and schema.get("fields") is not None:
        try:
            changes["schema"] = schemas.read_fields(schema["fields"])
        except schemas.SchemaInvalid as exc:
            problems.extend(
                FieldError(f"{path}.facets.schema.{e.field}", e.detail, e.rule) for e in exc.errors
            )
    if ref is None:
        return None
    if "symlinks" in facets and not _flagged(facet_problems, f"{path}.facets.symlinks"):
        changes["symlinks"] = _symlinks(facets["symlinks"], f"{path}.facets.symlinks", problems)
    return dataclasses.replace(ref, **changes) if changes else ref


def _flagged(problems: list[FieldError], prefix: str) -> bool:
    return any(p.field == prefix or p.field.startswith(f"{prefix}.") for p in problems)


def _symlinks(
    facet: dict, path: str, problems: list[FieldError]
) -> tuple[tuple[str, str, str], ...]:
    """The identifiers of a well-formed ``symlinks`` facet, normalised; one that breaks a
    naming rule is added to ``problems`` (not to the event's errors: it is only a facet)."""
    identifiers = facet.get("identifiers") or []
    if len(identifiers) > MAX_SYMLINKS:
        problems.append(
            FieldError(
                f"{path}.identifiers",
                f"more than {MAX_SYMLINKS} identifiers; no symlink of this facet is recorded",
                "max_items",
            )
        )
        return ()
    found: list[tuple[str, str, str]] = []
    for index, item in enumerate(identifiers):
        try:
            identity = normalise_dataset_identity(item["namespace"], item["name"])
        except IdentityError as exc:
            problems.append(
                FieldError(
                    f"{path}.identifiers.{index}.{exc.field}",
                    f"{exc}; this symlink is not recorded",
                    exc.rule,
                )
            )
            continue
        entry = (identity.namespace, identity.name, item["type"][:64])
        if entry not in found:
            found.append(entry)
    return tuple(found)


def _dataset(
    item: dict, path: str, errors: list[FieldError], problems: list[FieldError]
) -> DatasetRef | None:
    namespace = _text(item, "namespace", path, 10_000, errors)
    name = _text(item, "name", path, 100_000, errors)
    if namespace is None or name is None:
        return None
    try:
        identity = normalise_dataset_identity(namespace, name)
    except IdentityError as exc:
        problems.append(
            FieldError(
                f"{path}.{exc.field}",
                f"{exc}; this dataset is not recorded as usage",
                exc.rule,
            )
        )
        return None
    return DatasetRef(
        field=path,
        namespace=identity.namespace,
        name=identity.name,
        received_namespace=namespace,
        received_name=name,
    )


# --- facets -----------------------------------------------------------------------------


def _facets(facets: Any, path: str, location: str) -> list[FieldError]:
    """Problems of a facets object: not an object, a facet that is not one, or a standard
    facet missing what its schema requires. Unknown facets are not looked into."""
    if facets is None:
        return []
    if not isinstance(facets, dict):
        return [FieldError(path, "facets must be an object; ignored", "object")]
    problems = []
    for name, facet in facets.items():
        facet_path = f"{path}.{name}"
        if not isinstance(facet, dict):
            problems.append(FieldError(facet_path, "a facet must be an object", "object"))
            continue
        check = _STANDARD_FACETS.get((location, name))
        if check is not None:
            problems += [
                FieldError(f"{facet_path}.{field}", detail, rule)
                for field, rule, detail in check(facet)
            ]
    return problems


_Finding = tuple[str, str, str]  # (field inside the facet, rule, detail)


def _needs_text(*keys: str) -> Callable[[dict], list[_Finding]]:
    def check(facet: dict) -> list[_Finding]:
        return [
            (key, "required", f"{key} is required (a non-empty string)")
            for key in keys
            if not isinstance(facet.get(key), str) or not facet.get(key)
        ]

    return check


def _items_need(list_key: str, *keys: str, required: bool = False, booleans: tuple = ()):
    """A facet whose ``list_key`` is a list of objects each holding ``keys`` (strings)
    and ``booleans``; ``required``: the list itself must be there."""

    def check(facet: dict) -> list[_Finding]:
        items = facet.get(list_key)
        if items is None:
            return [(list_key, "required", f"{list_key} is required")] if required else []
        if not isinstance(items, list):
            return [(list_key, "array", f"{list_key} must be an array")]
        findings: list[_Finding] = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                findings.append((f"{list_key}.{index}", "object", "must be an object"))
                continue
            for key in keys:
                if not isinstance(item.get(key), str) or not item.get(key):
                    findings.append((f"{list_key}.{index}.{key}", "required", f"{key} is required"))
            for key in booleans:
                if not isinstance(item.get(key), bool):
                    findings.append(
                        (f"{list_key}.{index}.{key}", "required", f"{key} must be a boolean")
                    )
        return findings

    return check


def _parent_facet(facet: dict) -> list[_Finding]:
    findings: list[_Finding] = []
    run, job = facet.get("run"), facet.get("job")
    if not isinstance(run, dict) or _uuid(run.get("runId")) is None:
        findings.append(("run.runId", "uuid", "run.runId is required (a UUID)"))
    if not isinstance(job, dict):
        job = {}
    for key in ("namespace", "name"):
        if not isinstance(job.get(key), str) or not job.get(key):
            findings.append((f"job.{key}", "required", f"job.{key} is required"))
    return findings


def _nominal_time_facet(facet: dict) -> list[_Finding]:
    findings: list[_Finding] = []
    for key, required in (("nominalStartTime", True), ("nominalEndTime", False)):
        value = facet.get(key)
        if value is None and not required:
            continue
        try:
            parse_event_time(value)
        except EventTimeInvalid:
            findings.append((key, "date_time", f"{key} must be an RFC 3339 date-time"))
    return findings


# (where the facet is, its name) -> what its schema requires (spec 2-0-2 facet schemas).
_STANDARD_FACETS: dict[tuple[str, str], Callable[[dict], list[_Finding]]] = {
    ("run", "parent"): _parent_facet,
    ("run", "nominalTime"): _nominal_time_facet,
    ("run", "errorMessage"): _needs_text("message", "programmingLanguage"),
    ("job", "sql"): _needs_text("query"),
    ("job", "documentation"): _needs_text("description"),
    ("job", "sourceCodeLocation"): _needs_text("type", "url"),
    ("job", "ownership"): _items_need("owners", "name"),
    ("dataset", "documentation"): _needs_text("description"),
    ("dataset", "ownership"): _items_need("owners", "name"),
    ("dataset", "symlinks"): _items_need("identifiers", "namespace", "name", "type"),
    ("input", "dataQualityAssertions"): _items_need(
        "assertions", "assertion", required=True, booleans=("success",)
    ),
}


def _sql_reads(
    job_facets: Any, datasets: list[DatasetRef], problems: list[FieldError]
) -> list[DatasetRef]:
    """The tables a well-formed ``sql`` job facet's query reads, as dataset references
    (``field`` ``job.facets.sql``); none when no dataset of the event is on a SQL engine.
    A parse error is added to ``problems``."""
    facet = job_facets.get("sql") if isinstance(job_facets, dict) else None
    if not isinstance(facet, dict) or not isinstance(facet.get("query"), str):
        return []
    dialect = facet.get("dialect") if isinstance(facet.get("dialect"), str) else None
    context = sql.sql_context([(d.namespace, d.name) for d in datasets], dialect=dialect)
    if context is None:
        return []  # no input or output on a SQL engine tells where the query ran
    reads = sql.tables_read(facet["query"], context)
    if reads.errors:
        problems.append(
            FieldError("job.facets.sql.query", f"SQL not parsed: {reads.errors[0]}"[:500], "sql")
        )
    refs = []
    for table in reads.tables:
        try:
            identity = normalise_dataset_identity(context.namespace, table)
        except IdentityError:
            continue  # a name no dataset can have (whitespace in a quoted identifier ...)
        refs.append(
            DatasetRef(
                field="job.facets.sql",
                namespace=identity.namespace,
                name=identity.name,
                received_namespace=context.namespace,
                received_name=table,
            )
        )
    return refs


def _parent(run_facets: Any) -> ParentRun | None:
    """The ``parent`` run facet as a ``ParentRun`` (it was checked well-formed)."""
    if not isinstance(run_facets, dict) or not isinstance(run_facets.get("parent"), dict):
        return None
    facet = run_facets["parent"]
    run_id = _uuid(facet["run"]["runId"])
    if run_id is None:
        return None
    return ParentRun(
        run_id=run_id,
        job_namespace=facet["job"]["namespace"][:MAX_JOB_NAMESPACE_LENGTH],
        job_name=facet["job"]["name"][:MAX_JOB_NAME_LENGTH],
    )
