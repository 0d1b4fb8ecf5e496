"""Settings for ``bench/ingest.py``: the production stack of ``base`` plus the floor view.

The bench runs gunicorn against PostgreSQL and Redis, so a configured ``DATABASE_URL`` is
required; embedded SQLite numbers would say nothing about production.
"""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import EMBEDDED

if EMBEDDED:
    raise ImproperlyConfigured("config.settings.bench needs DATABASE_URL (PostgreSQL)")

ROOT_URLCONF = "config.bench_urls"
DEBUG = False
