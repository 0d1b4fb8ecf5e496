"""Dataset identity: OpenLineage ``namespace`` + ``name``, validated and normalised.

One pure function, :func:`normalise_dataset_identity`, is used at registration and at
lineage ingest, so the same table reached by either path has one identity.

Rules follow the OpenLineage naming spec (``spec/Naming.md``): a namespace is
``scheme://authority`` (``postgres://db.example:5432``, ``s3://bucket``) or a bare scheme
for services without an authority (``bigquery``). Which spellings are one dataset on each
platform (``s3a://`` is ``s3://``, slashes around an object key, case) is
``catalog.naming``'s.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from . import naming

MAX_NAMESPACE_LENGTH = 255
MAX_NAME_LENGTH = 1024

_NAMESPACE_RE = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.\-]*)(?:://(?P<authority>[^\s/]*))?/*$")


class IdentityError(ValueError):
    """A namespace or name breaks a naming rule; ``field`` names which and ``rule`` why."""

    def __init__(self, field: str, rule: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.rule = rule


@dataclass(frozen=True)
class DatasetIdentity:
    """A normalised OpenLineage dataset identity."""

    namespace: str
    name: str


def normalise_dataset_identity(namespace: str, name: str) -> DatasetIdentity:
    """Validate and normalise one dataset identity.

    Args:
        namespace: ``scheme://authority`` or a bare scheme, at most 255 characters.
        name: the dataset's name within the namespace (``db.schema.table``, an object path),
            at most 1024 characters, no whitespace or control characters.

    Returns:
        The normalised identity.

    Raises:
        IdentityError: with ``field`` "namespace" or "name" and ``rule`` one of
            ``required``, ``max_length``, ``whitespace``, ``format``.
    """
    namespace = _check_text("namespace", namespace, MAX_NAMESPACE_LENGTH)
    name = _check_text("name", name, MAX_NAME_LENGTH)

    match = _NAMESPACE_RE.match(namespace.lower())
    if not match:
        raise IdentityError(
            "namespace",
            "format",
            "namespace must be 'scheme://authority' or a bare scheme (OpenLineage naming), "
            f"got {namespace!r}",
        )
    normalised_namespace = naming.canonical_namespace(match["scheme"], match["authority"])
    scheme = naming.canonical_scheme(match["scheme"])
    return DatasetIdentity(namespace=normalised_namespace, name=naming.canonical_name(scheme, name))


def _check_text(field: str, value: object, max_length: int) -> str:
    if not isinstance(value, str) or not value:
        raise IdentityError(field, "required", f"{field} is required")
    if len(value) > max_length:
        raise IdentityError(field, "max_length", f"{field} is longer than {max_length} characters")
    # Separators, control and invisible format characters (zero-width space, BOM, bidi
    # overrides) would let two identities look the same. Printable ASCII without a space
    # has none of them: the common case skips the per-character look-up.
    if not (value.isascii() and value.isprintable() and " " not in value) and any(
        ch.isspace() or unicodedata.category(ch)[0] in "CZ" for ch in value
    ):
        raise IdentityError(
            field,
            "whitespace",
            f"{field} must not contain whitespace, control or invisible characters",
        )
    return value


# --- dataset prefixes (Claim kind ``dataset_prefix``) -----------------------------------

_PREFIX_NAMESPACE_RE = re.compile(
    r"^(?P<namespace>[A-Za-z][A-Za-z0-9+.\-]*(?:://[^\s/]+)?)(?:/(?P<path>.*))?$"
)


def dataset_location(namespace: str, name: str) -> str:
    """Where a dataset lives, for prefix claims: ``f"{namespace}/{name}"`` of its
    normalised identity (``s3://lake`` + ``sales/orders`` -> ``s3://lake/sales/orders``)."""
    return f"{namespace}/{name}"


def normalise_dataset_prefix(prefix: str) -> str:
    """Validate and normalise a dataset prefix: a dataset namespace, optionally followed by
    ``/`` and the start of a name.

    The namespace is normalised as a dataset's is, and the name part is folded as the
    engine folds names; a bare namespace becomes ``namespace + "/"`` (every dataset of
    it). A prefix covers a dataset when :func:`dataset_location` starts with it, as plain
    text: ``s3://lake/sales/`` covers ``s3://lake`` + ``sales/orders`` but not
    ``sales_archive/x``, which ``s3://lake/sales`` (no slash) would also cover.

    Args:
        prefix: ``s3://Lake/sales/``, ``postgres://db:5432/analytics.sales.``, ``bigquery/p.``.

    Returns:
        The normalised prefix (``s3://lake/sales/``).

    Raises:
        IdentityError: with ``field`` "pattern" and ``rule`` ``required``,
            ``whitespace`` or ``format``.
    """
    prefix = _check_text("pattern", prefix, MAX_NAMESPACE_LENGTH)
    match = _PREFIX_NAMESPACE_RE.match(prefix)
    if not match:
        raise IdentityError(
            "pattern",
            "format",
            "a dataset prefix starts with a dataset namespace (scheme://authority), "
            f"got {prefix!r}",
        )
    path = match["path"] or ""
    try:
        identity = normalise_dataset_identity(match["namespace"], "x")
    except IdentityError as exc:
        raise IdentityError("pattern", exc.rule, str(exc)) from exc
    scheme = identity.namespace.split("://", 1)[0]
    return dataset_location(
        identity.namespace, naming.canonical_name(scheme, path, prefix=True) if path else ""
    )


def prefix_covers(prefix: str, location: str) -> bool:
    """Whether the normalised ``prefix`` covers the dataset at ``location``."""
    return location.startswith(prefix)
