"""Object storage shared by the catalog's fallback poll and the watchdog's storage check:
operator-defined sources, relative location templates and a counting lister over fsspec.

Pure: no Django, so the watchdog uses it without importing the catalog. Each side reads
its sources from its own settings and parses them with ``parse_source``.
"""

from .core import (
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
    "parse_source",
    "parse_template",
]
