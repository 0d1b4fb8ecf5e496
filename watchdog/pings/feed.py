"""Partitions a managing system reports ready with a monitor's definition: checked as a
ping's, recorded as success pings."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from problems import FieldError
from schedules import PartitionKeyError, parse_partition_key

from .. import db
from ..models import Monitor, Ping
from .applying import PING_FIELDS, apply_success
from .inputs import FUTURE_RULE, PingRejected
from .partitions import checked_partition

# How a partition fed with a managing system's definition shows in the ping history.
FEED_METHOD = "FEED"
FEED_USER_AGENT = "definition ready_partitions"


def ready_partition_problems(
    monitor: Monitor, partitions: list[str], *, now: datetime
) -> list[FieldError]:
    """What is wrong with ``partitions`` fed to ``monitor`` with its definition: they need
    a deadline monitor with a partition rule, and each must be a key of that rule whose
    period has started by ``now`` plus the clock-skew allowance (as a ping's, rule
    ``partition_started``).

    Returns:
        One FieldError per broken rule, naming ``ready_partitions`` or
        ``ready_partitions.N``; empty when none.
    """
    if not partitions:
        return []
    if monitor.kind != Monitor.Kind.DEADLINE or not monitor.partitioning:
        return [
            FieldError(
                "ready_partitions",
                "only a deadline monitor with partitioning expects partitions",
                "partitioned_deadline_only",
            )
        ]
    problems = []
    for index, key in enumerate(partitions):
        try:
            parse_partition_key(monitor.partitioning, key, monitor.partition_timezone)
            checked_partition(monitor, key, now=now)
        except PartitionKeyError as exc:
            problems.append(FieldError(f"ready_partitions.{index}", str(exc), "partition_key"))
        except PingRejected as exc:
            problems.append(FieldError(f"ready_partitions.{index}", str(exc), FUTURE_RULE))
    return problems


def record_ready(monitor: Monitor, partitions: list[str], *, now: datetime) -> list[str]:
    """Record a success ping for each of ``partitions`` that has none yet, as if each had
    been pinged with ``?partition=`` now (the partitions a managing system reports ready
    when it defines the monitor), in the caller's transaction.

    Idempotent: a partition with a success ping already is left alone, so a definition
    sent again records nothing twice. Not counted against the ping rate (the list is
    bounded by the API).

    Args:
        monitor: a partitioned deadline monitor (``ready_partition_problems`` passed).
        partitions: partition keys of its partitioning, any order.
        now: aware UTC; the pings' ``received_at``.

    Returns:
        The keys newly recorded, oldest first.
    """
    if not partitions:
        return []
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().get(pk=monitor.pk)
        pinged = set(
            Ping.objects.filter(
                monitor=monitor, kind=Ping.Kind.SUCCESS, partition__in=partitions
            ).values_list("partition", flat=True)
        )
        new = sorted(set(partitions) - pinged)
        if not new:
            return []
        Ping.objects.bulk_create(
            [
                Ping(
                    monitor=monitor,
                    kind=Ping.Kind.SUCCESS,
                    partition=key,
                    received_at=now,
                    method=FEED_METHOD,
                    user_agent=FEED_USER_AGENT,
                )
                for key in new
            ],
            ignore_conflicts=True,  # the partial unique index on (monitor, partition)
        )
        monitor.last_ping_at, monitor.last_ping_kind = now, Ping.Kind.SUCCESS
        for key in new:
            apply_success(monitor, key, now=now)
        monitor.save(update_fields=PING_FIELDS)
    return new
