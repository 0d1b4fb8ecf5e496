"""Every route of the catalog (``config.urls``, the admin included) and of the watchdog
deployed alone (``config.urls_watchdog``), walked from the URL resolver, with hostile values
in each path parameter, by each HTTP method the route serves, signed in as the owner team,
a superuser and an all-seeing operator: never a 5xx, and on an API route every refusal is
an RFC 9457 problem document.

Per route and method, one request per hostile value per path parameter (the others valid:
real objects, so the view gets as far as it can), one with hostile query parameters and,
for writes, one with a hostile body. Each request runs in a savepoint that is rolled back,
so every one meets the same world. All failures are reported together.

Django's admin is walked more lightly in the default run (``ADMIN_PATH_VALUES``).
A new route is covered without touching this file; a new path parameter needs a valid
value in ``world`` (the test says so).
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from catalog.models import ApiKey, Delivery, Membership
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.watchdog.conftest import OPERATOR_PASSWORD
from watchdog import monitors, operators, ping_keys, tokens
from watchdog.oncall import COOKIE

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.timeout(600),
]

# Substituted raw into the path, so percent-escapes reach Django as a client sends them.
HOSTILE_PATH_VALUES = {
    "NUL": "%00",
    "NUL inside": "ab%00cd",
    "overlong": "x" * 5000,
    "invalid UTF-8": "%ff%fe",
    "UTF-8 of a surrogate": "%ed%a0%80",
    "dot segment": "..",
    "encoded traversal": "..%2f..%2fetc%2fpasswd",
    "right-to-left override": "%e2%80%aeabc",
    "huge integer": "99999999999999999999",
    "just past bigint": "9223372036854775808",
    "negative": "-1",
    "zero": "0",
    "quote": "1'%20OR%20'1'='1",
    "lone percent": "%25",
}
# Django's admin (some 190 routes: the same views for each model) is walked by GET with
# these in the default run, and like every other route with TIDEMARK_HOSTILE_FULL=1
# (about four times as long).
ADMIN_PATH_VALUES = ("NUL", "overlong", "huge integer", "negative", "encoded traversal")
FULL = os.environ.get("TIDEMARK_HOSTILE_FULL") == "1"
# Names views read from the query string, with values none of them should accept.
HOSTILE_QUERY = {
    "cursor": "x" * 3000,
    "page": "99999999999999999999",
    "page_size": "-1",
    "limit": "1e9",
    "days": "-99999999999999999999",
    "namespace": "\u202eabc",
    "name": "..",
    "owner": "x" * 300,
    "team": "nobody",
    "state": "\ufffd",
    "q": "%",
    "partition": "9999-99-99",
    "logical_from": "not a date",
    "dataset_id": "99999999999999999999",
    "endpoint_id": "-1",
    "monitor_id": "1e3",
    "open": "\u0660",
    "dry_run": "maybe",
    "depth": "99999999999999999999",
    "next": "//evil.example/",
    "rid": "x" * 1000,
}
# A write's body: the same names as JSON (API routes) or a form (pages).
HOSTILE_BODY = {
    "namespace": "s3://" + "a" * 5000,
    "name": "\u202e",
    "partition": "99999999999999999999",
    "dataset_id": 2**70,
    "version": "..",
    "team": "x" * 300,
    "to_team": "..",
    "kind": "\ufffd",
    "scopes": ["everything"],
    "username": "a" * 500,
    "password": "",
    "pattern": "*" * 2000,
    "effective_at": "9999-12-31T23:59:59+99:00",
    "expires_at": "-1",
    "endpoint_url": "http://[::1",
    "period_seconds": 2**70,
    "channel_ids": [2**70],
}
HOSTILE_FORM = {key: str(value) for key, value in HOSTILE_BODY.items()} | {"username": "a\x00b"}

ROUTE_PARAMETER = re.compile(
    r"<(?:(?P<converter>[^>:]+):)?(?P<name>\w+)>|\(\?P<(?P<group>\w+)>[^()]*\)"
)


@dataclass(frozen=True)
class Route:
    pattern: str  # as the resolver spells it, e.g. "api/v1/datasets/<int:dataset_id>"
    methods: tuple[str, ...]

    @property
    def parameters(self) -> list[str]:
        return [m["name"] or m["group"] for m in ROUTE_PARAMETER.finditer(self.pattern)]

    def url(self, values: dict[str, str]) -> str:
        filled = ROUTE_PARAMETER.sub(lambda m: values[m["name"] or m["group"]], self.pattern)
        return "/" + filled.replace("^", "").replace("$", "")


def routes(urlconf: str) -> list[Route]:
    """Every route of ``urlconf``, with the methods its view serves (a function view's are
    not known: GET and POST)."""
    found: list[Route] = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
                continue
            assert isinstance(entry, URLPattern)
            view_class = getattr(entry.callback, "view_class", None) or getattr(
                entry.callback, "cls", None
            )
            if view_class is None:
                methods = ("GET", "POST")
            else:
                methods = tuple(
                    name.upper()
                    for name in view_class.http_method_names
                    if name not in ("options", "head") and hasattr(view_class, name)
                )
            found.append(Route(prefix + str(entry.pattern), methods))

    walk(get_resolver(urlconf).url_patterns, "")
    return found


@dataclass
class World:
    """Real objects for the valid path values, and who calls."""

    values: dict[str, str]
    api_token: str  # the catalog's, or the watchdog's, by urlconf
    session: str  # a superuser who is an admin of the owner team
    oncall: str  # an operator who sees every monitor


@pytest.fixture
def world(django_user_model, make_key) -> dict[str, World]:
    team = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")
    subscription = SubscriptionFactory(dataset=dataset)
    catalog_key = make_key(team, ApiKey.Scope.values)
    key_row = ApiKey.objects.filter(team=team).order_by("-id").first()

    api = Client(HTTP_AUTHORIZATION=f"Bearer {catalog_key}")
    published = api.post(
        "/api/v1/readiness",
        {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"},
        content_type="application/json",
    )
    assert published.status_code == 201, published.content
    notice = api.post(
        f"/api/v1/datasets/{dataset.id}/change-notices",
        {
            "kind": "breaking_schema_change",
            "description": "customer_id becomes a string",
            "effective_at": (timezone.now() + timedelta(days=30)).isoformat(),
        },
        content_type="application/json",
    )
    assert notice.status_code == 201, notice.content
    TeamFactory(slug="sales")
    transfer = api.post(
        f"/api/v1/datasets/{dataset.id}/transfers", {"to_team": "sales"}, "application/json"
    )
    assert transfer.status_code == 201, transfer.content
    claim = {"kind": "job_namespace", "pattern": "airflow://orders"}
    claim = api.post("/api/v1/claims", claim, "application/json")
    assert claim.status_code in (200, 201), claim.content
    opened = api.post(
        f"/api/v1/datasets/{dataset.id}/restatements",
        {"version": "v2", "first_partition": "2026-11-28", "last_partition": "2026-11-28"},
        "application/json",
    )
    assert opened.status_code == 201, opened.content
    restatement = opened.json()["id"]

    person = django_user_model.objects.create_superuser("ada", password="x" * 12)
    Membership.objects.create(team=team, user=person, role=Membership.Role.ADMIN)
    browser = Client()
    browser.force_login(person)

    monitor = monitors.monitor_create(
        now=timezone.now(), name="nightly", period_seconds=3600, external_id="dataset:1"
    )
    _, watchdog_token = tokens.create("hostile routes")
    ping_key, ping_key_token = ping_keys.ping_key_create(owner="orders", now=timezone.now())
    operators.operator_create(
        username="olga", password=OPERATOR_PASSWORD, labels=[], all_labels=True
    )
    oncall = operators.sign_in(
        username="olga", password=OPERATOR_PASSWORD, remote_addr="127.0.0.1", now=timezone.now()
    ).key

    catalog_values = {
        "token": dataset.badge_token,
        "public_id": key_row.public_id,
        "dataset_id": str(dataset.id),
        "key": "2026-11-28",
        "notice_id": str(notice.json()["id"]),
        "restatement_id": str(restatement),
        "endpoint_id": str(subscription.endpoint_id),
        "delivery_id": str(Delivery.objects.order_by("id").first().id),
        "subscription_id": str(subscription.id),
        "transfer_id": str(transfer.json()["id"]),
        "claim_id": str(claim.json()["id"]),
        "run_id": str(uuid.uuid4()),
        "rest": "s3://lake/datasets/raw/orders",  # a Marquez path after /namespaces/
        "type": "partition.ready",  # an event type in the event catalog
        "monitor_id": str(monitor.id),
        "slug": "orders",
        "team_slug": "orders",
        "object_id": str(dataset.id),
        "content_type_id": "1",
        "id": str(person.id),
        "app_label": "catalog",
        "url": "nowhere/",
        "name": "tidemark.css",
    }
    watchdog_values = {
        "key": str(monitor.ping_key),
        "status": "0",
        "monitor_id": str(monitor.id),
        "external_id": monitor.external_id,
        "slug": "not-found",
        "ping_key": ping_key_token,
        "key_id": str(ping_key.id),
        "name": "tidemark.css",
    }
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    return {
        "config.urls": World(catalog_values, catalog_key, session, oncall),
        "config.urls_watchdog": World(watchdog_values, watchdog_token, session, oncall),
    }


def _send(world: World, method: str, path: str, *, query=None, body=None, headers=None):
    """One request, as the caller the path is for, in a savepoint rolled back after."""
    client = Client(raise_request_exception=True, **(headers or {}))
    if path.startswith("/api/"):
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {world.api_token}"
        data = json.dumps(body if body is not None else {})
        content_type = "application/json"
    else:
        client.cookies[settings.SESSION_COOKIE_NAME] = world.session
        client.cookies[COOKIE] = world.oncall
        data = urlencode(body if body is not None else {}, doseq=True)
        content_type = "application/x-www-form-urlencoded"
    if query:
        path = f"{path}?{urlencode(query)}"
    with transaction.atomic(using="default"), transaction.atomic(using="watchdog"):
        if method in ("GET", "DELETE"):
            response = client.generic(method, path)
        else:
            response = client.generic(method, path, data, content_type=content_type)
        transaction.set_rollback(True, using="watchdog")
        transaction.set_rollback(True, using="default")
    return response


@pytest.mark.parametrize("urlconf", ["config.urls", "config.urls_watchdog"])
def test_hostile_values_in_every_route_are_refused_without_a_5xx(urlconf, world, settings, caplog):
    settings.ROOT_URLCONF = urlconf
    caplog.set_level(logging.CRITICAL, logger="django.request")  # a line per 4xx otherwise
    caplog.set_level(logging.CRITICAL, logger="django.security")
    world = world[urlconf]
    failures: list[str] = []
    sent = 0

    def check(method: str, path: str, what: str, **kwargs) -> None:
        nonlocal sent
        sent += 1
        try:
            response = _send(world, method, path, **kwargs)
        except Exception as exc:  # the test client re-raises what became a 500
            failures.append(f"{method} {path[:120]} [{what}]: raised {exc!r}"[:400])
            return
        problem = response.get("Content-Type") == "application/problem+json"
        if response.status_code >= 500:
            failures.append(f"{method} {path[:120]} [{what}]: {response.status_code}")
        elif path.startswith("/api/") and response.status_code >= 400 and not problem:
            failures.append(f"{method} {path[:120]} [{what}]: {response.status_code} not a problem")

    for route in routes(urlconf):
        missing = set(route.parameters) - set(world.values)
        assert not missing, f"give {route.pattern} a valid value for {missing} in world()"
        admin = route.pattern.startswith("admin/") and not FULL
        for method in ("GET",) if admin else route.methods:
            for parameter in route.parameters:
                for label, value in HOSTILE_PATH_VALUES.items():
                    if admin and label not in ADMIN_PATH_VALUES:
                        continue
                    path = route.url({**world.values, parameter: value})
                    check(method, path, f"{parameter}: {label}")
            path = route.url(world.values)
            check(method, path, "hostile query", query=HOSTILE_QUERY)
            check(method, path, "NUL in the query", query={"q": "a\x00b"})
            check(method, path, "NUL in a header", headers={"HTTP_USER_AGENT": "curl\x00"})
            if method in ("POST", "PUT", "PATCH"):
                body = HOSTILE_BODY if path.startswith("/api/") else HOSTILE_FORM
                check(method, path, "hostile body", body=body)

    assert sent > 500 if urlconf == "config.urls" else sent > 100
    assert not failures, f"{len(failures)} of {sent} requests failed:\n" + "\n".join(failures)
