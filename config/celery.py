"""The Celery app. Workers start with ``celery -A config.celery worker``.

Celery only rings doorbells: every piece of work is a database row first, so a lost
message delays work and never loses it.
"""

import os
from pathlib import Path

from celery import Celery

from . import celery_logging  # noqa: F401 - connects the logging signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("tidemark")
app.config_from_object("django.conf:settings", namespace="CELERY")


def ensure_filesystem_broker_folders(options: dict) -> None:
    """Create the filesystem transport's folders; ``delay()`` fails without them."""
    folders = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
    for key in (*folders, "staging_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


ensure_filesystem_broker_folders(app.conf.broker_transport_options or {})
app.autodiscover_tasks()
