"""The catalog's web pages: thin views that read through ``catalog.browse`` and the
selectors, write through the same services as the API, and show a service's problems as
form errors. Every page needs a signed-in person (``login_required``); what they may
change follows their team memberships (``catalog.browse.person_*``)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from .. import browse, errors, freshness, selectors
from ..models import Dataset
from .forms import DatasetFilterForm

PAGE_SIZE = 50


def _render(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    """Render a page with what the layout needs (the person's teams for the navigation)."""
    context = {"user_memberships": browse.person_memberships(user=request.user), **context}
    return render(request, template, context, status=status)


@require_GET
@login_required
def dataset_list_page(request: HttpRequest) -> HttpResponse:
    """The catalog: datasets filtered and searched, 50 a page, each with its freshness
    badge and latest ready partition. With htmx (``HX-Request``) only the table is sent."""
    form = DatasetFilterForm(
        request.GET, teams=browse.team_choices(), namespaces=browse.namespace_choices()
    )
    filters = form.cleaned_data if form.is_valid() else {}
    now = timezone.now()
    queryset = browse.dataset_rows(
        owner=filters.get("team") or None,
        namespace=filters.get("namespace") or None,
        criticality=filters.get("criticality") or None,
        lifecycle=filters.get("lifecycle") or None,
        freshness_state=filters.get("freshness") or None,
        search=filters.get("q") or None,
        now=now,
    )
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page.object_list)
    states = browse.rows_freshness(rows, now=now)
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "nav": "catalog",
        "form": form,
        "page": page,
        "rows": [(d, states[d.pk]) for d in rows],
        "query": query.urlencode(),
    }
    if request.headers.get("HX-Request"):
        return render(request, "catalog/_dataset_table.html", context)
    return _render(request, "catalog/dataset_list.html", context)


@require_GET
@login_required
def dataset_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """A dataset: who owns it, its SLA and freshness."""
    dataset = _dataset_or_404(dataset_id)
    fresh = freshness.dataset_freshness(dataset, now=timezone.now())
    return _render(
        request, "catalog/dataset.html", {"nav": "catalog", "dataset": dataset, "fresh": fresh}
    )


def _dataset_or_404(dataset_id: int) -> Dataset:
    try:
        return selectors.dataset_get_by_id(dataset_id=dataset_id)
    except errors.DatasetNotFound as exc:
        raise Http404(exc.detail) from exc


@require_GET
@login_required
def team_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's page, for its members only (404 for others)."""
    membership = browse.person_team(user=request.user, slug=slug)
    if membership is None:
        raise Http404(f"you are not a member of team {slug!r}")
    return _render(request, "catalog/team.html", {"nav": "team", "team": membership.team})


@require_GET
@login_required
def governance_page(request: HttpRequest) -> HttpResponse:
    """The governance reports."""
    return _render(request, "catalog/governance.html", {"nav": "governance"})
