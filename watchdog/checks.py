"""System checks for the watchdog's deployment."""

from __future__ import annotations

import os

import environ
from django.core import checks


@checks.register(checks.Tags.database, deploy=False)
def separate_database(app_configs=None, **kwargs):
    """The watchdog must keep paging when the catalog's database is down, so
    ``WATCHDOG_DATABASE_URL`` may not name the same database as ``DATABASE_URL``
    (DESIGN.md principle 5)."""
    catalog_url = os.environ.get("DATABASE_URL")
    watchdog_url = os.environ.get("WATCHDOG_DATABASE_URL")
    if not catalog_url or not watchdog_url:
        return []

    def identity(url: str):
        config = environ.Env.db_url_config(url)
        return (
            config.get("ENGINE"),
            config.get("HOST") or "",
            str(config.get("PORT") or ""),
            config.get("NAME"),
        )

    if identity(catalog_url) == identity(watchdog_url):
        return [
            checks.Error(
                "WATCHDOG_DATABASE_URL names the same database as DATABASE_URL.",
                hint="Give the watchdog its own database (ideally its own server), so it "
                "pages when the catalog's database is down.",
                id="watchdog.E001",
            )
        ]
    return []
