"""The watchdog's retention rules, on its own database (run by its loop at most every
``WATCHDOG_PRUNE["interval_seconds"]`` and by ``manage.py prune`` under
``config.settings.watchdog``; defaults in ``WATCHDOG_RETENTION``).

Never deleted: the newest ``pings_per_monitor`` pings of every monitor, pings younger
than ``pings_days`` (longer than the longest deadline window a judgement reads, a month
plus grace), the ping a monitor's newest met deadline counted, the pings of a monitor
with an open incident from ``pings_days`` before that incident's deadline, open runs,
open incidents and what pages for them, pages not yet sent.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from pruning.engine import Rule

from .models import Incident, LoginThrottle, Monitor, Page, PageGroup, Ping, Run


def _config() -> dict:
    return settings.WATCHDOG_RETENTION


def prunable_pings(now: datetime) -> QuerySet[Ping]:
    """Pings older than ``pings_days`` at ``now``, beyond their monitor's newest
    ``pings_per_monitor``, not the ping its newest met deadline counted, and not inside
    ``pings_days`` before the deadline of an open incident of their monitor."""
    days = timedelta(days=_config()["pings_days"])
    keep = max(1, _config()["pings_per_monitor"])
    # The received_at of the monitor's keep-th newest ping (NULL while it has fewer: then
    # the comparison is unknown and nothing is pruned).
    edge = (
        Ping.objects.filter(monitor_id=OuterRef("monitor_id"))
        .order_by("-received_at", "-id")
        .values("received_at")[keep - 1 : keep]
    )
    return (
        Ping.objects.filter(received_at__lt=now - days)
        .filter(received_at__lt=Subquery(edge))
        .exclude(
            Exists(
                Monitor.objects.filter(pk=OuterRef("monitor_id"), counted_ping_id=OuterRef("pk"))
            )
        )
        .exclude(
            Exists(
                Incident.objects.filter(
                    monitor_id=OuterRef("monitor_id"),
                    resolved_at__isnull=True,
                    deadline_at__lt=OuterRef("received_at") + days,
                )
            )
        )
    )


def prunable_runs(now: datetime) -> QuerySet[Run]:
    """Runs finished more than ``pings_days`` before ``now``; never open ones."""
    return Run.objects.filter(finished_at__lt=now - timedelta(days=_config()["pings_days"]))


def _quiet_since(now: datetime) -> datetime:
    return now - timedelta(days=_config()["incidents_days"])


def prunable_incidents(now: datetime) -> QuerySet[Incident]:
    """Incidents resolved more than ``incidents_days`` before ``now`` with no open part
    (an incident that pages for another), no open incident still held under them and no
    page still to send; their pages go with them."""
    return Incident.objects.filter(resolved_at__lt=_quiet_since(now)).exclude(
        Q(Exists(Incident.objects.filter(part_of_id=OuterRef("pk"), resolved_at__isnull=True)))
        # Deleting the upstream would null the hold, and the page would go out unreleased.
        | Q(
            Exists(
                Incident.objects.filter(
                    held_under_id=OuterRef("pk"),
                    released_at__isnull=True,
                    resolved_at__isnull=True,
                )
            )
        )
        | Q(Exists(Page.objects.filter(incident_id=OuterRef("pk"), state=Page.State.PENDING)))
    )


def prunable_group_pages(now: datetime) -> QuerySet[Page]:
    """Pages of a page group (no incident of their own) created more than
    ``incidents_days`` before ``now`` and no longer pending, once their group resolved."""
    return Page.objects.filter(
        incident__isnull=True, created_at__lt=_quiet_since(now), group__resolved_at__isnull=False
    ).exclude(state=Page.State.PENDING)


def prunable_page_groups(now: datetime) -> QuerySet[PageGroup]:
    """Page groups resolved more than ``incidents_days`` before ``now`` with no page
    left."""
    return PageGroup.objects.filter(resolved_at__lt=_quiet_since(now)).exclude(
        Exists(Page.objects.filter(group_id=OuterRef("pk")))
    )


def prunable_login_throttles(now: datetime) -> QuerySet[LoginThrottle]:
    """Failed sign-in counts whose window ended before ``now`` (they count for nothing)."""
    window = timedelta(seconds=settings.WATCHDOG_ONCALL["login_window_seconds"])
    return LoginThrottle.objects.filter(window_start__lte=now - window)


RULES = [
    Rule("pings", Ping, prunable_pings, keeps="each monitor's newest pings; what judges need"),
    Rule("runs", Run, prunable_runs, keeps="open runs"),
    Rule(
        "incidents",
        Incident,
        prunable_incidents,
        keeps="open incidents, those an open incident is part of or held under, unsent pages",
    ),
    Rule("group_pages", Page, prunable_group_pages, keeps="pending pages; open groups' pages"),
    Rule("page_groups", PageGroup, prunable_page_groups, keeps="groups with pages"),
    Rule("login_throttles", LoginThrottle, prunable_login_throttles, keeps="open windows"),
]
