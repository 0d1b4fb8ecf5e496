"""What a page says: its summary and details, its links, its severity and the tail of the
failing ping's body, in the words each receiving system takes.

Pure shaping over rows already loaded, plus one indexed read (the failing ping). Each
system's escaping is ``outbound``'s: ``pagerduty`` (one-line summary, JSON details, links
to http(s) addresses only), ``slack`` (every piece escaped, links and blocks built there)
and ``mail``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from outbound import pagerduty, slack
from outbound.text import plain_lines

from .models import Incident, Monitor, Page, Ping

# The failing ping's body is sent as its last this many characters (a job's output ends
# with the error that failed it).
BODY_TAIL_CHARS = 1000
CLIENT = "Tidemark watchdog"
# A group page (a flood after an outage) is as urgent as the most urgent page can be.
GROUP_SEVERITY = Monitor.Severity.CRITICAL


@dataclass(frozen=True)
class Subject:
    """What a page is about: an incident, or a group of them."""

    summary: str
    dedup_key: str
    opened_at: datetime
    component: str
    group: str
    kind: str
    details: dict
    severity: str


def subject(page: Page, *, with_failing_ping: bool = False) -> Subject:
    """The page's subject: its incident's (or group's) summary, PagerDuty labels, severity
    and details as JSON values.

    Args:
        with_failing_ping: on a trigger about an incident, add ``failing_ping`` to the
            details (``failing_ping_details``) when ``failing_ping`` finds one (one query).
    """
    if page.incident is None:
        group = page.group
        return Subject(
            summary=group.summary,
            dedup_key=group.dedup_key,
            opened_at=group.opened_at,
            component="tidemark-watchdog",
            group="tidemark",
            kind="grouped",
            details={"monitors": group.monitors, "count": len(group.monitors)},
            severity=GROUP_SEVERITY,
        )
    incident = page.incident
    monitor = incident.monitor
    details = {
        "monitor": monitor.name,
        "owner": monitor.owner,
        "reason": incident.reason,
        "deadline_at": incident.deadline_at.isoformat(),
        "partition": incident.partition or None,
        "last_ping_at": monitor.last_ping_at.isoformat() if monitor.last_ping_at else None,
    }
    wanted = with_failing_ping and page.action == Page.Action.TRIGGER
    if wanted and (ping := failing_ping(incident)) is not None:
        details["failing_ping"] = failing_ping_details(ping)
    if incident.held_under_id is not None and incident.released_at is not None:
        details["held_under"] = held_details(incident)
    return Subject(
        summary=incident.summary,
        dedup_key=incident.dedup_key,
        opened_at=incident.opened_at,
        component=monitor.name,
        group=monitor.owner or "tidemark",
        kind=incident.reason,
        details=details,
        severity=monitor.severity or Monitor.Severity.CRITICAL,
    )


def held_details(incident: Incident) -> dict:
    """What a released page waited under, as JSON values (one query for the root incident
    and its monitor, one more for a chain): its ``monitor``, ``partition``,
    ``resolved_at`` (ISO 8601, or None while it is open: released because its page
    reaches nobody, or because the direct upstream recovered first), and this incident's
    ``held_at`` and ``released_at``; in a chain (held under a root through a direct
    upstream's incident), ``via``: that incident's ``monitor``, ``partition`` and
    ``resolved_at``."""
    upstream = Incident.objects.select_related("monitor").get(pk=incident.held_under_id)
    details = {
        "monitor": upstream.monitor.name,
        "partition": upstream.partition or None,
        "resolved_at": upstream.resolved_at.isoformat() if upstream.resolved_at else None,
        "held_at": incident.held_at.isoformat() if incident.held_at else None,
        "released_at": incident.released_at.isoformat(),
    }
    if incident.held_via_id is not None and incident.held_via_id != incident.held_under_id:
        via = Incident.objects.select_related("monitor").get(pk=incident.held_via_id)
        details["via"] = {
            "monitor": via.monitor.name,
            "partition": via.partition or None,
            "resolved_at": via.resolved_at.isoformat() if via.resolved_at else None,
        }
    return details


def failing_ping(incident: Incident) -> Ping | None:
    """The fail ping behind ``incident``: its monitor's latest success or fail ping
    received by the time the incident opened, when that one is a fail (a success since
    means the failure was not what the page is about). None otherwise."""
    latest = (
        Ping.objects.filter(
            monitor_id=incident.monitor_id,
            kind__in=(Ping.Kind.SUCCESS, Ping.Kind.FAIL),
            received_at__lte=incident.opened_at,
        )
        .order_by("-received_at", "-id")
        .first()
    )
    return latest if latest is not None and latest.kind == Ping.Kind.FAIL else None


def body_tail(ping: Ping) -> str:
    """The last ``BODY_TAIL_CHARS`` characters of the ping's body as plain lines (control
    characters dropped, ``outbound.text.plain_lines``); ``""`` for an empty body."""
    return plain_lines(ping.body[-BODY_TAIL_CHARS:]).strip("\n")


def failing_ping_details(ping: Ping) -> dict:
    """The failing ping as JSON values: ``received_at`` (ISO 8601), ``exit_status`` (or
    None), ``run_id`` (or None), ``body_tail`` (``body_tail``)."""
    return {
        "received_at": ping.received_at.isoformat(),
        "exit_status": ping.exit_status,
        "run_id": ping.run_id or None,
        "body_tail": body_tail(ping),
    }


def oncall_url(page: Page) -> str | None:
    """Where on-call sees what the page is about, on the watchdog's own server
    (``WATCHDOG_PUBLIC_URL``): the monitor's page, or the incident list for a group."""
    base = settings.WATCHDOG_PUBLIC_URL.rstrip("/")
    try:
        if page.incident is None:
            path = reverse("oncall:incident-list")
        else:
            path = reverse("oncall:monitor-detail", args=[page.incident.monitor_id])
    except NoReverseMatch:  # a deployment without the on-call pages
        return None
    return f"{base}{path}" if base else None


def links(page: Page) -> list[tuple[str, str]]:
    """``(href, text)`` a page links to: the monitor's own links (a catalog-fed monitor:
    its dataset's page), then the on-call page (``oncall_url``), if known."""
    found = []
    if page.incident is not None:
        for entry in page.incident.monitor.links or []:
            if isinstance(entry, dict) and pagerduty.web_address(entry.get("href", "")):
                found.append((entry["href"], entry.get("text") or entry["href"]))
    url = oncall_url(page)
    if url:
        found.append((url, "On-call page" if page.incident else "Open incidents (on-call)"))
    return found


def _held_ended(held: dict) -> str:
    """Why a hold ended, in words, from ``held_details``."""
    if held["resolved_at"]:
        return f"that incident resolved at {held['resolved_at']}"
    via = held.get("via")
    if via is not None and via["resolved_at"]:
        return (
            f"the incident of {via['monitor']} (partition {via['partition'] or '-'}), "
            f"through which it waited, resolved at {via['resolved_at']}"
        )
    return "that incident stopped paging"


def words(page: Page) -> tuple[str, str]:
    """(subject, text) in plain text; the text ends with the on-call page, if known."""
    summary = page.incident.summary if page.incident is not None else page.group.summary
    if page.action == Page.Action.RESOLVE:
        title, text = f"[resolved] {summary}", f"Resolved: {summary}"
    else:
        title, text = f"[down] {summary}", summary
        incident = page.incident
        if incident is not None and incident.held_under_id and incident.released_at:
            held = held_details(incident)
            text += (
                f"\n\nHeld under the incident of {held['monitor']} (partition "
                f"{held['partition'] or '-'}) from {held['held_at']}; still missing at "
                f"{held['released_at']}, after {_held_ended(held)}."
            )
    url = oncall_url(page)
    return title, f"{text}\n\nOn-call page: {url}" if url else text


def slack_text(page: Page) -> str:
    """The Slack fallback text: the subject escaped, and a link to the on-call page
    labelled with the monitor's name (escaped as well: ``outbound.slack``)."""
    icon = ":white_check_mark:" if page.action == Page.Action.RESOLVE else ":rotating_light:"
    title, _ = words(page)
    text = f"{icon} {slack.escape_text(title)}"
    url = oncall_url(page)
    if url:
        label = "open incidents" if page.incident is None else page.incident.monitor.name
        text += f" ({slack.link(url, label)})"
    return text


def slack_blocks(page: Page, about: Subject) -> list[dict]:
    """The Slack message's blocks: a section with the subject (escaped), on a trigger
    the failing ping's body tail as a preformatted section, and a context block with
    the page's ``links`` (built by ``outbound.slack.link``: labels escaped, addresses
    kept one link each)."""
    icon = ":white_check_mark:" if page.action == Page.Action.RESOLVE else ":rotating_light:"
    title, _ = words(page)
    blocks = [slack.section(f"{icon} *{slack.escape_text(title)}*")]
    ping = about.details.get("failing_ping")
    if ping and ping["body_tail"]:
        status = ping["exit_status"]
        heading = f"Last failing ping, {ping['received_at']}" + (
            f", exit status {status}" if status is not None else ""
        )
        blocks.append(
            slack.section(f"{slack.escape_text(heading)}:\n{slack.code_block(ping['body_tail'])}")
        )
    shown = [slack.link(href, text) for href, text in links(page)]
    if shown:
        blocks.append(slack.context(shown))
    return blocks
