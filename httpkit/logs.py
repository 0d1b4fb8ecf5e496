"""Tidemark's log output: one ``logging`` configuration for every process (web, Celery
workers and beat, the watchdog's loop and server), rendered by structlog.

``TIDEMARK_LOG_FORMAT`` chooses the rendering of *every* record, Tidemark's own and the
standard library's (Django, Celery, gunicorn):

- ``plain`` (the default, as ``make run`` uses): ``<time> <LEVEL> <logger> <message>``
  as before, with a record's structured fields and the request's context appended as
  ``key=value`` pairs, and a traceback on the lines that follow.
- ``json``: one JSON object per line with ``timestamp`` (ISO 8601, UTC), ``level``,
  ``logger``, ``event`` (the message) and every field, e.g. ``request_id``.

Both go through structlog's ``ProcessorFormatter`` on one stream handler (standard
error), whose ``RedactPingSecrets`` filter cuts ping secrets from every record first. The
request's context (``request_id``, a task's name and id) is bound with
``structlog.contextvars`` by ``httpkit.access`` and the Celery signals in
``config.celery_logging``, and merged into every record of that request or task.

Imports no Django: gunicorn's master process uses it too (``config/gunicorn.py``).
"""

from __future__ import annotations

from typing import Any

import structlog

LOG_FORMATS = ("plain", "json")
PLAIN_LAYOUT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# Keys the plain layout prints itself (``asctime levelname name``) or places apart.
_PLAIN_OWN_KEYS = frozenset({"event", "timestamp", "level", "logger", "exception"})

# Run on every record that did not come through structlog (Django's, Celery's, gunicorn's,
# and Tidemark's modules that log with ``logging.getLogger``), so they carry what
# structlog's own records carry.
_FOREIGN_PRE_CHAIN = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def configure_structlog() -> None:
    """Route ``structlog.get_logger()`` records through the standard library's logging,
    so the handler ``logging_config`` sets up renders them with everything else.
    Idempotent; called by the settings (``config.settings.base``) and gunicorn's config."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.add_log_level,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def render_plain(_logger: Any, _method: str, event_dict: dict[str, Any]) -> str:
    """structlog renderer for the plain layout's ``%(message)s``: the event, then the
    other fields as ``key=value`` (sorted, values ``repr``-quoted when they hold a space),
    then the traceback (``exception``, from ``format_exc_info``) on the following lines."""
    parts = [str(event_dict.get("event", ""))]
    for key in sorted(k for k in event_dict if k not in _PLAIN_OWN_KEYS):
        value = event_dict[key]
        text = str(value)
        parts.append(f"{key}={text!r}" if (" " in text or not text) else f"{key}={text}")
    line = " ".join(parts)
    if event_dict.get("exception"):
        line += "\n" + event_dict["exception"]
    return line


def formatter(log_format: str) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` entry of the formatter for ``log_format``
    (``plain`` or ``json``).

    Raises:
        ValueError: for any other format.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}: {log_format!r}")
    meta = structlog.stdlib.ProcessorFormatter.remove_processors_meta
    if log_format == "json":
        processors = [
            meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=True),
        ]
        return {
            "()": structlog.stdlib.ProcessorFormatter,
            "processors": processors,
            "foreign_pre_chain": _FOREIGN_PRE_CHAIN,
        }
    return {
        "()": structlog.stdlib.ProcessorFormatter,
        "processors": [meta, structlog.processors.format_exc_info, render_plain],
        "foreign_pre_chain": _FOREIGN_PRE_CHAIN,
        "fmt": PLAIN_LAYOUT,
    }


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """The ``LOGGING`` dict (``logging.config.dictConfig`` schema) of every Tidemark
    process: the root logger at ``level`` (``INFO``, ``DEBUG``, ...) writing to standard
    error in ``log_format`` (``plain`` or ``json``), through the ping-secret filter.

    Raises:
        ValueError: for an unknown ``log_format``.
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"tidemark": formatter(log_format)},
        # A ping URL's UUID or key is a secret: logged paths keep its first 8 characters.
        "filters": {"ping_secrets": {"()": "httpkit.logsafe.RedactPingSecrets"}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "tidemark",
                "filters": ["ping_secrets"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        # httpx logs every request at INFO: one line per delivery attempt is noise.
        # axes logs every successful sign-in at INFO; its failures and lockouts are warnings.
        # django-environ says at INFO that there is no .env file, which is the norm.
        "loggers": {
            "environ": {"level": "WARNING"},
            "httpx": {"level": "WARNING"},
            "httpcore": {"level": "WARNING"},
            "axes": {"level": "WARNING"},
        },
    }
