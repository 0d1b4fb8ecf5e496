"""Reads for the on-call pages, always through what an operator may see: the monitors whose
owner label is one of its labels (or every monitor for an operator with ``all_labels``).

Each read is a bounded number of queries, whatever the number of monitors, pings or
incidents: lists are paginated or capped and use the indexes made for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Case,
    Count,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Length, Substr

from .models import Incident, Monitor, Operator, Page, Ping, Run

# States shown to people (monitors.display_state): the stored ones plus grace.
DISPLAY_STATES = ["down", "grace", "up", "new", "paused"]
RECENT = 20
# A recent ping's body on the monitor's page: its start (a log line, an error's tail).
BODY_HEAD_CHARS = 300


def _visible(queryset: QuerySet, operator: Operator, owner_field: str = "owner") -> QuerySet:
    if operator.all_labels:
        return queryset
    return queryset.filter(**{f"{owner_field}__in": operator.labels})


def _in_grace(now: datetime, prefix: str = "") -> Q:
    """A deadline has passed but not its grace (as ``monitors.display_state``)."""
    return Q(
        **{
            f"{prefix}state__in": [Monitor.State.UP, Monitor.State.NEW],
            f"{prefix}deadline_at__lt": now,
            f"{prefix}check_at__gte": now,
        }
    )


def _state_filter(state: str, now: datetime) -> Q:
    if state == "grace":
        return _in_grace(now)
    if state in (Monitor.State.UP, Monitor.State.NEW):
        return Q(state=state) & ~_in_grace(now)
    return Q(state=state)


def monitor_labels(*, operator: Operator) -> list[str]:
    """The owner labels an operator can filter by: its own, or for ``all_labels`` every
    label in use (one index-only query over ``monitor_owner``)."""
    if not operator.all_labels:
        return sorted(operator.labels)
    owners = Monitor.objects.order_by("owner").values_list("owner", flat=True).distinct()
    return [owner for owner in owners if owner]


def monitor_list(
    *, operator: Operator, now: datetime, label: str = "", state: str = "", search: str = ""
) -> QuerySet[Monitor]:
    """The monitors an operator sees, down first, then by name; each annotated with
    ``open_incidents`` (a count, from the ``incident_open`` partial index).

    Args:
        label: only this owner label ("" for all the operator sees).
        state: only this shown state (one of ``DISPLAY_STATES``; grace is computed from
            ``now``), "" for all.
        search: a piece of the monitor's name, case-insensitive.

    Returns:
        An unevaluated queryset: paginate it (the caller slices it).
    """
    queryset = _visible(Monitor.objects.all(), operator)
    if label:
        queryset = queryset.filter(owner=label)
    if state in DISPLAY_STATES:
        queryset = queryset.filter(_state_filter(state, now))
    if search:
        queryset = queryset.filter(name__icontains=search[:200])
    open_count = (
        Incident.objects.filter(monitor=OuterRef("pk"), resolved_at__isnull=True)
        .order_by()
        .values("monitor")
        .annotate(n=Count("*"))
        .values("n")
    )
    return (
        queryset.only(
            "name",
            "owner",
            "kind",
            "system",
            "state",
            "deadline_at",
            "check_at",
            "last_ping_at",
            "last_ping_kind",
            "last_partition",
        )
        .annotate(
            open_incidents=Coalesce(Subquery(open_count, output_field=IntegerField()), 0),
            down_first=Case(When(state=Monitor.State.DOWN, then=Value(0)), default=Value(1)),
        )
        .order_by("down_first", "name", "id")
    )


def monitor_get(*, operator: Operator, monitor_id: int) -> Monitor | None:
    """The monitor with its channels, or None when it does not exist or the operator may
    not see it (the two are not told apart)."""
    return (
        _visible(Monitor.objects.prefetch_related("channels"), operator)
        .filter(pk=monitor_id)
        .first()
    )


@dataclass(frozen=True)
class MonitorActivity:
    """What happened lately to one monitor, newest first, at most ``RECENT`` of each."""

    pings: list[Ping]
    runs: list[Run]
    incidents: list[Incident]  # ``pages`` prefetched (channel selected), ``part_of`` selected


def monitor_activity(*, monitor: Monitor) -> MonitorActivity:
    """The monitor's recent pings (each with ``body_head``, its body's first
    ``BODY_HEAD_CHARS`` characters, and ``body_chars``, its length), runs and incidents
    with their pages (four queries)."""
    pings = list(
        Ping.objects.filter(monitor=monitor)
        .defer("body")
        .annotate(body_head=Substr("body", 1, BODY_HEAD_CHARS), body_chars=Length("body"))
        .order_by("-received_at")[:RECENT]
    )
    runs = list(Run.objects.filter(monitor=monitor).order_by("-started_at")[:RECENT])
    incidents = list(
        Incident.objects.filter(monitor=monitor)
        .order_by("-opened_at")
        .select_related("part_of__monitor", "held_under__monitor", "held_via__monitor")
        .prefetch_related(_pages())[:RECENT]
    )
    return MonitorActivity(pings=pings, runs=runs, incidents=incidents)


def _pages() -> Prefetch:
    return Prefetch(
        "pages", queryset=Page.objects.select_related("channel").order_by("created_at", "id")
    )


def incident_list(*, operator: Operator, resolved: bool, label: str = "") -> QuerySet[Incident]:
    """Incidents of the monitors an operator sees, newest first, with their monitor, pages
    and the incident each pages through (``part_of``): the open ones (``resolved=False``)
    or the resolved ones.

    Returns:
        An unevaluated queryset: slice it (open incidents are few; resolved ones are
        read a page at a time along the ``incident_recent`` index).
    """
    queryset = _visible(Incident.objects.all(), operator, owner_field="monitor__owner")
    if label:
        queryset = queryset.filter(monitor__owner=label)
    return (
        queryset.filter(resolved_at__isnull=not resolved)
        .select_related("monitor", "part_of__monitor", "held_under__monitor", "held_via__monitor")
        .prefetch_related(_pages())
        .order_by("-opened_at", "-id")
    )
