"""Celery's processes log as every other Tidemark process, and a task's log lines carry
the id of the request that enqueued it.

- ``setup_logging``: with a receiver connected, Celery neither replaces the root logger's
  handlers (``worker_hijack_root_logger``) nor applies ``-l``; the receiver applies
  Django's ``LOGGING`` (``httpkit.logs``: plain or JSON, ``TIDEMARK_LOG_LEVEL``) in
  workers and beat alike.
- ``before_task_publish``: in the publishing process (a web request's doorbell, or a task
  ringing again), the request id bound in structlog's context goes into the message's
  headers as ``tidemark_request_id``. Messages published outside a request (beat's
  schedule, the doorbell's coalescing thread) carry none.
- ``task_prerun`` / ``task_postrun``: in the worker, the task's name, its id and that
  request id (when the message has one) are bound for every record the task logs, and
  cleared after it.

Loaded by ``config.celery``, so only processes that load Celery connect these.
"""

from __future__ import annotations

import structlog
from celery.signals import before_task_publish, setup_logging, task_postrun, task_prerun

from httpkit.access import accepted_request_id

HEADER = "tidemark_request_id"


@setup_logging.connect
def apply_django_logging(**_kwargs) -> None:
    """Configure logging from Django's ``LOGGING`` instead of Celery's own setup."""
    from django.conf import settings
    from django.utils.log import configure_logging

    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)


@before_task_publish.connect
def add_request_id_header(headers: dict | None = None, **_kwargs) -> None:
    """Put the request id bound in this context (if any) in the outgoing task's headers."""
    request_id = structlog.contextvars.get_contextvars().get("request_id")
    if request_id and headers is not None:
        headers.setdefault(HEADER, request_id)


@task_prerun.connect
def bind_task_context(task_id: str | None = None, task=None, **_kwargs) -> None:
    """Bind the task's name, id and the enqueuing request's id for the task's records."""
    structlog.contextvars.clear_contextvars()
    context = {"task": getattr(task, "name", None), "task_id": task_id}
    request_id = accepted_request_id(_header(task))
    if request_id:
        context["request_id"] = request_id
    structlog.contextvars.bind_contextvars(**context)


@task_postrun.connect
def clear_task_context(**_kwargs) -> None:
    """Forget the finished task's context, so the worker's own records carry none."""
    structlog.contextvars.clear_contextvars()


def _header(task) -> str | None:
    request = getattr(task, "request", None)
    value = request.get(HEADER) if request is not None else None
    return value if isinstance(value, str) else None
