"""The freshness status badge: an SVG for dashboards, no API key, an unguessable URL."""

from __future__ import annotations

from xml.sax.saxutils import escape

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from catalog import freshness_state
from catalog.models import Dataset

COLOURS = {
    "fresh": "#2e7d32",
    "awaiting": "#607d8b",
    "due": "#f9a825",
    "late": "#c62828",
    "no_sla": "#9e9e9e",
}
_CHAR_WIDTH = 7  # px per character of 11px Verdana, near enough for a badge


@require_safe
def freshness_badge(request: HttpRequest, token: str) -> HttpResponse:
    """``/badge/<token>.svg``: "freshness | late 2h" for the dataset holding ``token``."""
    dataset = Dataset.objects.filter(badge_token=token).first()
    if dataset is None:
        return HttpResponse(status=404)
    state = freshness_state.dataset_freshness(dataset, now=timezone.now())
    message = state.state.replace("_", " ")
    if state.late_seconds is not None:
        message += f" {_duration(state.late_seconds)}"
    svg = _svg("freshness", message, COLOURS[state.state])
    response = HttpResponse(svg, content_type="image/svg+xml")
    response["Cache-Control"] = "max-age=60"
    return response


def _duration(seconds: int) -> str:
    if seconds < 3600:
        return f"{max(seconds // 60, 1)}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _svg(label: str, message: str, colour: str) -> str:
    left, right = 10 + _CHAR_WIDTH * len(label), 10 + _CHAR_WIDTH * len(message)
    label, message = escape(label), escape(message)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + right}" height="20" '
        f'role="img" aria-label="{label}: {message}">'
        f'<rect width="{left}" height="20" fill="#555"/>'
        f'<rect x="{left}" width="{right}" height="20" fill="{colour}"/>'
        '<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="5" y="14">{label}</text><text x="{left + 5}" y="14">{message}</text>'
        "</g></svg>"
    )
