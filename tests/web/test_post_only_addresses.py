"""Every address of the web pages that takes a form answers a GET sensibly: one whose form
lives on a page renders that page, form included (the address left in the bar after a
refused save, reloaded); one that is only a button's action answers 405 with a page in
its area's layout saying what it does and linking to the page whose button sends it,
never a blank page. The catalog's pages and the on-call pages alike."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from catalog.models import Membership
from tests.catalog.factories import DatasetFactory
from watchdog import monitors, operators
from watchdog.oncall import COOKIE

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}
OPERATOR_PASSWORD = "tide-watch-4417"

# The addresses that are pages (GET) in the first place.
PAGES = {
    "web:datasets",
    "web:dataset",
    "web:team",
    "web:endpoint-attempts",
    "web:governance",
    "login",
    "oncall:monitor-list",
    "oncall:monitor-detail",
    "oncall:incident-list",
    "oncall:login",
}

# name -> (address, what a GET answers: ("form", the form's id on the page it renders) or
# ("405", what the page says the address does, where it links back to)).
TABLE = {
    "web:dataset-edit": ("/datasets/{dataset}/edit", ("form", 'id="edit"')),
    "web:dataset-subscribe": ("/datasets/{dataset}/subscribe", ("form", 'id="subscribe"')),
    "web:key-create": ("/teams/orders/keys", ("form", 'id="new-key"')),
    "web:notice-acknowledge": (
        "/datasets/{dataset}/notices/7/acknowledge",
        ("405", "Acknowledging a change notice", "/datasets/{dataset}/"),
    ),
    "web:delivery-replay": (
        "/teams/orders/deliveries/7/replay",
        ("405", "Replaying a dead letter", "/teams/orders/"),
    ),
    "web:endpoint-replay": (
        "/teams/orders/endpoints/7/replay",
        ("405", "Replaying an endpoint&#x27;s dead letters", "/teams/orders/"),
    ),
    "web:endpoint-enable": (
        "/teams/orders/endpoints/7/enable",
        ("405", "Enabling an endpoint", "/teams/orders/"),
    ),
    "web:endpoint-recover": (
        "/teams/orders/endpoints/7/recover",
        ("405", "Recovering an endpoint&#x27;s failed deliveries", "/teams/orders/"),
    ),
    "web:key-revoke": (
        "/teams/orders/keys/abcdef/revoke",
        ("405", "Revoking an API key", "/teams/orders/"),
    ),
    "logout": ("/accounts/logout/", ("405", "Signing out", "/")),
    "oncall:logout": ("/oncall/logout", ("405", "Signing out", "/oncall/")),
    "oncall:monitor-pause": (
        "/oncall/monitors/{monitor}/pause",
        ("405", "Pausing a monitor", "/oncall/monitors/{monitor}"),
    ),
    "oncall:monitor-resume": (
        "/oncall/monitors/{monitor}/resume",
        ("405", "Resuming a monitor", "/oncall/monitors/{monitor}"),
    ),
}


def _names(patterns, namespace: str = "") -> set[str]:
    found = set()
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace in ("web", "oncall"):
                found |= _names(entry.url_patterns, f"{entry.namespace}:")
        elif (
            isinstance(entry, URLPattern)
            and entry.name
            and (namespace or entry.name in ("login", "logout"))
        ):
            found.add(namespace + entry.name)
    return found


def test_the_table_covers_every_address_of_the_web_and_on_call_pages():
    assert _names(get_resolver("config.urls").url_patterns) - PAGES == set(TABLE)


@pytest.fixture
def world(django_user_model):
    """A team admin of ``orders`` with a dataset, and an on-call operator with a monitor."""
    dataset = DatasetFactory(owner__slug="orders")
    user = django_user_model.objects.create_user(username="olga", password="pw-olga-1234")
    Membership.objects.create(team=dataset.owner, user=user, role=Membership.Role.ADMIN)
    client = Client()
    client.force_login(user)
    operators.operator_create(username="ops", password=OPERATOR_PASSWORD, labels=["orders"])
    session = operators.sign_in(
        username="ops", password=OPERATOR_PASSWORD, remote_addr="127.0.0.1", now=timezone.now()
    )
    client.cookies[COOKIE] = session.key
    monitor = monitors.monitor_create(
        now=timezone.now(), name="orders nightly", owner="orders", period_seconds=3600
    )
    return client, {"dataset": dataset.pk, "monitor": monitor.pk}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_a_get_on_a_form_address_renders_its_form_or_a_405_page_with_a_way_back(world, name):
    client, ids = world
    address, answer = TABLE[name]
    response = client.get(address.format(**ids), **HTML)
    body = response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    if answer[0] == "form":
        assert response.status_code == 200, body[:500]
        assert answer[1] in body
        return
    _, what, back = answer
    assert (response.status_code, response["Allow"]) == (405, "POST")
    assert "Only a form goes here" in body and what in body
    assert f'href="{back.format(**ids)}"' in body
    assert 'class="top"' in body  # the shared layout's header


@pytest.mark.urls("config.urls_watchdog")
def test_the_watchdog_deployed_alone_answers_the_same_page(world):
    client, ids = world
    response = client.get(f"/oncall/monitors/{ids['monitor']}/pause", **HTML)
    assert (response.status_code, response["Allow"]) == (405, "POST")
    assert f'href="/oncall/monitors/{ids["monitor"]}"' in response.content.decode()
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
