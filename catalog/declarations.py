"""Declarations as code: a team's datasets in a YAML (or JSON) document, and the plan that
brings the catalog to it.

The document::

    team: orders
    datasets:
      - namespace: s3://lake
        name: raw/orders
        criticality: high
        sla_cron: "0 6 * * *"

Each dataset takes the dataset API's field names. Pure: parsing, validation and the plan
(create / update with each field's old -> new / unchanged) need no database; the catalog's
current values come in as plain dicts (``selectors.declaration_current``) and applying goes
through the services (``services.datasets.declarations_apply``), so every rule of the API holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from httpkit.storable import check_storable
from problems import (
    REQUIRED_DETAIL,
    FieldError,
    FieldWarning,
    ValidationProblem,
    invalid_choice,
    required,
)
from schedules import calendars, cron_checks

from . import bounded_yaml
from .identity import IdentityError, normalise_dataset_identity
from .models import Dataset

MAX_BYTES = 256 * 1024
MAX_DATASETS = 500


class InvalidDeclaration(ValidationProblem):
    code = "invalid_declaration"
    title = "The catalog declaration is not valid"


def _text(max_length: int, *, blank: bool = True) -> dict[str, Any]:
    return {"type": str, "max_length": max_length, "blank": blank}


def _choice(choices: type) -> dict[str, Any]:
    return {"type": str, "choices": tuple(choices.values)}


# The dataset API's fields (api/serializers/catalog/datasets.py) with the same bounds.
CREATE_FIELDS: dict[str, dict[str, Any]] = {
    "description": _text(10_000),
    "criticality": _choice(Dataset.Criticality),
    "partitioning": _choice(Dataset.Partitioning),
    "partition_timezone": _text(64, blank=False),
    "completion_signal": _choice(Dataset.CompletionSignal),
    "success_marker": _text(255, blank=False),
    "manifest_name": _text(255, blank=False),
    "storage_source": _text(64),
    "location_template": _text(1024),
    "sla_cron": _text(128),
    "sla_timezone": _text(64, blank=False),
    "sla_grace_seconds": {"type": int, "min": 0, "max": Dataset.MAX_SLA_GRACE_SECONDS},
    "sla_calendar": _choice(Dataset.SlaCalendar),
    "sla_holidays_country": _text(8),
    "sla_holidays_subdivision": _text(64),
    "sla_non_business_day": _choice(Dataset.NonBusinessDay),
    "change_notice_days": {"type": int, "min": 0, "max": Dataset.MAX_CHANGE_NOTICE_DAYS},
    "accepts_future_partitions": {"type": bool},
}
# What a lifecycle change refused for want of its change notice is told to do (see
# ``change_notices.lifecycle_check``): a file carries no override_reason, so an override
# stays a one-off PATCH; a new dataset cannot have had a notice, so it starts active.
LIFECYCLE_ADVICE = (
    "announce a {kind} change notice (POST /api/v1/datasets/{dataset_id}/change-notices) "
    "and apply the file again once it has taken effect; a declarations file carries no "
    "override_reason: to change the lifecycle without the notice, use "
    "PATCH /api/v1/datasets/{dataset_id} with an override_reason, or the dataset's page"
)
NEW_DATASET_LIFECYCLE_ADVICE = (
    "a new dataset cannot be {becomes} yet: declare it active first (leave lifecycle "
    "out), apply, then announce a {kind} change notice and declare it {becomes} once the "
    "notice has taken effect"
)

# Fields the lifecycle rules guard: set after registration through dataset_update.
LIFECYCLE_FIELDS: dict[str, dict[str, Any]] = {
    "lifecycle": _choice(Dataset.Lifecycle),
    "sunset_at": {"type": datetime, "null": True},
}
FIELDS = {**CREATE_FIELDS, **LIFECYCLE_FIELDS}


@dataclass(frozen=True)
class Declaration:
    """One declared dataset: its normalised identity and the fields the file sets."""

    index: int
    namespace: str
    name: str
    fields: dict[str, Any]

    @property
    def path(self) -> str:
        return f"datasets[{self.index}]"

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Document:
    team: str
    datasets: tuple[Declaration, ...]


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: Any
    new: Any


@dataclass(frozen=True)
class PlanItem:
    """``action`` is ``create``, ``update`` or ``unchanged``; ``changes`` in field order;
    ``warnings`` about the declared fields (e.g. an SLA cron that probably means something
    else), whatever the action."""

    declaration: Declaration
    action: str
    changes: tuple[FieldChange, ...]
    warnings: tuple[FieldWarning, ...] = ()


@dataclass(frozen=True)
class Plan:
    team: str
    items: tuple[PlanItem, ...]
    not_declared: tuple[str, ...]  # "namespace/name" of the team's datasets not in the file

    @property
    def changed(self) -> bool:
        return any(item.action != "unchanged" for item in self.items)


def load(raw: bytes | str, *, max_bytes: int | None = MAX_BYTES) -> Any:
    """Read a YAML (or JSON, a YAML subset) document with the safe loader, within the limits
    a JSON body has (``bounded_yaml``: nesting, values with aliases expanded, recursive
    aliases; then no string holding a NUL or a lone surrogate).

    Args:
        max_bytes: the most bytes ``raw`` may have; None when the caller bounded it.

    Raises:
        InvalidDeclaration: more than ``max_bytes``, not UTF-8, not YAML, or over a limit
            above (400, path ``body`` or the offending field; the rule names the limit:
            ``max_bytes``, ``encoding``, ``yaml``, ``depth``, ``max_values``,
            ``yaml_alias``, ``text``).
    """
    data = raw.encode() if isinstance(raw, str) else raw
    if max_bytes is not None and len(data) > max_bytes:
        raise _invalid("body", f"more than {max_bytes} bytes", "max_bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid("body", "not UTF-8", "encoding") from exc
    try:
        document = bounded_yaml.safe_load(text)
    except bounded_yaml.OverLimit as exc:
        raise _invalid("body", f"{exc.problem}{_where(exc)}", exc.rule) from exc
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "malformed"
        raise _invalid("body", f"not valid YAML{_where(exc)}: {problem}", "yaml") from exc
    except (ValueError, OverflowError, TypeError) as exc:  # e.g. a timestamp 2026-13-45
        raise _invalid("body", f"not valid YAML: {exc}", "yaml") from exc
    try:
        check_storable(document)
    except ValidationProblem as exc:  # paths as validate() names them: datasets[0].name
        errors = [
            FieldError(re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", e.field), e.detail, e.rule)
            for e in exc.errors
        ]
        raise InvalidDeclaration(exc.detail, errors=errors) from exc
    return document


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def validate(data: Any) -> Document:
    """Check a loaded document's shape and field types; normalise dataset identities.

    Returns:
        The ``Document``; datasets in file order, with only the fields the file sets.

    Raises:
        InvalidDeclaration: every offending path (``datasets[2].sla_cron``) in ``errors`` (400).
    """
    problems: list[FieldError] = []
    if not isinstance(data, dict):
        raise _invalid("body", "must be a mapping with team and datasets", "type")
    for key in sorted(set(data) - {"team", "datasets"}, key=str):
        problems.append(FieldError(str(key), "unknown field", "unknown"))
    team = data.get("team")
    if not isinstance(team, str) or not team:
        problems.append(
            FieldError("team", f"{REQUIRED_DETAIL} (the owner team's slug)", "required")
        )
    entries = data.get("datasets")
    if not isinstance(entries, list):
        problems.append(
            FieldError("datasets", f"{REQUIRED_DETAIL} (a list of datasets)", "required")
        )
        entries = []
    elif len(entries) > MAX_DATASETS:
        problems.append(FieldError("datasets", f"at most {MAX_DATASETS}", "max_items"))
        entries = []
    declarations: list[Declaration] = []
    seen: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(entries):
        declaration = _declaration(index, entry, problems)
        if declaration is None:
            continue
        key = (declaration.namespace, declaration.name)
        if key in seen:
            problems.append(
                FieldError(
                    f"{declaration.path}.name",
                    f"{declaration.label} is declared twice (also datasets[{seen[key]}])",
                    "duplicate",
                )
            )
        seen[key] = index
        declarations.append(declaration)
    if problems:
        raise InvalidDeclaration(
            f"The declaration has {len(problems)} error(s); the first at {problems[0].field}: "
            f"{problems[0].detail}"[:1000],
            errors=problems,
        )
    return Document(team=team, datasets=tuple(declarations))


def plan(
    document: Document, *, current: dict[tuple[str, str], dict[str, Any]], owned: list[str]
) -> Plan:
    """Compare the document with the catalog.

    Args:
        current: ``(namespace, name) -> {field: value}`` of the declared datasets that exist.
        owned: ``namespace/name`` of every dataset the team owns.

    Returns:
        One ``PlanItem`` per declared dataset, in file order: ``create`` with every declared
        field as ``None -> value``, ``update`` with the fields that differ, or ``unchanged``.
    """
    items = []
    for declaration in document.datasets:
        existing = current.get((declaration.namespace, declaration.name))
        warnings = tuple(
            cron_checks.field_warnings("sla_cron", declaration.fields.get("sla_cron") or "")
        )
        if existing is None:
            changes = tuple(FieldChange(f, None, v) for f, v in declaration.fields.items())
            items.append(PlanItem(declaration, "create", changes, warnings))
            continue
        changes = tuple(
            FieldChange(f, existing[f], v)
            for f, v in declaration.fields.items()
            if existing[f] != v
        )
        action = "update" if changes else "unchanged"
        items.append(PlanItem(declaration, action, changes, warnings))
    declared = {d.label for d in document.datasets}
    return Plan(
        team=document.team,
        items=tuple(items),
        not_declared=tuple(sorted(label for label in owned if label not in declared)),
    )


def plan_as_dict(result: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data: ``{team, changed, datasets: [...], not_declared}``;
    each dataset ``{namespace, name, action, changes, warnings: [{code, field, message}]}``."""
    return {
        "team": result.team,
        "changed": result.changed,
        "datasets": [
            {
                "namespace": item.declaration.namespace,
                "name": item.declaration.name,
                "action": item.action,
                "changes": {
                    c.field: {"old": _jsonable(c.old), "new": _jsonable(c.new)}
                    for c in item.changes
                },
                "warnings": [w.as_dict() for w in item.warnings],
            }
            for item in result.items
        ],
        "not_declared": list(result.not_declared),
    }


def plan_as_text(result: Plan) -> list[str]:
    """The plan as lines for a terminal: ``+`` create, ``~`` update, ``=`` unchanged; a
    dataset's warnings follow its changes as ``! field: message (code)``."""
    marks = {"create": "+", "update": "~", "unchanged": "="}
    lines = []
    for item in result.items:
        lines.append(f"{marks[item.action]} {item.declaration.label} ({item.action})")
        for c in item.changes:
            old = "" if item.action == "create" else f"{_jsonable(c.old)!r} -> "
            lines.append(f"    {c.field}: {old}{_jsonable(c.new)!r}")
        lines.extend(f"    ! {w.field}: {w.message} ({w.code})" for w in item.warnings)
    lines.extend(f"? {label} (not declared; left alone)" for label in result.not_declared)
    return lines


def _declaration(index: int, entry: Any, problems: list[FieldError]) -> Declaration | None:
    path = f"datasets[{index}]"
    if not isinstance(entry, dict):
        problems.append(FieldError(path, "must be a mapping", "type"))
        return None
    before = len(problems)
    for key in sorted(set(entry) - set(FIELDS) - {"namespace", "name"}, key=str):
        problems.append(FieldError(f"{path}.{key}", "unknown field", "unknown"))
    identity = None
    namespace, name = entry.get("namespace"), entry.get("name")
    for key, value in (("namespace", namespace), ("name", name)):
        if not isinstance(value, str) or not value:
            problems.append(required(f"{path}.{key}"))
    if isinstance(namespace, str) and namespace and isinstance(name, str) and name:
        try:
            identity = normalise_dataset_identity(namespace, name)
        except IdentityError as exc:
            problems.append(FieldError(f"{path}.{exc.field}", str(exc), exc.rule))
    fields: dict[str, Any] = {}
    for key, spec in FIELDS.items():
        if key in entry:
            value = _field(f"{path}.{key}", entry[key], spec, problems)
            fields[key] = value
    cron = fields.get("sla_cron")
    if isinstance(cron, str) and cron and len(problems) == before:
        # Refused in the dry run as in the API, naming the path ("datasets[0].sla_cron").
        refused = cron_checks.field_problem("sla_cron", cron)
        if refused is not None:
            problems.append(FieldError(f"{path}.sla_cron", refused.detail, refused.rule))
    country = fields.get("sla_holidays_country")
    if isinstance(country, str) and country and len(problems) == before:
        # Unknown holiday codes are refused in the dry run too; the subdivision is checked
        # against the country the file names (a stored one is checked when applied).
        try:
            calendars.validate(country, fields.get("sla_holidays_subdivision") or None)
        except calendars.CalendarError as exc:
            field = f"sla_{exc.field}"
            problems.append(
                FieldError(f"{path}.{field}", f"{field} {exc.value!r}: {exc}", "sla_calendar")
            )
    if identity is None or len(problems) > before:
        return None
    return Declaration(index, identity.namespace, identity.name, fields)


def _field(path: str, value: Any, spec: dict[str, Any], problems: list[FieldError]) -> Any:
    kind = spec["type"]
    if value is None:
        if not spec.get("null"):
            problems.append(FieldError(path, "may not be null", "null"))
        return None
    if kind is datetime:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                problems.append(FieldError(path, "not an ISO 8601 date-time", "datetime"))
                return None
        if not isinstance(value, datetime):
            problems.append(FieldError(path, "must be an ISO 8601 date-time", "datetime"))
            return None
        if value.tzinfo is None:
            problems.append(FieldError(path, "needs a UTC offset (e.g. Z)", "aware_datetime"))
            return None
        return value
    if kind is bool:
        if not isinstance(value, bool):
            problems.append(FieldError(path, "must be true or false", "boolean"))
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(FieldError(path, "must be an integer", "integer"))
        elif not spec["min"] <= value <= spec["max"]:
            problems.append(
                FieldError(path, f"must be from {spec['min']} to {spec['max']}", "range")
            )
        return value
    if not isinstance(value, str):
        problems.append(FieldError(path, "must be a string", "string"))
        return value
    if "choices" in spec and value not in spec["choices"]:
        problems.append(invalid_choice(path, value, spec["choices"]))
    elif len(value) > spec.get("max_length", len(value)):
        problems.append(FieldError(path, f"at most {spec['max_length']} characters", "max_length"))
    elif not value and not spec.get("blank", True):
        problems.append(FieldError(path, "may not be blank", "blank"))
    return value


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _invalid(path: str, detail: str, rule: str) -> InvalidDeclaration:
    return InvalidDeclaration(detail, errors=[FieldError(path, detail, rule)])
