"""The team page's endpoint actions and each endpoint's delivery log: enable a disabled
endpoint, recover its failed deliveries since a time, and read every attempt made to it.
Members of the owning team only (404 for others), as the dead-letter replays."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from httpkit.methods import post_only

from .. import errors, recovery, selectors
from ..models import Endpoint
from ..services import endpoints
from .forms import EndpointRecoverForm
from .views import LAYOUT, PAGE_SIZE, _member_or_404, _render, _to_team


def _team_endpoint(request: HttpRequest, slug: str, endpoint_id: int) -> Endpoint:
    team = _member_or_404(request, slug).team
    try:
        return selectors.endpoint_get(team=team, endpoint_id=endpoint_id)
    except errors.EndpointNotFound as exc:
        raise Http404(exc.detail) from exc


def _back_to_deliveries(slug: str) -> HttpResponse:
    return redirect(f"{reverse('web:team', args=[slug])}#deliveries")


@post_only(what="Enabling an endpoint", back=_to_team, layout=LAYOUT)
@login_required
def endpoint_enable(request: HttpRequest, slug: str, endpoint_id: int) -> HttpResponse:
    """Enable one of the team's disabled endpoints (``endpoint_enable``); what waited
    while it was disabled is sent."""
    endpoint = _team_endpoint(request, slug, endpoint_id)
    endpoints.endpoint_enable(endpoint=endpoint, now=timezone.now())
    messages.success(
        request,
        f"{endpoint.url} is enabled; what waited is being sent. Recover its failed "
        "deliveries to send them too.",
    )
    return _back_to_deliveries(slug)


@post_only(what="Recovering an endpoint's failed deliveries", back=_to_team, layout=LAYOUT)
@login_required
def endpoint_recover(request: HttpRequest, slug: str, endpoint_id: int) -> HttpResponse:
    """Send again every failed delivery to one of the team's endpoints since the form's
    time (``endpoint_recover``); its refusals (a disabled endpoint, a time out of the
    window) are shown as messages on the team page."""
    endpoint = _team_endpoint(request, slug, endpoint_id)
    form = EndpointRecoverForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Recover: {' '.join(form.errors.get('since', []))}")
        return _back_to_deliveries(slug)
    try:
        recovered = recovery.endpoint_recover(
            endpoint=endpoint, since=form.cleaned_data["since"], now=timezone.now()
        )
    except (errors.EndpointDisabled, errors.RecoverSinceOutOfRange) as problem:
        messages.error(request, problem.detail)
    else:
        plural = "y" if recovered.queued == 1 else "ies"
        left = (
            f" {recovered.remaining} more failed since then: recover again to send them."
            if recovered.remaining
            else ""
        )
        messages.success(
            request, f"{recovered.queued} failed deliver{plural} will be sent again.{left}"
        )
    return _back_to_deliveries(slug)


@require_GET
@login_required
def endpoint_attempts(request: HttpRequest, slug: str, endpoint_id: int) -> HttpResponse:
    """One of the team's endpoints' delivery log: every attempt, newest first, 50 a page;
    ``?outcome=failed`` (or succeeded, retry, rejected, gone) narrows it."""
    endpoint = _team_endpoint(request, slug, endpoint_id)
    outcome = request.GET.get("outcome") or None
    if outcome not in (None, *selectors.ATTEMPT_OUTCOMES):
        outcome = None  # an unknown filter shows everything rather than nothing
    attempts = selectors.delivery_attempt_list(endpoint=endpoint, outcome=outcome)
    page = Paginator(attempts, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "nav": "team",
        "team": endpoint.team,
        "endpoint": endpoint,
        "page": page,
        "outcome": outcome or "",
        "outcomes": selectors.ATTEMPT_OUTCOMES,
    }
    return _render(request, "catalog/endpoint_attempts.html", context)
