"""WSGI entry point for the watchdog alone (no catalog, no Celery)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.watchdog")
application = get_wsgi_application()
