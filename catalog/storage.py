"""Object storage as the fallback poll sees it: operator-defined sources, dataset location
templates, and a counting lister over fsspec.

Sources come only from settings (``TIDEMARK_STORAGE_SOURCES``), and a dataset names one plus
a template relative to its root, so no API caller can make the server list an arbitrary URL
or local path. Every filesystem is opened with its listings cache off: each sweep sees the
store as it is.

The settings-free parts live in the pure ``objectstore`` package (shared with the watchdog's
storage check); this module reads the catalog's settings.
"""

from __future__ import annotations

from django.conf import settings

from objectstore import Source, parse_source


def sources() -> dict[str, Source]:
    """The configured sources, keyed by name.

    Raises:
        StorageError: a source's URL is malformed or its protocol is not allowed.
    """
    return {
        name: parse_source(name, spec, allowed=settings.TIDEMARK_STORAGE_PROTOCOLS)
        for name, spec in settings.TIDEMARK_STORAGE_SOURCES.items()
    }
