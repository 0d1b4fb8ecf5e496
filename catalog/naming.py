"""The OpenLineage naming spec's per-platform rules: which spellings of a dataset
identity are the same dataset. Pure: strings in, strings out; ``catalog.identity``
validates an identity and applies these.

Sources: the spec's naming conventions (``spec/Naming.md`` and the table at
https://openlineage.io/docs/spec/naming) and, where the spec is silent on a spelling,
what the OpenLineage Java client's filesystem helpers emit (``FilesystemDatasetUtils``):

- **Schemes** are lower case. ``s3a`` and ``s3n`` (Hadoop's S3 connectors) are ``s3``;
  ``postgresql`` is ``postgres``. No other scheme is renamed: ``gcs`` is not ``gs``,
  ``wasb`` is not ``wasbs`` (the spec names neither, and they may be other stores).
- **Authorities** are lower case (host names, buckets and storage accounts are).
  ``scheme://`` with no authority is the bare scheme (``bigquery://`` is ``bigquery``,
  as the spec's table spells it). On the host:port engines (``HOST_PORT_SCHEMES``) a
  ``user[:password]@`` before the host is dropped: the spec's namespace is
  ``{host}:{port}``, and credentials have no place in an identity. A missing port is
  not filled in: the spec's namespace always carries one, and guessing it would rename
  datasets registered without one.
- **Object-store names** (``OBJECT_STORE_SCHEMES``: S3, GCS, Azure Blob and Data Lake)
  are object keys: leading and trailing slashes are dropped (``/raw/orders/`` is
  ``raw/orders``); the bucket or container itself is ``/``. Case is kept: keys are
  case-sensitive. Inner slashes are kept: ``a//b`` is another key than ``a/b``.
- **File-system paths** (``hdfs``, ``dbfs``) are absolute: one leading slash
  (``warehouse/t`` is ``/warehouse/t``) and no trailing one; ``file`` paths lose a
  trailing slash only (a bare ``file`` namespace may hold relative paths).
- **Table names** are folded where the engine folds unquoted identifiers: lower case for
  PostgreSQL-family engines, upper case for Snowflake; every other engine keeps case.
"""

from __future__ import annotations

SCHEME_ALIASES = {"postgresql": "postgres", "s3a": "s3", "s3n": "s3"}
OBJECT_STORE_SCHEMES = frozenset({"s3", "gs", "wasbs", "abfss"})
ABSOLUTE_PATH_SCHEMES = frozenset({"hdfs", "dbfs"})
TRAILING_SLASH_SCHEMES = frozenset({"file"})
HOST_PORT_SCHEMES = frozenset(
    {
        "postgres",
        "mysql",
        "redshift",
        "trino",
        "mssql",
        "sqlserver",
        "oracle",
        "teradata",
        "cassandra",
        "db2",
        "hive",
        "crate",
        "oceanbase",
        "milvus",
        "kafka",
    }
)
FOLD_LOWER = frozenset({"postgres", "redshift", "duckdb"})
FOLD_UPPER = frozenset({"snowflake"})
BUCKET_ROOT = "/"


def canonical_namespace(scheme: str, authority: str | None) -> str:
    """The namespace ``scheme://authority`` (or the bare scheme) in its canonical spelling.

    Args:
        scheme: the namespace's scheme as written (``S3A``); it matched
            ``[A-Za-z][A-Za-z0-9+.-]*`` (``catalog.identity`` checked).
        authority: what follows ``://`` without slashes, or None / ``""`` when none.

    Returns:
        ``s3://lake``, ``postgres://db:5432``, ``bigquery``.
    """
    scheme = canonical_scheme(scheme)
    if not authority:
        return scheme
    authority = authority.lower()
    if scheme in HOST_PORT_SCHEMES and "@" in authority:
        authority = authority.rsplit("@", 1)[1]
    return f"{scheme}://{authority}" if authority else scheme


def canonical_scheme(scheme: str) -> str:
    """A scheme lower-cased, and named as the spec names its store (``s3a`` -> ``s3``)."""
    scheme = scheme.lower()
    return SCHEME_ALIASES.get(scheme, scheme)


def canonical_name(scheme: str, name: str, *, prefix: bool = False) -> str:
    """A dataset name in its canonical spelling on the platform of ``scheme``.

    Args:
        scheme: the canonical scheme (``canonical_scheme``).
        name: the name as received, non-empty.
        prefix: ``name`` is the start of names (a prefix claim's path): its trailing
            slash is kept, as it says where a segment ends (``sales/`` does not cover
            ``sales_archive``).

    Returns:
        The canonical name (the module docstring gives the rules).
    """
    if scheme in OBJECT_STORE_SCHEMES:
        name = name.lstrip("/")
        if not prefix:
            name = name.rstrip("/") or BUCKET_ROOT
        return name
    if scheme in ABSOLUTE_PATH_SCHEMES:
        name = "/" + name.lstrip("/")
        return name if prefix else (name.rstrip("/") or "/")
    if scheme in TRAILING_SLASH_SCHEMES and not prefix:
        return name.rstrip("/") or "/"
    if scheme in FOLD_LOWER:
        return name.lower()
    if scheme in FOLD_UPPER:
        return name.upper()
    return name
