"""Every page and form of the web UI: anonymous people are sent to log in, and every form
refuses a POST without its CSRF token, changing nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from catalog.models import ApiKey, ChangeNoticeAcknowledgement, Delivery, Membership, Subscription
from catalog.services.teams import api_key_create
from tests.catalog.factories import DatasetFactory, EndpointFactory, SubscriptionFactory
from tests.web.helpers import announce, dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def things(orders, analytics):
    dataset = DatasetFactory(owner=orders, sla_cron="0 6 * * *")
    SubscriptionFactory(team=analytics, dataset=dataset)
    notice = announce(dataset)
    hook = EndpointFactory(team=orders)
    dead = dead_letter(hook)
    key, _ = api_key_create(team=orders, name="k", scopes=["read"])
    return {"dataset": dataset, "notice": notice, "hook": hook, "dead": dead, "key": key}


def urls(t) -> dict[str, tuple[str, dict]]:
    d, n = t["dataset"].pk, t["notice"].pk
    return {
        "edit": (f"/datasets/{d}/edit", {"criticality": "low"}),
        "subscribe": (f"/datasets/{d}/subscribe", {"team": "orders"}),
        "acknowledge": (f"/datasets/{d}/notices/{n}/acknowledge", {"team": "analytics"}),
        "replay": (f"/teams/orders/deliveries/{t['dead'].pk}/replay", {}),
        "replay-all": (f"/teams/orders/endpoints/{t['hook'].pk}/replay", {}),
        "key-create": ("/teams/orders/keys", {"name": "x", "scopes": ["read"]}),
        "key-revoke": (f"/teams/orders/keys/{t['key'].public_id}/revoke", {}),
    }


def nothing_changed(t) -> bool:
    t["dataset"].refresh_from_db()
    t["key"].refresh_from_db()
    return (
        t["dataset"].criticality == "medium"
        and Subscription.objects.count() == 1
        and not ChangeNoticeAcknowledgement.objects.exists()
        and Delivery.objects.get(pk=t["dead"].pk).state == "dead"
        and ApiKey.objects.count() == 1
        and t["key"].revoked_at is None
    )


@pytest.mark.parametrize(
    "form", ["edit", "subscribe", "acknowledge", "replay", "replay-all", "key-create", "key-revoke"]
)
def test_forms_refuse_anonymous_people(client, things, form):
    url, data = urls(things)[form]
    response = client.post(url, data)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert nothing_changed(things)


@pytest.mark.parametrize(
    "form", ["edit", "subscribe", "acknowledge", "replay", "replay-all", "key-create", "key-revoke"]
)
def test_forms_refuse_a_post_without_csrf_token(things, make_person, orders, analytics, form):
    person = make_person("both", orders, analytics, role=Membership.Role.ADMIN)
    client = Client(enforce_csrf_checks=True)
    client.force_login(person)
    url, data = urls(things)[form]
    assert client.post(url, data).status_code == 403
    assert nothing_changed(things)


def test_logout_without_csrf_token_is_refused(make_person):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_person("ada"))
    assert client.post("/accounts/logout/").status_code == 403
    assert client.get("/").status_code == 200  # still signed in


@pytest.mark.parametrize("path", ["/", "/datasets/1/", "/teams/orders/", "/governance/"])
def test_pages_send_anonymous_people_to_log_in(client, orders, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


@pytest.mark.parametrize("path", ["/", "/governance/", "/teams/orders/"])
def test_pages_refuse_other_methods(client_as, make_person, orders, path):
    client = client_as(make_person("ada", orders))
    assert client.post(path).status_code == 405


def test_existing_routes_are_untouched(client):
    assert client.get("/healthz").status_code == 200
    assert client.get("/api/v1/datasets").status_code == 401
    assert client.get("/admin/").status_code == 302


def test_the_layout_renders_where_the_catalog_routes_are_not_mounted(rf, make_person, settings):
    """The watchdog's own process shares templates/ but not the catalog's URLs."""
    from django.template.loader import render_to_string

    settings.ROOT_URLCONF = "config.urls_watchdog"
    request = rf.get("/")
    request.user = make_person("ada")
    html = render_to_string("403.html", {"exception": "no"}, request=request)
    assert 'href="/governance/"' in html and "Sign out" in html
