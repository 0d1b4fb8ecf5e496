"""Problem types (RFC 9457) with stable codes, and their JSON rendering."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

PROBLEM_CONTENT_TYPE = "application/problem+json"
# A relative URI reference (RFC 9457 3.1.1), resolved against the API host.
TYPE_BASE = "/problems/"


@dataclass(frozen=True)
class FieldError:
    """One offending input field: ``field`` is a JSON pointer-ish dotted path, ``rule`` a code."""

    field: str
    detail: str
    rule: str = "invalid"

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "rule": self.rule, "detail": self.detail}


REQUIRED_DETAIL = "This field is required."
# Beyond this many choices an error names the first ones and how many more there are.
_MAX_CHOICES_SHOWN = 20
_MAX_VALUE_SHOWN = 100


def required(field: str) -> FieldError:
    """The error of a missing field: rule ``required``, detail "This field is required."
    (the words DRF uses, so a missing field reads the same whoever notices it)."""
    return FieldError(field, REQUIRED_DETAIL, "required")


def shown_text(text: str) -> str:
    """``text`` as an error quotes a value sent: cut at 100 characters, with "..." when
    cut."""
    return text[:_MAX_VALUE_SHOWN] + "..." if len(text) > _MAX_VALUE_SHOWN else text


def choice_detail(field: str, value: Any, choices: Iterable[Any]) -> str:
    """The sentence for a value outside a field's choices, naming the field, the value and
    every choice: ``"weekly" is not a valid choice for partitioning; choose one of: none,
    hourly, daily, monthly``. An empty choice shows as ``""``; past 20 choices, the rest
    are counted; a value is cut at 100 characters."""
    shown = ['""' if str(c) == "" else str(c) for c in choices]
    rest = len(shown) - _MAX_CHOICES_SHOWN
    listed = ", ".join(shown[:_MAX_CHOICES_SHOWN]) + (f" and {rest} more" if rest > 0 else "")
    return f'"{shown_text(str(value))}" is not a valid choice for {field}; choose one of: {listed}'


def invalid_choice(field: str, value: Any, choices: Iterable[Any]) -> FieldError:
    """The error of a value outside a field's choices (rule ``invalid_choice``, the code
    DRF and Django give it); the detail is ``choice_detail``'s sentence."""
    return FieldError(field, choice_detail(field, value, choices), "invalid_choice")


@dataclass(frozen=True)
class FieldWarning:
    """Input that was accepted but probably means something else: ``code`` is stable
    snake_case, ``field`` the input field, ``message`` what it does and what to write
    instead. Sent in a successful response's ``warnings``, never as a problem."""

    code: str
    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "field": self.field, "message": self.message}


class Problem(Exception):
    """An error a client can act on, rendered as an RFC 9457 problem document.

    Subclasses set ``code`` (stable snake_case, also the last segment of ``type``),
    ``title`` (the same for every occurrence) and ``status``; each raise gives a ``detail``
    for this occurrence and, for input errors, the offending ``errors``.

    Args:
        detail: human-readable explanation of this occurrence.
        errors: the offending fields, if any.
        extra: further members added to the document (e.g. ``{"expected_format": ...}``).
    """

    code: ClassVar[str] = "problem"
    title: ClassVar[str] = "Request failed"
    status: ClassVar[int] = 400

    def __init__(
        self,
        detail: str,
        *,
        errors: list[FieldError] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []
        self.extra = extra or {}

    def document(self, instance: str | None = None) -> dict[str, Any]:
        """This problem as an RFC 9457 JSON object."""
        return problem_document(
            code=self.code,
            title=self.title,
            status=self.status,
            detail=self.detail,
            instance=instance,
            errors=[e.as_dict() for e in self.errors],
            extra=self.extra,
        )


def problem_document(
    *,
    code: str,
    title: str,
    status: int,
    detail: str,
    instance: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build an RFC 9457 document; ``code`` repeats the type's last segment for clients."""
    doc: dict[str, Any] = {
        "type": TYPE_BASE + code.replace("_", "-"),
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if instance:
        doc["instance"] = instance
    if errors:
        doc["errors"] = errors
    for key, value in (extra or {}).items():
        doc.setdefault(key, value)
    return doc


class ValidationProblem(Problem):
    """errors[] names each offending field, the rule it broke and why: a missing field is
    ``required`` ("This field is required."), a value outside a field's choices is
    ``invalid_choice`` and its detail lists every choice. An error's ``value`` is what was
    sent at the field (a string cut at 100 characters), and its detail names it ("Enter a
    valid URL (got 'htp:/x')."); there is none for a missing field, a list, an object, or
    a field whose name says it is a secret (``*_secret``, ``*_token``, ``*_key``,
    ``password``, ``authorization``)."""

    code = "validation_error"
    title = "The request is not valid"
    status = 400
    # The summary its detail starts with, when made by ``of`` (so a renderer that changes
    # the errors' details can write the detail again: ``listed``).
    summary: str | None = None

    @classmethod
    def of(cls, summary: str, errors: list[FieldError]) -> ValidationProblem:
        """A problem whose detail is ``summary`` followed by each error's field and detail
        (so the detail alone says what to fix), at most 1,000 characters."""
        problem = cls(cls.listed(summary, [e.as_dict() for e in errors]), errors=errors)
        problem.summary = summary
        return problem

    @staticmethod
    def listed(summary: str, errors: list[dict[str, Any]]) -> str:
        """``summary`` followed by each error's ``field`` and ``detail``, at most 1,000
        characters: ``Some dataset fields are not valid: sla_cron: ...; owner: ...``."""
        listed = "; ".join(
            detail if detail.startswith(f"{field}: ") else f"{field}: {detail}"
            for field, detail in ((e["field"], e["detail"]) for e in errors)
        )
        return f"{summary.rstrip('.')}: {listed}"[:1000]


class NotFound(Problem):
    code = "not_found"
    title = "Not found"
    status = 404


class PermissionDenied(Problem):
    code = "permission_denied"
    title = "Not allowed"
    status = 403


class Conflict(Problem):
    code = "conflict"
    title = "Conflict with the current state"
    status = 409
