"""The independent dead-man's-switch watchdog: monitors, pings, incidents and pages.

Imports only the pure packages (``schedules``, ``outbound``, ``problems``), never the
catalog or Celery, so it can be deployed alone.
"""
