"""The on-call pages (``/oncall/``): monitors with their state, last ping, next deadline and
open incidents; a monitor's recent pings, runs, incidents and their pages; pause and
resume. Server-rendered, no script.

They serve the same in the main deployment and in the watchdog deployed alone
(``config.settings.watchdog``, which has no sessions, messages or CSRF middleware), so they
depend on none of that: operators sign in with the watchdog's own accounts
(``watchdog.operators``), and every view carries its own CSRF protection.

Every page needs a signed-in operator, and shows only the monitors it may see; another
label's monitor answers 404, exactly as one that does not exist. Django's own login is not
theirs: they are marked ``login_not_required`` for a host that turns on
``LoginRequiredMiddleware`` for its pages.
"""

from __future__ import annotations

import logging
from functools import wraps
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.decorators import decorator_from_middleware
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods

from httpkit.client_address import client_address
from httpkit.methods import post_only
from httpkit.storable import has_unstorable
from schedules import as_read

from . import monitors, operators, schedule, selectors

logger = logging.getLogger(__name__)

COOKIE = "tidemark_oncall"
PER_PAGE = 50
# Past any history kept; keeps the page's OFFSET within PostgreSQL's bigint.
MAX_PAGE = 100_000
OPEN_INCIDENTS_SHOWN = 200
SECURITY_HEADERS = {
    # No script, no frames, forms only to ourselves; the shared stylesheet and favicon
    # (httpkit.assets) come from this server.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class _Csrf(CsrfViewMiddleware):
    """Django's CSRF check, answering a refusal with an on-call page (not the host's
    ``CSRF_FAILURE_VIEW``, which the watchdog deployed alone does not have)."""

    def _reject(self, request, reason):
        logger.warning("on-call CSRF refusal on %s: %s", request.path, reason)
        return _page(
            request,
            "watchdog/oncall/error.html",
            {"title": "Form expired", "detail": "Reload the page and try again."},
            status=403,
        )


csrf_protect = decorator_from_middleware(_Csrf)


def _page(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    response = render(
        request,
        template,
        {"operator": getattr(request, "operator", None), **context},
        status=status,
    )
    for name, value in SECURITY_HEADERS.items():
        response[name] = value
    return response


def _not_found(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        "watchdog/oncall/error.html",
        {"title": "Not found", "detail": "No such monitor, or not one of your teams'."},
        status=404,
    )


LAYOUT = "watchdog/oncall/base.html"  # for post_only's page


def _to_monitors() -> tuple[str, str]:
    """post_only's way back from signing out: the monitors page."""
    return reverse("oncall:monitor-list"), "the on-call monitors page"


def _to_monitor(*, monitor_id: int) -> tuple[str, str]:
    """post_only's way back from pausing or resuming: the monitor's page."""
    return reverse("oncall:monitor-detail", args=[monitor_id]), "the monitor's page"


def _cookie_path() -> str:
    return reverse("oncall:monitor-list")


def operator_required(view):
    """The view runs with ``request.operator`` set from a live session; anyone else is sent
    to the sign-in page (and back here afterwards, for a GET)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        session = operators.session_for(request.COOKIES.get(COOKIE, ""), now=timezone.now())
        if session is None:
            login = reverse("oncall:login")
            if request.method == "GET":
                login += "?" + urlencode({"next": request.get_full_path()})
            response = HttpResponseRedirect(login)
            if COOKIE in request.COOKIES:
                response.delete_cookie(COOKIE, path=_cookie_path())
            return response
        request.operator = session.operator
        return view(request, *args, **kwargs)

    return wrapper


# --- signing in and out ------------------------------------------------------------------


def _safe_next(request: HttpRequest, target: str) -> str:
    """Where to go after signing in: ``target`` when it is an on-call page on this host
    (never another site or another part of the server), else the monitors page."""
    home = _cookie_path()
    if not target or not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}
    ):
        return home
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return home
    try:
        match = resolve(parts.path)
    except Resolver404:
        return home
    return target if match.namespace == "oncall" and parts.path.startswith(home) else home


@login_not_required
@csrf_protect
@require_http_methods(["GET", "POST"])
def login(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request, request.POST.get("next") or request.GET.get("next", ""))
    context = {"next": next_url, "username": "", "error": ""}
    if request.method == "GET":
        return _page(request, "watchdog/oncall/login.html", context)
    username = request.POST.get("username", "")[:150]
    try:
        if has_unstorable(username):  # no operator is so named, and no row could count it
            raise operators.SignInRefused(throttled=False)
        signed_in = operators.sign_in(
            username=username,
            password=request.POST.get("password", "")[:1024],
            remote_addr=client_address(request),
            now=timezone.now(),
        )
    except operators.SignInRefused as refused:
        context.update(username=username, error=str(refused).capitalize() + ".")
        status = 429 if refused.throttled else 200
        return _page(request, "watchdog/oncall/login.html", context, status=status)
    logger.info("on-call sign-in by %s", signed_in.operator.username)
    response = HttpResponseRedirect(next_url)
    response.set_cookie(
        COOKIE,
        signed_in.key,
        max_age=settings.WATCHDOG_ONCALL["max_age_seconds"],
        path=_cookie_path(),
        secure=settings.SESSION_COOKIE_SECURE or request.is_secure(),
        httponly=True,
        samesite="Lax",
    )
    return response


@login_not_required
@csrf_protect
@post_only(what="Signing out", back=_to_monitors, layout=LAYOUT, headers=SECURITY_HEADERS)
def logout(request: HttpRequest) -> HttpResponse:
    operators.sign_out(request.COOKIES.get(COOKIE, ""))
    response = HttpResponseRedirect(reverse("oncall:login"))
    response.delete_cookie(COOKIE, path=_cookie_path())
    return response


# --- pages -------------------------------------------------------------------------------


@login_not_required
@csrf_protect
@require_GET
@operator_required
def monitor_list(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    label = request.GET.get("label", "")[:64]
    state = request.GET.get("state", "")
    search = request.GET.get("q", "").strip()[:200]
    queryset = selectors.monitor_list(
        operator=request.operator, now=now, label=label, state=state, search=search
    )
    page = Paginator(queryset, PER_PAGE).get_page(request.GET.get("page"))
    for monitor in page.object_list:
        monitor.shown_state = monitors.display_state(monitor, now=now)
    filters = {
        key: value for key, value in (("label", label), ("state", state), ("q", search)) if value
    }
    return _page(
        request,
        "watchdog/oncall/monitor_list.html",
        {
            "page": page,
            "labels": selectors.monitor_labels(operator=request.operator),
            "states": selectors.DISPLAY_STATES,
            "label": label,
            "state": state,
            "q": search,
            "filters": urlencode(filters),
            "section": "monitors",
            "now": now,
        },
    )


@login_not_required
@csrf_protect
@require_GET
@operator_required
def monitor_detail(request: HttpRequest, monitor_id: int) -> HttpResponse:
    monitor = selectors.monitor_get(operator=request.operator, monitor_id=monitor_id)
    if monitor is None:
        return _not_found(request)
    now = timezone.now()
    activity = selectors.monitor_activity(monitor=monitor)
    return _page(
        request,
        "watchdog/oncall/monitor_detail.html",
        {
            "monitor": monitor,
            "shown_state": monitors.display_state(monitor, now=now),
            "schedule": schedule.describe(monitor),
            "deadlines": [
                as_read(at, monitor.timezone)
                for at in schedule.upcoming_deadlines(monitor, now=now)
            ],
            "warnings": monitors.warnings(monitor),
            "activity": activity,
            "open_incidents": sum(1 for i in activity.incidents if i.resolved_at is None),
            "section": "monitors",
            "now": now,
        },
    )


def _act(request: HttpRequest, monitor_id: int, action) -> HttpResponse:
    monitor = selectors.monitor_get(operator=request.operator, monitor_id=monitor_id)
    if monitor is None:
        return _not_found(request)
    if action is monitors.monitor_pause:
        action(monitor, now=timezone.now(), by=request.operator.username)
    else:
        action(monitor, now=timezone.now())
    logger.info(
        "monitor %s %s by operator %s",
        monitor.pk,
        action.__name__.removeprefix("monitor_"),
        request.operator.username,
    )
    return HttpResponseRedirect(reverse("oncall:monitor-detail", args=[monitor.pk]))


@login_not_required
@csrf_protect
@post_only(what="Pausing a monitor", back=_to_monitor, layout=LAYOUT, headers=SECURITY_HEADERS)
@operator_required
def monitor_pause(request: HttpRequest, monitor_id: int) -> HttpResponse:
    """Pause: no deadlines judged, open incidents resolved (their resolves paged)."""
    return _act(request, monitor_id, monitors.monitor_pause)


@login_not_required
@csrf_protect
@post_only(what="Resuming a monitor", back=_to_monitor, layout=LAYOUT, headers=SECURITY_HEADERS)
@operator_required
def monitor_resume(request: HttpRequest, monitor_id: int) -> HttpResponse:
    """Resume: judged again from the next deadline."""
    return _act(request, monitor_id, monitors.monitor_resume)


@login_not_required
@csrf_protect
@require_GET
@operator_required
def incident_list(request: HttpRequest) -> HttpResponse:
    label = request.GET.get("label", "")[:64]
    open_incidents = list(
        selectors.incident_list(operator=request.operator, resolved=False, label=label)[
            : OPEN_INCIDENTS_SHOWN + 1
        ]
    )
    try:
        number = min(max(1, int(request.GET.get("page", "1"))), MAX_PAGE)
    except ValueError:
        number = 1
    start = (number - 1) * PER_PAGE
    resolved = list(
        selectors.incident_list(operator=request.operator, resolved=True, label=label)[
            start : start + PER_PAGE + 1
        ]
    )
    return _page(
        request,
        "watchdog/oncall/incident_list.html",
        {
            "open_incidents": open_incidents[:OPEN_INCIDENTS_SHOWN],
            "more_open": len(open_incidents) > OPEN_INCIDENTS_SHOWN,
            "resolved": resolved[:PER_PAGE],
            "number": number,
            "has_next": len(resolved) > PER_PAGE,
            "labels": selectors.monitor_labels(operator=request.operator),
            "label": label,
            "label_query": urlencode({"label": label}) if label else "",
            "section": "incidents",
            "now": timezone.now(),
        },
    )
