"""The datasets an event names: identities normalised as at registration, with what their
well-formed ``schema`` and ``symlinks`` facets declare, and the tables a ``sql`` job facet
reads."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from catalog import schemas
from catalog.identity import IdentityError, normalise_dataset_identity
from problems import FieldError

from .. import sql
from .facets import check_facets
from .fields import text_member

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


def dataset_list(
    data: dict,
    key: str,
    facets_key: str,
    location: str,
    errors: list[FieldError],
    problems: list[FieldError],
) -> list[DatasetRef]:
    """The datasets of ``data[key]`` (``inputs`` or ``outputs``) whose identity normalised,
    each with its facets read (``with_facets``); a malformed member is an error named
    ``key.N``, a flagged facet (of ``facets`` or of ``facets_key`` at ``location``) a
    problem."""
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
        ref = dataset_ref(item, path, errors, problems)
        facet_problems = check_facets(item.get("facets"), f"{path}.facets", "dataset")
        problems += facet_problems
        problems += check_facets(item.get(facets_key), f"{path}.{facets_key}", location)
        if ref is not None:
            refs.append(with_facets(ref, item.get("facets"), path, facet_problems, problems))
    return refs


def with_facets(
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


def dataset_ref(
    item: dict, path: str, errors: list[FieldError], problems: list[FieldError]
) -> DatasetRef | None:
    """The dataset ``item`` at ``path`` names, normalised; None when its namespace or name
    is missing (an error) or breaks a naming rule (a problem: not recorded as usage)."""
    namespace = text_member(item, "namespace", path, 10_000, errors)
    name = text_member(item, "name", path, 100_000, errors)
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


def sql_read_datasets(
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
