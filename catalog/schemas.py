"""Dataset schemas as observed: read, fingerprinted and compared. Pure: no ORM.

A schema is what the OpenLineage ``schema`` dataset facet (SchemaDatasetFacet) carries in
``fields``: a list of ``{"name", "type", "fields"}`` objects, ``type`` optional, ``fields``
(nested columns of a struct) optional; a readiness publish carries the same shape in
``metadata.schema.fields``. Only names, types and nesting are kept: a column's
``description`` (or any other member) changing is not a schema change.

- **Fingerprint**: SHA-256 of the canonical JSON of the fields sorted by name at every
  level, so the same columns in another order are the same schema.
- **Diff**: columns are compared by their dotted path (``address.city`` for a nested one).
  A column gone is *removed*, one whose type changed is *retyped* (types compared without
  case or surrounding space; a column without a type on either side is never retyped: we
  cannot tell), a new one is *added*. Removed or retyped is breaking; added is not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from problems import FieldError

MAX_FIELDS = 5_000  # columns, nested ones included
MAX_DEPTH = 16
MAX_NAME_LENGTH = 1024
MAX_TYPE_LENGTH = 1024

Fields = list[dict[str, Any]]


class SchemaInvalid(ValueError):
    """The fields are not a schema; ``errors`` names each offending member (paths relative
    to the object holding ``fields``)."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.field}: {e.detail}" for e in errors))
        self.errors = errors


def read_fields(value: Any, path: str = "fields") -> Fields:
    """Check and normalise a schema's ``fields`` list.

    Args:
        value: the ``fields`` member as decoded (any JSON value).
        path: how errors name it (``outputs.0.facets.schema.fields``).

    Returns:
        The columns as ``[{"name": str, "type": str | None, "fields": [...]}]`` (``fields``
        only on a column that has nested ones), in the order received.

    Raises:
        SchemaInvalid: not a list, a column that is not an object, a missing or empty
            ``name`` or one longer than ``MAX_NAME_LENGTH``, a ``type`` that is not a
            string or longer than ``MAX_TYPE_LENGTH``, two columns of the same name at the
            same level (rule ``unique``; the same name in different structs is fine),
            nested ``fields`` that are not a list, more than ``MAX_FIELDS`` columns or
            deeper than ``MAX_DEPTH``. The readiness publish refuses such a schema; the
            lineage intake flags it on the event and leaves it unused.
    """
    errors: list[FieldError] = []
    counter = [0]
    fields = _read(value, path, 1, errors, counter)
    if errors:
        raise SchemaInvalid(errors[:20])
    return fields


def _read(
    value: Any, path: str, depth: int, errors: list[FieldError], counter: list[int]
) -> Fields:
    if not isinstance(value, list):
        errors.append(FieldError(path, "fields must be an array", "array"))
        return []
    if depth > MAX_DEPTH:
        errors.append(FieldError(path, f"nested deeper than {MAX_DEPTH} levels", "max_depth"))
        return []
    columns: Fields = []
    seen: dict[str, int] = {}  # column name -> index of its first occurrence at this level
    for index, item in enumerate(value):
        at = f"{path}.{index}"
        counter[0] += 1
        if counter[0] > MAX_FIELDS:
            errors.append(FieldError(path, f"more than {MAX_FIELDS} columns", "max_items"))
            return columns
        if not isinstance(item, dict):
            errors.append(FieldError(at, "a column must be an object", "object"))
            continue
        name, kind, nested = item.get("name"), item.get("type"), item.get("fields")
        if not isinstance(name, str) or not name:
            errors.append(
                FieldError(f"{at}.name", "name is required (a non-empty string)", "required")
            )
            continue
        if len(name) > MAX_NAME_LENGTH:
            errors.append(
                FieldError(
                    f"{at}.name",
                    f"name is too long (at most {MAX_NAME_LENGTH} characters)",
                    "max_length",
                )
            )
            continue
        if name in seen:
            errors.append(
                FieldError(
                    f"{at}.name",
                    f"duplicate column name {name[:100]!r} (also {path}.{seen[name]})",
                    "unique",
                )
            )
            continue
        seen[name] = index
        if kind is not None and not isinstance(kind, str):
            errors.append(FieldError(f"{at}.type", "type must be a string", "string"))
            continue
        if kind is not None and len(kind) > MAX_TYPE_LENGTH:
            errors.append(
                FieldError(
                    f"{at}.type",
                    f"type is too long (at most {MAX_TYPE_LENGTH} characters)",
                    "max_length",
                )
            )
            continue
        column: dict[str, Any] = {"name": name, "type": kind or None}
        if nested is not None:
            column["fields"] = _read(nested, f"{at}.fields", depth + 1, errors, counter)
        columns.append(column)
    return columns


def fingerprint(fields: Fields) -> str:
    """SHA-256 (hex) of the canonical form of ``fields`` (``read_fields``' output): names,
    types and nesting, sorted by name at every level."""
    canonical = json.dumps(_canonical(fields), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _canonical(fields: Fields) -> list:
    return sorted(
        (
            [column["name"], column.get("type"), _canonical(column["fields"])]
            if "fields" in column
            else [column["name"], column.get("type")]
            for column in fields
        ),
        key=lambda row: row[0],
    )


def flatten(fields: Fields, prefix: str = "") -> dict[str, str | None]:
    """Every column by its dotted path (``address.city``), with its type (None: none)."""
    columns: dict[str, str | None] = {}
    for column in fields:
        path = f"{prefix}{column['name']}"
        columns.setdefault(path, column.get("type"))
        if column.get("fields"):
            columns.update(flatten(column["fields"], f"{path}."))
    return columns


@dataclass(frozen=True)
class SchemaDiff:
    """What changed from one schema to the next: column paths ``removed`` and ``added``
    (sorted), and ``retyped`` as ``{"name", "from", "to"}``."""

    removed: list[str] = field(default_factory=list)
    retyped: list[dict[str, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    @property
    def breaking(self) -> bool:
        """A column was removed or retyped (an added one breaks no reader)."""
        return bool(self.removed or self.retyped)


def _same_type(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return True
    return a.strip().lower() == b.strip().lower()


def diff(old: Fields, new: Fields) -> SchemaDiff:
    """Compare two schemas (``read_fields``' output) column by column (module docstring)."""
    before, after = flatten(old), flatten(new)
    return SchemaDiff(
        removed=sorted(set(before) - set(after)),
        retyped=[
            {"name": name, "from": before[name] or "", "to": after[name] or ""}
            for name in sorted(set(before) & set(after))
            if not _same_type(before[name], after[name])
        ],
        added=sorted(set(after) - set(before)),
    )
