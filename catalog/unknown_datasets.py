"""What to tell a caller who names a dataset that is not registered: which of ``namespace``
and ``name`` is wrong, and the closest registered identity, so a typo is fixed from the
error alone.

A namespace no dataset has is the namespace's fault, whatever the name; a namespace that
has datasets, but not this name, is the name's. The suggestion is the closest identity by
``difflib.get_close_matches`` among the datasets the caller may see (every registered one,
unless the caller passes fewer): the closest namespace first, then the closest name in it.
"""

from __future__ import annotations

import difflib
from typing import Any

from django.db.models import QuerySet

from problems import FieldError, Problem

from . import errors
from .identity import DatasetIdentity, IdentityError, normalise_dataset_identity
from .models import Dataset

# Names compared per namespace at most (alphabetically first): the error path of a very
# large namespace stays a bounded query and a bounded comparison.
MAX_CANDIDATES = 10_000
# difflib's similarity ratio a candidate needs (its default): "s3://tidemark-demp" is
# close to "s3://tidemark-demo", "s3://other" is not.
CUTOFF = 0.6


def dataset_not_found(
    namespace: str,
    name: str,
    *,
    among: QuerySet[Dataset] | None = None,
    problem: type[Problem] = errors.DatasetNotFound,
) -> Problem:
    """The problem for a ``namespace``/``name`` that names no registered dataset.

    Args:
        namespace, name: as the caller sent them (normalised here, as at registration).
        among: the datasets whose identities may be suggested (the caller's visible
            ones); None: every registered dataset.
        problem: the Problem class to build (``DatasetNotFound`` unless the endpoint has
            its own, e.g. the lineage graph's ``LineageNodeNotFound``).

    Returns:
        ``problem`` (not raised) whose one error names ``namespace`` (rule
        ``namespace_unknown``: no dataset has it) or ``name`` (rule ``name_unknown``), or
        the field and rule ``normalise_dataset_identity`` refused; with the member
        ``suggestion: {namespace, name}`` when a visible identity is close, also said in
        the detail.
    """
    shown = f"{namespace}/{name}"
    try:
        identity = normalise_dataset_identity(namespace, name)
    except IdentityError as exc:
        return problem(
            f"no dataset {shown} is registered: {exc}",
            errors=[FieldError(exc.field, str(exc), exc.rule)],
        )
    candidates = Dataset.objects.all() if among is None else among
    if Dataset.objects.filter(namespace=identity.namespace).exists():
        field, rule = "name", "name_unknown"
        why = f"no dataset named {identity.name!r} in namespace {identity.namespace!r}"
        suggestion = _closest_in(candidates, identity.namespace, identity.name)
        if suggestion is None:  # nothing close in this namespace: perhaps in another
            suggestion = _closest(candidates, identity)
    else:
        field, rule = "namespace", "namespace_unknown"
        why = f"no dataset is registered in namespace {identity.namespace!r}"
        suggestion = _closest(candidates, identity)
    extra: dict[str, Any] = {}
    detail = f"no dataset {identity.namespace}/{identity.name} is registered: {why}"
    if suggestion is not None:
        extra["suggestion"] = {"namespace": suggestion.namespace, "name": suggestion.name}
        detail += f"; did you mean {suggestion.namespace}/{suggestion.name}?"
    return problem(detail, errors=[FieldError(field, why, rule)], extra=extra)


def _closest(candidates: QuerySet[Dataset], wanted: DatasetIdentity) -> DatasetIdentity | None:
    """The closest identity: the namespaces closest to ``wanted``'s, each searched for the
    name closest to ``wanted``'s; the first that has one."""
    namespaces = list(
        candidates.order_by("namespace")
        .values_list("namespace", flat=True)
        .distinct()[:MAX_CANDIDATES]
    )
    for namespace in difflib.get_close_matches(wanted.namespace, namespaces, n=3, cutoff=CUTOFF):
        found = _closest_in(candidates, namespace, wanted.name)
        if found is not None:
            return found
    return None


def _closest_in(candidates: QuerySet[Dataset], namespace: str, name: str) -> DatasetIdentity | None:
    """The name in ``namespace`` closest to ``name`` (itself when registered), or None."""
    names = list(
        candidates.filter(namespace=namespace)
        .order_by("name")
        .values_list("name", flat=True)[:MAX_CANDIDATES]
    )
    close = difflib.get_close_matches(name, names, n=1, cutoff=CUTOFF)
    return DatasetIdentity(namespace, close[0]) if close else None
