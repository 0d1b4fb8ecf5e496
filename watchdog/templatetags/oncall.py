"""Small tags for the on-call pages, in Python rather than included templates: a monitors
page renders a few hundred of them, and an ``{% include %}`` costs many times a tag."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil

register = template.Library()


@register.simple_tag
def when(at: datetime | None, now: datetime):
    """``2026-11-30 05:30 (in 3 hours)``: an aware datetime shown in UTC, with how long ago
    or until, relative to ``now``; a dash for None."""
    if at is None:
        return mark_safe('<span class="muted">&ndash;</span>')
    utc = at.astimezone(UTC)
    relative = f"in {timeuntil(at, now)}" if at > now else f"{timesince(at, now)} ago"
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time> <span class="muted">({})</span>',
        utc.isoformat(),
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        utc.strftime("%Y-%m-%d %H:%M"),
        relative,
    )


@register.simple_tag
def state(name: str):
    """A monitor's shown state as a coloured badge."""
    return format_html('<span class="state state-{}">{}</span>', name, name)


@register.simple_tag
def pages(incident):
    """``_pages``, after what the incident's page is held under, if it is (``held``)."""
    listed = _pages(incident)
    if incident.held_under_id is None:
        return listed
    return format_html("{}{}", held(incident), listed)


def _pages(incident):
    """An incident's pages (prefetched), one line each: action, channel, state, attempts,
    when sent and the last error; for an incident paged through another (``part_of``,
    selected with its monitor), which one; for one whose page was held under an upstream's
    incident (``held_under``, selected with its monitor), which one and until when."""
    rows = []
    for page in incident.pages.all():
        sent = f", sent {page.sent_at.astimezone(UTC):%Y-%m-%d %H:%M}" if page.sent_at else ""
        error = (
            format_html(' <span class="muted">({})</span>', Truncator(page.last_error).chars(80))
            if page.last_error
            else ""
        )
        rows.append(
            format_html(
                "<li>{} to {}: <strong>{}</strong>, {} attempt{}{}{}</li>",
                page.action,
                page.channel.name,
                page.state,
                page.attempts,
                "" if page.attempts == 1 else "s",
                sent,
                error,
            )
        )
    if not rows and incident.part_of_id is not None:
        # One cause, one page: it pages through the incident of that cause (its monitor
        # and the cause selected with it), which the page names so it does not read as
        # an incident nobody was paged for.
        cause = incident.part_of
        whose = "this monitor" if cause.monitor_id == incident.monitor_id else cause.monitor.name
        return format_html(
            '<span class="muted">paged through the incident of {} opened {} UTC ({})</span>',
            whose,
            cause.opened_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M"),
            cause.get_reason_display(),
        )
    if not rows:
        return mark_safe('<span class="muted">no pages</span>')
    return format_html(
        '<ul class="pages">{}</ul>', format_html_join("", "{}", ((r,) for r in rows))
    )


def held(incident):
    """What an incident's page was held under: one late root, one page (``holds``); in a
    chain, also the direct upstream it is held through (``held_via``)."""
    upstream = incident.held_under
    since = incident.held_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if incident.held_at else ""
    if incident.released_at is not None:
        state = f"released {incident.released_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    elif incident.resolved_at is not None:
        state = "resolved while held: never sent"
    else:
        state = "held: its owners are told, not paged, while that incident is open"
    via = incident.held_via
    through = (
        format_html(", through {} (partition {})", via.monitor.name, via.partition or "-")
        if via is not None and via.pk != upstream.pk
        else ""
    )
    return format_html(
        '<p class="held"><strong>Held under</strong> the incident of {} (partition {}, '
        "opened {} UTC){} since {} UTC; {}</p>",
        upstream.monitor.name,
        upstream.partition or "-",
        upstream.opened_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M"),
        through,
        since,
        state,
    )
