"""The catalog's web pages: thin views that read through ``catalog.browse`` and the
selectors, write through the same services as the API, and show a service's problems as
form errors. Every page needs a signed-in person (``login_required``); what they may
change follows their team memberships (``catalog.browse.person_*``)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from problems import Problem

from .. import (
    browse,
    change_notices,
    errors,
    freshness,
    graph_layout,
    selectors,
    services,
    timeline,
)
from ..models import Dataset, Team
from .forms import (
    DatasetEditForm,
    DatasetFilterForm,
    SubscribeForm,
    TeamChoiceForm,
    add_problem,
    add_validation_error,
)

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


TIMELINE_PERIODS = 30
NEXT_DEADLINES = 3


@require_GET
@login_required
def dataset_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """A dataset: owner, completion signal, SLA in words with its next deadlines,
    freshness, the last 30 periods' timeline, consumers, lineage, change notices with
    their acknowledgements and the audit trail; its owners' edit form, and a form to
    subscribe one's team."""
    dataset = _dataset_or_404(dataset_id)
    return _dataset_response(request, dataset)


def _dataset_response(
    request: HttpRequest,
    dataset: Dataset,
    *,
    edit_form: DatasetEditForm | None = None,
    subscribe_form: SubscribeForm | None = None,
    endpoint_secret: str | None = None,
    status: int = 200,
) -> HttpResponse:
    now = timezone.now()
    memberships = browse.person_memberships(user=request.user)
    teams = [m.team.slug for m in memberships]
    is_owner = dataset.owner.slug in teams
    sla = freshness.sla_of(dataset)
    deadlines = []
    if sla is not None:
        zone = ZoneInfo(dataset.sla_timezone)
        at = now
        for _ in range(NEXT_DEADLINES):
            at = sla.next_deadline(at)
            deadlines.append((at, at.astimezone(zone).strftime("%a %Y-%m-%d %H:%M")))
    cells, picture = [], None
    if dataset.partitioning != Dataset.Partitioning.NONE:
        periods = timeline.last_periods(
            now, dataset.partitioning, dataset.partition_timezone, TIMELINE_PERIODS
        )
        keys = [p.key for p in periods]
        late = browse.timeline_late(dataset=dataset, keys=keys)
        cells = timeline.cells(
            periods,
            partitions=browse.timeline_partitions(dataset=dataset, since=periods[0].start),
            late_keys={k: row.recovered_at for k, row in late.items()},
            sla=sla,
            now=now,
        )
        picture = timeline.picture_size(len(cells))
    graph = selectors.lineage_graph(
        dataset=(dataset.namespace, dataset.name),
        include_unverified=request.GET.get("unverified") == "1",
    )
    notices = list(selectors.change_notice_list(dataset=dataset))
    consumer_slugs = set(
        selectors.dataset_consumer_teams(dataset=dataset).values_list("slug", flat=True)
    )
    for notice in notices:
        acknowledged = {a.team.slug for a in notice.acknowledgements.all()}
        notice.pending = sorted(consumer_slugs - acknowledged)
        notice.can_acknowledge = [t for t in teams if t in notice.pending]
    context = {
        "nav": "catalog",
        "dataset": dataset,
        "fresh": freshness.dataset_freshness(dataset, now=now),
        "deadlines": deadlines,
        "cells": cells,
        "picture": picture,
        "legend": timeline.WORDS,
        "consumers": browse.dataset_consumers(dataset=dataset),
        "lineage": graph_layout.layout(graph),
        "unverified": request.GET.get("unverified") == "1",
        "notices": notices,
        "audit": browse.audit_trail(dataset=dataset),
        "is_owner": is_owner,
        "edit_form": edit_form or (DatasetEditForm.for_dataset(dataset) if is_owner else None),
        "subscribe_form": subscribe_form or (SubscribeForm(teams=teams) if teams else None),
        "endpoint_secret": endpoint_secret,
    }
    return _render(request, "catalog/dataset.html", context, status=status)


@require_POST
@login_required
def dataset_edit(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """An owner changes the dataset through ``dataset_update`` (every API rule holds;
    its problems are shown on the form). Others get 403."""
    dataset = _dataset_or_404(dataset_id)
    membership = browse.person_team(user=request.user, slug=dataset.owner.slug)
    if membership is None:
        raise PermissionDenied(f"only members of team {dataset.owner.slug} edit {dataset}")
    form = DatasetEditForm.for_dataset(dataset, request.POST)
    if form.is_valid():
        try:
            services.dataset_update(
                actor=_actor(request, membership.team),
                dataset=dataset,
                override_reason=form.cleaned_data["override_reason"],
                **form.changes(),
            )
        except Problem as problem:
            add_problem(form, problem)
        except ValidationError as error:
            add_validation_error(form, error)
        else:
            messages.success(request, "Saved.")
            return redirect("web:dataset", dataset.pk)
    return _dataset_response(request, dataset, edit_form=form, status=400)


@require_POST
@login_required
def dataset_subscribe(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """One of the person's teams declares it reads the dataset (``subscription_create``).
    A new webhook endpoint's signing secret is shown once, on the page this answers."""
    dataset = _dataset_or_404(dataset_id)
    teams = [m.team for m in browse.person_memberships(user=request.user)]
    form = SubscribeForm(request.POST, teams=[t.slug for t in teams])
    if form.is_valid():
        team = next(t for t in teams if t.slug == form.cleaned_data["team"])
        try:
            result = services.subscription_create(
                actor=_actor(request, team),
                dataset=dataset,
                job_namespace=form.cleaned_data["job_namespace"],
                job_name=form.cleaned_data["job_name"],
                endpoint_url=form.cleaned_data["endpoint_url"],
            )
        except Problem as problem:
            add_problem(form, problem)
        else:
            verb = "subscribed to" if result.created else "updated its subscription to"
            messages.success(request, f"Team {team.slug} {verb} {dataset}.")
            for warning in result.warnings:
                messages.warning(request, warning.detail)
            if result.endpoint_secret:
                return _dataset_response(request, dataset, endpoint_secret=result.endpoint_secret)
            return redirect("web:dataset", dataset.pk)
    return _dataset_response(request, dataset, subscribe_form=form, status=400)


@require_POST
@login_required
def change_notice_acknowledge(
    request: HttpRequest, dataset_id: int, notice_id: int
) -> HttpResponse:
    """One of the person's teams, a consumer of the dataset, acknowledges a change notice
    (``change_notice_acknowledge``); a team that is not a consumer is refused (403)."""
    dataset = _dataset_or_404(dataset_id)
    try:
        notice = selectors.change_notice_get(dataset=dataset, notice_id=notice_id)
    except errors.ChangeNoticeNotFound as exc:
        raise Http404(exc.detail) from exc
    teams = [m.team for m in browse.person_memberships(user=request.user)]
    form = TeamChoiceForm(request.POST, teams=[t.slug for t in teams])
    if not form.is_valid():
        raise PermissionDenied("acknowledge for one of your own teams")
    team = next(t for t in teams if t.slug == form.cleaned_data["team"])
    try:
        _, created = change_notices.change_notice_acknowledge(
            actor=_actor(request, team), notice=notice, now=timezone.now()
        )
    except errors.NotAConsumer as problem:
        raise PermissionDenied(problem.detail) from problem
    if created:
        messages.success(request, f"Team {team.slug} acknowledged the {notice.get_kind_display()}.")
    return redirect(f"{reverse('web:dataset', args=[dataset.pk])}#notice-{notice.pk}")


def _actor(request: HttpRequest, team: Team) -> services.Actor:
    return services.Actor(team=team, username=request.user.get_username())


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
