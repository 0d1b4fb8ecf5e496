"""Marquez node ids (``dataset:<namespace>:<name>``, ``job:<namespace>:<name>``,
``datasetField:<namespace>:<name>:<field>``, each optionally ``#<version>``): parsing
them (pure).

A namespace usually holds colons itself (``postgres://warehouse:5432``), so an id can be
read several ways; every reading is listed and the reader keeps the first that names
something it holds, as Marquez does when it matches ids against what it stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from problems import FieldError, ValidationProblem

DATASET, JOB, DATASET_FIELD = "dataset", "job", "datasetField"
TYPES = (DATASET, JOB, DATASET_FIELD)


@dataclass(frozen=True)
class NodeRef:
    """One reading of a node id: its ``type`` (``dataset``, ``job`` or ``datasetField``),
    namespace, name, ``field`` (datasetField only, else "") and ``version`` ("" if none)."""

    type: str
    namespace: str
    name: str
    field: str = ""
    version: str = ""


def node_id(type_: str, namespace: str, name: str, field: str = "") -> str:
    """The Marquez node id of a dataset, job or dataset field."""
    parts = [type_, namespace, name, *([field] if field else [])]
    return ":".join(parts)


def parse_node_id(value: str, *, parameter: str = "nodeId") -> list[NodeRef]:
    """Every reading of a node id, the longest namespace first.

    Args:
        value: the id as the caller sent it (``dataset:s3://lake:marts/daily``).
        parameter: the query parameter it came in, named by the error.

    Returns:
        The readings (at least one).

    Raises:
        ValidationProblem: not ``<type>:<namespace>:<name>`` with a known type, or a
            ``datasetField`` id without a field (400, ``errors[].field`` = parameter).
    """
    text, _, version = value.partition("#")
    type_, _, rest = text.partition(":")
    if type_ not in TYPES:
        raise _invalid(parameter, value, f"must start with one of {', '.join(TYPES)} and ':'")
    field = ""
    if type_ == DATASET_FIELD:
        rest, _, field = rest.rpartition(":")
        if not field:
            raise _invalid(parameter, value, "a datasetField id ends with ':<field>'")
    readings = [
        NodeRef(type_, rest[:index], rest[index + 1 :], field, version)
        for index in range(len(rest) - 1, 0, -1)
        if rest[index] == ":" and rest[index + 1 :]
    ]
    if not readings:
        raise _invalid(parameter, value, f"must be {type_}:<namespace>:<name>")
    return readings


def _invalid(parameter: str, value: str, rule: str) -> ValidationProblem:
    shown = value[:200]
    return ValidationProblem.of(
        f"{parameter} {shown!r} is not a Marquez node id",
        [FieldError(parameter, f"{parameter} {rule}", "format")],
    )
