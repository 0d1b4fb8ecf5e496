"""Object storage as the fallback poll sees it: operator-defined sources, dataset location
templates, and a counting lister over fsspec.

Sources come only from settings (``TIDEMARK_STORAGE_SOURCES``), and a dataset names one plus
a template relative to its root, so no API caller can make the server list an arbitrary URL
or local path. Every filesystem is opened with its listings cache off: each sweep sees the
store as it is.

The settings-free parts live in the pure ``objectstore`` package (shared with the watchdog's
storage check); this module reads the catalog's settings and keeps the names the poll uses.
"""

from __future__ import annotations

from django.conf import settings

from objectstore import (
    MANIFEST_MAX_BYTES,
    PAGE_SIZE,
    PLACEHOLDER,
    S3_CLIENT_CONFIG,
    S3FS_RETRIES,
    Lister,
    ListingCounts,
    Location,
    Source,
    StorageError,
    StoredObject,
    TemplateError,
    parse_source,
    parse_template,
)

__all__ = [
    "MANIFEST_MAX_BYTES",
    "PAGE_SIZE",
    "PLACEHOLDER",
    "S3FS_RETRIES",
    "S3_CLIENT_CONFIG",
    "Lister",
    "ListingCounts",
    "Location",
    "Source",
    "StorageError",
    "StoredObject",
    "TemplateError",
    "parse_template",
    "sources",
]


def sources() -> dict[str, Source]:
    """The configured sources, keyed by name.

    Raises:
        StorageError: a source's URL is malformed or its protocol is not allowed.
    """
    return {
        name: parse_source(name, spec, allowed=settings.TIDEMARK_STORAGE_PROTOCOLS)
        for name, spec in settings.TIDEMARK_STORAGE_SOURCES.items()
    }
