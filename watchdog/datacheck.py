"""The optional storage check at a deadline: before paging for a partition with no ping,
look for its success marker in storage; if the data landed, the deadline is met.

A monitor names a source defined by operators (``WATCHDOG_STORAGE_SOURCES``, the
watchdog's own setting) and a template relative to its root (``sales/orders/dt={partition}/``),
so no API caller can make the watchdog read an arbitrary URL or path. A check is one
``HeadObject`` (S3) or ``info`` call with short timeouts, since it runs while the loop holds
its due monitors locked. When the store cannot answer, the deadline is judged as if there
were no check (the incident opens), a warning is logged, and that source is left alone for
``QUIET_AFTER_ERROR_SECONDS``.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.conf import settings

import objectstore
from problems import REQUIRED_DETAIL, FieldError, invalid_choice

from .models import Monitor, Ping

logger = logging.getLogger(__name__)

_REQUIRED = REQUIRED_DETAIL.rstrip(".")  # "This field is required", then when

# Shorter than the poll's (objectstore.S3_CLIENT_CONFIG): at most 2 x (3 + 5) s per check.
# A source's ``options["config_kwargs"]`` overrides any of these keys.
S3_CHECK_CONFIG = {
    "connect_timeout": 3,
    "read_timeout": 5,
    "retries": {"mode": "standard", "total_max_attempts": 2},
}
# After a source fails to answer, its checks are skipped this long (seconds, monotonic), so
# a dead store costs one timeout per minute, not one per deadline due.
QUIET_AFTER_ERROR_SECONDS = 60.0
# How a success recorded by the check shows in the monitor's ping history.
CHECK_METHOD = "CHECK"
CHECK_USER_AGENT = "watchdog storage check"

# Source name -> monotonic time until which it is not asked (this process only).
_quiet_until: dict[str, float] = {}


def partition_landed(monitor: Monitor, partition: str) -> bool | None:
    """Whether ``partition``'s success marker is in storage.

    Looks for ``<source root>/<storage_template with {partition}>/<storage_marker>`` with
    one call.

    Args:
        monitor: a monitor; its ``storage_source``, ``storage_template`` and
            ``storage_marker`` are read (and ``name``, for the log).
        partition: a partition key of the monitor's partitioning (``2026-11-28``).

    Returns:
        True when the marker exists, False when it does not; None when the monitor has no
        storage check, or it could not be made (the source is not configured or not valid,
        the store did not answer, or it failed less than ``QUIET_AFTER_ERROR_SECONDS``
        ago). Never raises: a store error is logged as a warning.
    """
    name = monitor.storage_source
    if not (name and monitor.storage_template and partition):
        return None
    if _quiet_until.get(name, 0.0) > time.monotonic():
        return None
    try:
        relative = marker_path(monitor, partition)
        found = objectstore.Lister(_source(name)).exists(relative)
    except objectstore.TemplateError as exc:
        logger.warning("storage check of %s: template not valid: %s", monitor.name, exc)
        return None
    except Exception as exc:  # StorageError, or a malformed source entry: never fatal
        _quiet_until[name] = time.monotonic() + QUIET_AFTER_ERROR_SECONDS
        logger.warning(
            "storage check of %s (partition %s) failed; judged without it: %s",
            monitor.name,
            partition,
            exc,
        )
        return None
    return found


def record_landed(monitor: Monitor, partition: str, *, now: datetime) -> Ping:
    """Record that the check found ``partition``: a success ping (``method`` ``CHECK``) in
    the monitor's history, so the deadline's judgement sees it, and the monitor's success
    fields (in memory: the caller saves ``state``, ``last_success_at`` and
    ``last_partition``).

    Args:
        monitor: the monitor, locked by the caller.
        partition: the partition key whose marker was found.
        now: aware UTC; the ping's ``received_at``.

    Returns:
        The ping row.
    """
    ping = Ping.objects.create(
        monitor=monitor,
        kind=Ping.Kind.SUCCESS,
        partition=partition,
        received_at=now,
        method=CHECK_METHOD,
        user_agent=CHECK_USER_AGENT,
        body=f"{monitor.storage_marker} found at {monitor.storage_source}:"
        f"{marker_path(monitor, partition)}",
    )
    monitor.last_success_at = now
    if partition > monitor.last_partition:
        monitor.last_partition = partition
    if monitor.state == Monitor.State.NEW:
        monitor.state = Monitor.State.UP
    return ping


def marker_path(monitor: Monitor, partition: str) -> str:
    """The marker's path relative to the source's root: ``sales/orders/dt=2026-11-28/_SUCCESS``
    for ``sales/orders/dt={partition}/`` and ``_SUCCESS``.

    Raises:
        objectstore.TemplateError: the monitor's template breaks a rule.
    """
    location = objectstore.parse_template(monitor.storage_template, partitioned=True)
    return (
        f"{location.parent}{location.segment_for(partition)}/{location.inner}"
        f"{monitor.storage_marker}"
    )


def definition_problems(monitor: Monitor) -> list[FieldError]:
    """What is wrong with the monitor's storage check fields.

    Rules: ``storage_source`` names a ``WATCHDOG_STORAGE_SOURCES`` entry; source and
    ``storage_template`` come together, on a deadline monitor with ``partitioning``; the
    template is relative with ``{partition}`` exactly once (``objectstore.parse_template``);
    ``storage_marker`` is one file name (no ``/``, ``.``, ``..``, glob or control
    characters), required with a check.

    Returns:
        One FieldError per broken rule; empty when none.
    """
    problems: list[FieldError] = []
    source, template, marker = (
        monitor.storage_source,
        monitor.storage_template,
        monitor.storage_marker,
    )
    if marker and not _is_file_name(marker):
        problems.append(
            FieldError(
                "storage_marker",
                "must be one file name: no '/', '.' or '..', braces, glob or control characters",
                "file_name",
            )
        )
    if not (source or template):
        return problems
    if not source:
        problems.append(
            FieldError("storage_source", f"{_REQUIRED} with storage_template.", "required")
        )
    elif source not in settings.WATCHDOG_STORAGE_SOURCES:
        configured = sorted(settings.WATCHDOG_STORAGE_SOURCES)
        problems.append(
            invalid_choice("storage_source", source, configured)
            if configured
            else FieldError(
                "storage_source",
                f"unknown storage source {source!r}: no storage source is configured "
                "(WATCHDOG_STORAGE_SOURCES)",
                "configured_source",
            )
        )
    if not template:
        problems.append(
            FieldError("storage_template", f"{_REQUIRED} with storage_source.", "required")
        )
    else:
        try:
            objectstore.parse_template(template, partitioned=True)
        except objectstore.TemplateError as exc:
            problems.append(FieldError("storage_template", str(exc), "location_template"))
    if not marker:
        problems.append(
            FieldError("storage_marker", f"{_REQUIRED} with a storage check.", "required")
        )
    if monitor.kind != Monitor.Kind.DEADLINE or not monitor.partitioning:
        problems.append(
            FieldError(
                "storage_source",
                "a storage check needs a deadline monitor with partitioning",
                "partitioned_deadline_only",
            )
        )
    return problems


def _is_file_name(name: str) -> bool:
    """One path segment that a location template could hold (``objectstore`` rules)."""
    if "/" in name:
        return False
    try:
        objectstore.parse_template(name, partitioned=False)
    except objectstore.TemplateError:
        return False
    return True


def _source(name: str) -> objectstore.Source:
    """The watchdog's source ``name``, with the check's S3 timeouts under its own options.

    Raises:
        objectstore.StorageError: not configured, malformed, or its protocol not allowed.
    """
    spec = settings.WATCHDOG_STORAGE_SOURCES.get(name)
    if spec is None:
        raise objectstore.StorageError(f"storage source {name!r} is not configured")
    source = objectstore.parse_source(
        name,
        spec,
        allowed=settings.WATCHDOG_STORAGE_PROTOCOLS,
        protocols_setting="WATCHDOG_STORAGE_PROTOCOLS",
    )
    if source.protocol != "s3":
        return source
    options = dict(source.options)
    options["config_kwargs"] = {**S3_CHECK_CONFIG, **(options.get("config_kwargs") or {})}
    return objectstore.Source(
        name=source.name, protocol=source.protocol, root=source.root, options=options
    )
