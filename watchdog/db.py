"""Which database alias holds the watchdog's tables: ``watchdog`` beside the catalog, or
``default`` when the watchdog is deployed alone (``config.settings.watchdog``)."""

from __future__ import annotations

from django.db import router


def alias() -> str:
    """The alias the router writes watchdog models to."""
    from .models import Monitor

    return router.db_for_write(Monitor) or "default"
