"""Facets: kept as the JSON they arrived as; a standard facet missing what its schema
requires (spec 2-0-2 facet schemas) is a problem, flagged and left unused."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from problems import FieldError

from ..errors import EventTimeInvalid
from .event_time import parse_event_time
from .fields import MAX_JOB_NAME_LENGTH, MAX_JOB_NAMESPACE_LENGTH, parse_uuid


@dataclass(frozen=True)
class ParentRun:
    """The run that started this one, from a well-formed ``parent`` run facet."""

    run_id: uuid.UUID
    job_namespace: str
    job_name: str


def check_facets(facets: Any, path: str, location: str) -> list[FieldError]:
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
    if not isinstance(run, dict) or parse_uuid(run.get("runId")) is None:
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


def parent_run(run_facets: Any) -> ParentRun | None:
    """The ``parent`` run facet as a ``ParentRun`` (it was checked well-formed)."""
    if not isinstance(run_facets, dict) or not isinstance(run_facets.get("parent"), dict):
        return None
    facet = run_facets["parent"]
    run_id = parse_uuid(facet["run"]["runId"])
    if run_id is None:
        return None
    return ParentRun(
        run_id=run_id,
        job_namespace=facet["job"]["namespace"][:MAX_JOB_NAMESPACE_LENGTH],
        job_name=facet["job"]["name"][:MAX_JOB_NAME_LENGTH],
    )
