"""The catalog's web pages: thin views that read through ``catalog.browse`` and the
selectors, write through the same services as the API, and show a service's problems as
form errors. Every page needs a signed-in person (``login_required``); what they may
change follows their team memberships (``catalog.browse.person_*``)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from httpkit.methods import post_only
from problems import Problem
from schedules import as_read

from .. import (
    arrival_profiles,
    browse,
    change_notices,
    endpoint_actions,
    errors,
    freshness_state,
    graph_layout,
    selectors,
    sla_schedule,
    timeline,
)
from ..actors import Actor
from ..models import Dataset, Membership, Team
from ..services import datasets, subscriptions
from ..services import teams as team_services
from . import audit
from .forms import (
    ApiKeyCreateForm,
    DatasetEditForm,
    DatasetFilterForm,
    SubscribeForm,
    TeamChoiceForm,
    add_problem,
    add_validation_error,
)

PAGE_SIZE = 50


LAYOUT = "base.html"  # the catalog's pages' layout (its navigation) for post_only's page


def _to_dataset(*, dataset_id: int, **_: object) -> tuple[str, str]:
    """post_only's way back from an action on a dataset: its page."""
    return reverse("web:dataset", args=[dataset_id]), "the dataset's page"


def _to_team(*, slug: str, **_: object) -> tuple[str, str]:
    """post_only's way back from an action on a team's deliveries or keys: its page."""
    return reverse("web:team", args=[slug]), f"team {slug}'s page"


def _render(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    """Render a page with what the layout needs (the person's teams for the navigation)."""
    context = {"user_memberships": browse.person_memberships(user=request.user), **context}
    return render(request, template, context, status=status)


@require_GET
@login_required
def dataset_list_page(request: HttpRequest) -> HttpResponse:
    """The catalog: datasets filtered and searched, 50 a page, each with its freshness
    badge and latest ready partition. With htmx (``HX-Request``) only the table is sent.
    An invalid filter (an unknown team, say) is left out and named above the table; the
    valid ones still apply."""
    form = DatasetFilterForm(
        request.GET, teams=browse.team_choices(), namespaces=browse.namespace_choices()
    )
    form.is_valid()
    filters = form.cleaned_data  # the valid fields only: Django drops each invalid one
    ignored = [
        (form.fields[name].label or name, request.GET.get(name, ""), " ".join(field_errors))
        for name, field_errors in form.errors.items()
        if name in form.fields
    ]
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
        "ignored_filters": ignored,
    }
    if request.headers.get("HX-Request"):
        return render(request, "catalog/_dataset_table.html", context)
    return _render(request, "catalog/dataset_list.html", context)


TIMELINE_PERIODS = 30


@require_GET
@login_required
def dataset_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """A dataset: owner, completion signal, SLA in words with its next deadlines,
    freshness, the last 30 periods' timeline with the usual arrival times (its arrival
    profile), consumers and who needs it by when (need-by times), lineage, change notices
    with their acknowledgements and the audit trail; its owners' edit form, and a form to
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
    sla = freshness_state.sla_of(dataset)
    # Each in the SLA's zone with its offset, and in UTC.
    deadlines = [
        as_read(at, dataset.sla_timezone)
        for at in sla_schedule.upcoming_deadlines(dataset, now=now)
    ]
    cells, picture, profile = [], None, None
    if dataset.partitioning != Dataset.Partitioning.NONE:
        profile = selectors.dataset_arrival_profile(dataset=dataset, now=now)
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
            tracked_since=dataset.created_at,
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
    fresh = freshness_state.dataset_freshness(dataset, now=now)
    context = {
        "nav": "catalog",
        "dataset": dataset,
        "fresh": fresh,
        "caused_by": selectors.late_cause(
            dataset=dataset, partition=fresh.partition_due if fresh.state == "late" else None
        ),
        "blast_radius": selectors.blast_radius(dataset=dataset),
        "deadlines": deadlines,
        "sla_warnings": sla_schedule.sla_warnings(dataset),
        "cells": cells,
        "picture": picture,
        "legend": timeline.WORDS,
        "profile": profile,
        "forecast": (
            selectors.dataset_forecast(dataset=dataset, now=now, profile=profile) if sla else None
        ),
        "groups": arrival_profiles.shown_groups(profile) if profile else [],
        "min_periods": settings.TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS,
        "consumers": browse.dataset_consumers(dataset=dataset),
        "needed_by": selectors.dataset_needed_by(dataset=dataset, now=now),
        "lineage": graph_layout.layout(graph),
        "unverified": request.GET.get("unverified") == "1",
        "notices": notices,
        "audit": [
            (entry, audit.action_words(entry.action), audit.shown_changes(entry.changes))
            for entry in browse.audit_trail(dataset=dataset)
        ],
        "is_owner": is_owner,
        "edit_form": edit_form or (DatasetEditForm.for_dataset(dataset) if is_owner else None),
        "subscribe_form": subscribe_form or (SubscribeForm(teams=teams) if teams else None),
        "endpoint_secret": endpoint_secret,
    }
    return _render(request, "catalog/dataset.html", context, status=status)


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def dataset_edit(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """An owner changes the dataset through ``dataset_update`` (every API rule holds;
    its problems are shown on the form). Others get 403. A GET (the address left in the
    bar after a refused save, reloaded) is the dataset's page with its form."""
    dataset = _dataset_or_404(dataset_id)
    if request.method != "POST":
        return _dataset_response(request, dataset)
    membership = browse.person_team(user=request.user, slug=dataset.owner.slug)
    if membership is None:
        raise PermissionDenied(f"only members of team {dataset.owner.slug} edit {dataset}")
    form = DatasetEditForm.for_dataset(dataset, request.POST)
    if form.is_valid():
        try:
            dataset = datasets.dataset_update(
                actor=_actor(request, membership.team),
                dataset=dataset,
                override_reason=form.cleaned_data["override_reason"],
                lifecycle_advice=change_notices.ADVICE_WEB,
                **form.changes(),
            )
        except errors.LifecycleNoticeRequired as problem:
            add_problem(form, problem)
            form.add_error(None, problem.detail)  # the rule and what to do about it
        except Problem as problem:
            add_problem(form, problem)
        except ValidationError as error:
            add_validation_error(form, error)
        else:
            messages.success(request, "Saved.")
            for warning in sla_schedule.sla_warnings(dataset):
                messages.warning(request, f"SLA deadline (cron): {warning.message}")
            return redirect("web:dataset", dataset.pk)
    return _dataset_response(request, dataset, edit_form=form, status=400)


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def dataset_subscribe(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """One of the person's teams declares it reads the dataset (``subscription_create``).
    A new webhook endpoint's signing secret is shown once, on the page this answers. A
    GET is the dataset's page with its form."""
    dataset = _dataset_or_404(dataset_id)
    if request.method != "POST":
        return _dataset_response(request, dataset)
    teams = [m.team for m in browse.person_memberships(user=request.user)]
    form = SubscribeForm(request.POST, teams=[t.slug for t in teams])
    if form.is_valid():
        team = next(t for t in teams if t.slug == form.cleaned_data["team"])
        try:
            result = subscriptions.subscription_create(
                actor=_actor(request, team),
                dataset=dataset,
                job_namespace=form.cleaned_data["job_namespace"],
                job_name=form.cleaned_data["job_name"],
                endpoint_url=form.cleaned_data["endpoint_url"],
                need_by_cron=form.cleaned_data["need_by_cron"],
                need_by_timezone=form.cleaned_data["need_by_timezone"],
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


@post_only(what="Acknowledging a change notice", back=_to_dataset, layout=LAYOUT)
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


def _actor(request: HttpRequest, team: Team) -> Actor:
    return Actor(team=team, username=request.user.get_username())


def _dataset_or_404(dataset_id: int) -> Dataset:
    try:
        return selectors.dataset_get_by_id(dataset_id=dataset_id)
    except errors.DatasetNotFound as exc:
        raise Http404(exc.detail) from exc


DEAD_LETTERS_SHOWN = 25
OWNED_SHOWN = 200


def _member_or_404(request: HttpRequest, slug: str) -> Membership:
    """The person's membership of team ``slug``; 404 for a team they are not in (others'
    teams are not revealed)."""
    membership = browse.person_team(user=request.user, slug=slug)
    if membership is None:
        raise Http404(f"you are not a member of team {slug!r}")
    return membership


def _admin_or_403(request: HttpRequest, slug: str) -> Membership:
    membership = _member_or_404(request, slug)
    if membership.role != Membership.Role.ADMIN:
        raise PermissionDenied(f"only admins of team {slug} manage its API keys")
    return membership


@require_GET
@login_required
def team_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A team, for its members only (404 for others): its datasets, subscriptions,
    webhook endpoints with their delivery health and dead letters (replayable), and API
    keys (admins create and revoke them)."""
    membership = _member_or_404(request, slug)
    return _team_response(request, membership)


def _team_response(
    request: HttpRequest,
    membership: Membership,
    *,
    key_form: ApiKeyCreateForm | None = None,
    new_token: str | None = None,
    status: int = 200,
) -> HttpResponse:
    team = membership.team
    now = timezone.now()
    owned = browse.dataset_rows(owner=team.slug, now=now)
    shown = list(owned[:OWNED_SHOWN])
    states = browse.rows_freshness(shown, now=now)
    is_admin = membership.role == Membership.Role.ADMIN
    context = {
        "nav": "team",
        "team": team,
        "is_admin": is_admin,
        "owned": [(d, states[d.pk]) for d in shown],
        "owned_count": owned.count(),
        "subscriptions": list(selectors.subscription_list(team=team)),
        "endpoints": browse.endpoint_health(team=team, now=now),
        "dead_letters": selectors.dead_letter_newest(team=team, limit=DEAD_LETTERS_SHOWN),
        "keys": list(selectors.api_key_list(team=team)),
        "now": now,
        "key_form": key_form
        or (
            ApiKeyCreateForm(governance=browse.person_is_governance(user=request.user))
            if is_admin
            else None
        ),
        "new_token": new_token,
    }
    return _render(request, "catalog/team.html", context, status=status)


@post_only(what="Replaying a dead letter", back=_to_team, layout=LAYOUT)
@login_required
def delivery_replay(request: HttpRequest, slug: str, delivery_id: int) -> HttpResponse:
    """Replay one dead letter of the team's endpoints (``delivery_replay``); another
    team's delivery is 404."""
    team = _member_or_404(request, slug).team
    try:
        found = selectors.delivery_get(team=team, delivery_id=delivery_id)
        endpoint_actions.delivery_replay(delivery=found, now=timezone.now())
    except errors.DeliveryNotFound as exc:
        raise Http404(exc.detail) from exc
    except errors.NotADeadLetter as problem:
        messages.error(request, problem.detail)
    else:
        messages.success(request, f"Delivery {delivery_id} will be sent again.")
    return redirect(f"{reverse('web:team', args=[slug])}#deliveries")


@post_only(what="Replaying an endpoint's dead letters", back=_to_team, layout=LAYOUT)
@login_required
def endpoint_replay(request: HttpRequest, slug: str, endpoint_id: int) -> HttpResponse:
    """Replay every dead letter of one of the team's endpoints
    (``endpoint_replay_dead_letters``); another team's endpoint is 404."""
    team = _member_or_404(request, slug).team
    try:
        endpoint = selectors.endpoint_get(team=team, endpoint_id=endpoint_id)
    except errors.EndpointNotFound as exc:
        raise Http404(exc.detail) from exc
    count = endpoint_actions.endpoint_replay_dead_letters(endpoint=endpoint, now=timezone.now())
    messages.success(request, f"{count} dead letter{'s' if count != 1 else ''} will be sent again.")
    return redirect(f"{reverse('web:team', args=[slug])}#deliveries")


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def api_key_create(request: HttpRequest, slug: str) -> HttpResponse:
    """A team admin creates an API key (``api_key_create``); its token is shown once, on
    the page this answers, and never stored. A GET is the team's page (with the form, for
    its admins)."""
    if request.method != "POST":
        return _team_response(request, _member_or_404(request, slug))
    membership = _admin_or_403(request, slug)
    form = ApiKeyCreateForm(request.POST, governance=browse.person_is_governance(user=request.user))
    if form.is_valid():
        try:
            _, token = team_services.api_key_create(
                team=membership.team,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires_at=form.cleaned_data["expires_at"],
            )
        except Problem as problem:
            add_problem(form, problem)
        except ValidationError as error:
            add_validation_error(form, error)
        else:
            return _team_response(request, membership, new_token=token)
    return _team_response(request, membership, key_form=form, status=400)


@post_only(what="Revoking an API key", back=_to_team, layout=LAYOUT)
@login_required
def api_key_revoke(request: HttpRequest, slug: str, public_id: str) -> HttpResponse:
    """A team admin revokes one of its keys (``api_key_revoke``); another team's key is
    404."""
    team = _admin_or_403(request, slug).team
    try:
        key = selectors.api_key_get(team=team, public_id=public_id)
    except errors.ApiKeyNotFound as exc:
        raise Http404(exc.detail) from exc
    team_services.api_key_revoke(key=key, now=timezone.now())
    messages.success(request, f"Key {key.name} (tm_{key.public_id}_…) is revoked.")
    return redirect(f"{reverse('web:team', args=[slug])}#keys")


REPORT_ROWS = 100
CHANGE_COLUMNS_SHOWN = 10  # removed names, and retyped entries, per breaking change row


@require_GET
@login_required
def governance_page(request: HttpRequest) -> HttpResponse:
    """The governance reports, as the API's: undeclared reads, stale declarations,
    undeclared writes, uncatalogued datasets seen in lineage, critical datasets without
    an SLA or a watchdog monitor, unannounced breaking changes, run conflicts, and
    datasets their consumers need earlier than their producers promise; the first 100
    rows of each.

    Governance staff (``browse.person_is_governance``) see every team's rows, or one
    team's with ``?team=``; everyone else sees one of their own teams' rows (the first by
    slug unless ``?team=`` names another of theirs; someone else's team is 403)."""
    slug = request.GET.get("team", "")
    memberships = browse.person_memberships(user=request.user)
    governance = browse.person_is_governance(user=request.user)
    if governance:
        team = _team_or_404(slug) if slug else None
        choices = browse.team_choices()
    else:
        own = {m.team.slug: m.team for m in memberships}
        if slug and slug not in own:
            raise PermissionDenied("only governance staff see other teams' reports")
        team = own.get(slug) or (memberships[0].team if memberships else None)
        choices = sorted(own)
        if team is None:
            return _render(request, "catalog/governance.html", {"nav": "governance", "none": True})
    now = timezone.now()
    uncatalogued = selectors.uncatalogued_usage_attach(
        team=team, rows=list(selectors.uncatalogued_datasets_list(team=team)[:REPORT_ROWS])
    )
    changes = list(
        selectors.unannounced_schema_changes(teams=None if team is None else [team])[:REPORT_ROWS]
    )
    for change in changes:  # a dropped table can remove thousands of columns at once
        change.removed_shown = change.removed[:CHANGE_COLUMNS_SHOWN]
        change.removed_more = max(0, len(change.removed) - CHANGE_COLUMNS_SHOWN)
        change.retyped_shown = change.retyped[:CHANGE_COLUMNS_SHOWN]
        change.retyped_more = max(0, len(change.retyped) - CHANGE_COLUMNS_SHOWN)
    context = {
        "nav": "governance",
        "governance": governance,
        "team": team,
        "team_choices": choices,
        "limit": REPORT_ROWS,
        "stale_days": settings.TIDEMARK_STALE_DECLARATION_DAYS,
        "undeclared_reads": list(selectors.undeclared_reads_list(team=team)[:REPORT_ROWS]),
        "stale": list(
            selectors.stale_declarations_list(
                team=team, days=settings.TIDEMARK_STALE_DECLARATION_DAYS, now=now
            )[:REPORT_ROWS]
        ),
        "undeclared_writes": list(selectors.undeclared_writes_list(team=team)[:REPORT_ROWS]),
        "uncatalogued": uncatalogued,
        "without_sla": list(browse.critical_without_sla(team=team)[:REPORT_ROWS]),
        "without_monitor": list(browse.critical_without_monitor(team=team)[:REPORT_ROWS]),
        "unannounced_breaking_changes": changes,
        "run_conflicts": list(selectors.run_conflict_list(team=team)[:REPORT_ROWS]),
        "needed_earlier": selectors.needed_by_rows(
            selectors.need_by_before_sla_list(team=team).order_by("-need_by_gap_seconds", "id")[
                :REPORT_ROWS
            ],
            now=now,
        ),
    }
    return _render(request, "catalog/governance.html", context)


def _team_or_404(slug: str) -> Team:
    try:
        return selectors.team_get(slug=slug)
    except errors.TeamNotFound as exc:
        raise Http404(exc.detail) from exc
