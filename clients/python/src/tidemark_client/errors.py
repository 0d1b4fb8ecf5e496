"""The exceptions the client raises: a Tidemark problem document (RFC 9457), a request
that never got an answer, and the outcomes of waiting for a partition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class TidemarkError(Exception):
    """Base of every error this package raises."""


@dataclass(frozen=True)
class FieldProblem:
    """One offending input field of a problem's ``errors[]``: its dotted ``field`` path
    (``datasets[2].sla_cron``), the ``rule`` it broke (``required``, ``invalid_choice``
    ...), a ``detail`` that says how to fix it and the ``value`` sent there as the server
    repeats it (a string, number or boolean; None when the server gave none: a required
    field, a secret, a list or an object, or when null was sent)."""

    field: str
    rule: str
    detail: str
    value: Any = None


class ProblemError(TidemarkError):
    """An error answer from Tidemark, as its RFC 9457 problem document tells it.

    Attributes:
        status: the HTTP status (400 ... 599).
        type: the problem type URI reference (``/problems/dataset-not-found``).
        title: the same for every occurrence of the type.
        detail: this occurrence, in words that say what to do.
        code: the type's stable snake_case code (``dataset_not_found``).
        errors: the offending fields, in the server's order (may be empty).
        field: the first offending field's path, or None.
        retry_after: seconds the server asked to wait (``Retry-After``), or None.
        document: the whole problem document (other members such as ``suggestion``).
    """

    def __init__(
        self, status: int, document: dict[str, Any], *, retry_after: float | None = None
    ) -> None:
        self.status = status
        self.document = document
        self.type = str(document.get("type", "about:blank"))
        self.title = str(document.get("title", ""))
        self.detail = str(document.get("detail", ""))
        self.code = str(document.get("code") or self.type.rsplit("/", 1)[-1].replace("-", "_"))
        self.errors = [
            FieldProblem(
                field=str(e.get("field", "")),
                rule=str(e.get("rule", "")),
                detail=str(e.get("detail", "")),
                value=e.get("value"),
            )
            for e in document.get("errors") or []
            if isinstance(e, dict)
        ]
        self.field = self.errors[0].field if self.errors else None
        self.retry_after = retry_after
        super().__init__(f"{status} {self.code}: {self.detail or self.title}")

    @classmethod
    def from_answer(
        cls, status: int, body: bytes, content_type: str, *, retry_after: float | None = None
    ) -> ProblemError:
        """The problem an error answer carries; an answer that is not a problem document
        (a proxy's HTML page, a ping's text) becomes one with its first 500 characters as
        ``detail`` and the type ``about:blank``."""
        import json

        document: Any = None
        if "json" in content_type:
            try:
                document = json.loads(body)
            except ValueError:
                document = None
        if not isinstance(document, dict):
            text = body.decode("utf-8", "replace").strip()[:500]
            document = {"type": "about:blank", "title": f"HTTP {status}", "detail": text}
            document["code"] = f"http_{status}"
        return cls(status, document, retry_after=retry_after)


class TransportError(TidemarkError):
    """No answer: the server could not be reached or did not answer in time, after the
    retries the client's ``RetryPolicy`` allows."""


class PartitionFailed(TidemarkError):
    """The partition waited for was published as ``failed``. ``partition`` is its
    representation (``Partition``)."""

    def __init__(self, partition: Any) -> None:
        self.partition = partition
        super().__init__(f"partition {partition.key!r} is failed")


class WaitTimeout(TidemarkError):
    """The partition waited for was not ready before the timeout. ``last_state`` is what
    the last answer said (``missing``, ``pending``), or None when none came."""

    def __init__(self, key: str, timeout: float, last_state: str | None) -> None:
        self.key = key
        self.timeout = timeout
        self.last_state = last_state
        super().__init__(
            f"partition {key!r} not ready after {timeout:g} s (last state: {last_state})"
        )
