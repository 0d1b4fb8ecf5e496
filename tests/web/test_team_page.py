"""The team page: owned datasets, subscriptions, endpoint health with dead letters and
their replay, API keys created (shown once) and revoked; members only, admins for keys."""

from __future__ import annotations

import pytest
from django.test import Client

from catalog.models import ApiKey, Delivery, Membership, SubscriptionEndpoint
from catalog.services.teams import api_key_create
from tests.catalog.factories import DatasetFactory, EndpointFactory, SubscriptionFactory
from tests.web.helpers import dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(make_person, client_as, orders):
    return client_as(make_person("mia", orders))


@pytest.fixture
def admin(make_person, client_as, orders):
    return client_as(make_person("adam", orders, role=Membership.Role.ADMIN))


@pytest.fixture
def outsider(make_person, client_as, analytics):
    return client_as(make_person("otto", analytics, role=Membership.Role.ADMIN))


@pytest.fixture
def hook(orders):
    return EndpointFactory(team=orders, url="https://hooks.example.com/orders")


def test_team_page_shows_datasets_subscriptions_endpoint_health_and_keys(
    member, orders, analytics, hook
):
    owned = DatasetFactory(owner=orders, name="raw/orders")
    SubscriptionFactory(team=orders, dataset=DatasetFactory(owner=analytics), endpoint=hook)
    dead = dead_letter(hook)
    for n in range(3):
        dead_letter(hook, state="succeeded", n=n)
    api_key_create(team=orders, name="airflow", scopes=["publish"])
    response = member.get("/teams/orders/")
    assert response.status_code == 200
    body = response.content.decode().replace("<wbr>", "")  # names may wrap between parts
    assert owned.name in body and "raw/orders" in body
    (endpoint,) = response.context["endpoints"]
    assert (endpoint.n_succeeded, endpoint.n_dead_letters, endpoint.success_rate) == (3, 1, 75.0)
    assert "75.0 %" in body
    assert [d.pk for d in response.context["dead_letters"]] == [dead.pk]
    assert "airflow" in body and "publish" in body
    assert "Team admins create and revoke keys." in body  # mia is a member, not an admin


def test_team_page_of_another_team_is_404(outsider, orders):
    assert outsider.get("/teams/orders/").status_code == 404
    assert outsider.get("/teams/nobody/").status_code == 404


def test_member_replays_a_dead_letter(member, hook):
    dead = dead_letter(hook)
    response = member.post(f"/teams/orders/deliveries/{dead.pk}/replay")
    assert response.status_code == 302
    dead.refresh_from_db()
    assert dead.state == Delivery.State.PENDING
    assert "will be sent again" in member.get("/teams/orders/").content.decode()


def test_replaying_a_delivery_that_is_not_a_dead_letter_says_so(member, hook):
    done = dead_letter(hook, state="succeeded")
    response = member.post(f"/teams/orders/deliveries/{done.pk}/replay", follow=True)
    assert "only rejected or dead deliveries can be replayed" in response.content.decode()
    done.refresh_from_db()
    assert done.state == Delivery.State.SUCCEEDED


def test_replay_all_dead_letters_of_an_endpoint(member, hook):
    letters = [dead_letter(hook, n=n) for n in range(2)] + [dead_letter(hook, state="rejected")]
    assert member.post(f"/teams/orders/endpoints/{hook.pk}/replay").status_code == 302
    assert {Delivery.objects.get(pk=d.pk).state for d in letters} == {"pending"}


def test_another_team_cannot_replay_our_deliveries(outsider, hook):
    dead = dead_letter(hook)
    assert outsider.post(f"/teams/orders/deliveries/{dead.pk}/replay").status_code == 404
    # Nor through its own team's URL: the delivery is not to its endpoints.
    assert outsider.post(f"/teams/analytics/deliveries/{dead.pk}/replay").status_code == 404
    assert outsider.post(f"/teams/analytics/endpoints/{hook.pk}/replay").status_code == 404
    dead.refresh_from_db()
    assert dead.state == Delivery.State.DEAD


def test_admin_creates_a_key_and_sees_its_token_once(admin, orders):
    response = admin.post("/teams/orders/keys", {"name": "dbt", "scopes": ["read", "publish"]})
    assert response.status_code == 200
    key = ApiKey.objects.get(team=orders, name="dbt")
    assert key.scopes == ["publish", "read"]
    token = response.context["new_token"]
    assert token.startswith(f"tm_{key.public_id}_") and token in response.content.decode()
    assert token not in admin.get("/teams/orders/").content.decode()


def test_governance_scope_is_offered_to_governance_staff_only(
    admin, make_person, client_as, orders
):
    response = admin.post("/teams/orders/keys", {"name": "gov", "scopes": ["governance"]})
    assert response.status_code == 400
    assert "scopes" in response.context["key_form"].errors
    staff = client_as(make_person("gina", orders, role=Membership.Role.ADMIN, is_staff=True))
    assert (
        staff.post("/teams/orders/keys", {"name": "gov", "scopes": ["governance"]}).status_code
        == 200
    )
    assert ApiKey.objects.get(name="gov").scopes == ["governance"]


def test_admin_revokes_a_key(admin, orders):
    key, _ = api_key_create(team=orders, name="old", scopes=["read"])
    response = admin.post(f"/teams/orders/keys/{key.public_id}/revoke")
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_members_who_are_not_admins_cannot_create_or_revoke_keys(member, orders):
    key, _ = api_key_create(team=orders, name="old", scopes=["read"])
    assert member.post("/teams/orders/keys", {"name": "x", "scopes": ["read"]}).status_code == 403
    assert member.post(f"/teams/orders/keys/{key.public_id}/revoke").status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None and ApiKey.objects.count() == 1


def test_another_team_cannot_see_create_or_revoke_our_keys(outsider, orders, analytics):
    key, _ = api_key_create(team=orders, name="secret-ish", scopes=["read"])
    assert outsider.post("/teams/orders/keys", {"name": "x", "scopes": ["read"]}).status_code == 404
    assert outsider.post(f"/teams/orders/keys/{key.public_id}/revoke").status_code == 404
    assert outsider.post(f"/teams/analytics/keys/{key.public_id}/revoke").status_code == 404
    assert "secret-ish" not in outsider.get("/teams/analytics/").content.decode()
    key.refresh_from_db()
    assert key.revoked_at is None


@pytest.mark.parametrize(
    "path",
    ["/teams/orders/keys", "/teams/orders/deliveries/1/replay", "/teams/orders/endpoints/1/replay"],
)
def test_team_forms_without_csrf_token_are_refused(make_person, orders, path):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_person("adam", orders, role=Membership.Role.ADMIN))
    assert client.post(path, {"name": "x", "scopes": ["read"]}).status_code == 403
    assert not ApiKey.objects.exists()


def test_team_page_query_count_is_bounded(
    member, orders, analytics, hook, django_assert_max_num_queries
):
    standby = EndpointFactory(team=orders, url="https://standby.example.com/orders")
    for n in range(10):
        DatasetFactory(owner=orders, sla_cron="0 6 * * *")
        sub = SubscriptionFactory(
            team=orders, dataset=DatasetFactory(owner=analytics), endpoint=hook
        )
        SubscriptionEndpoint.objects.create(subscription=sub, endpoint=standby)  # listed too
        dead_letter(hook, n=n)
        api_key_create(team=orders, name=f"k{n}", scopes=["read"])
    # One query reads every subscription's other endpoints, whatever their number; the
    # newest dead letters take the endpoints, one index range per endpoint, the rows.
    with django_assert_max_num_queries(17):
        response = member.get("/teams/orders/")
    assert response.status_code == 200
    assert response.content.decode().count("https://standby.example.com/orders") >= 10


def test_team_page_shows_a_throttled_endpoint_and_its_rate_limit(member, orders, hook):
    from datetime import timedelta

    from django.utils import timezone

    from catalog.models import Endpoint

    until = timezone.now() + timedelta(seconds=30)
    Endpoint.objects.filter(pk=hook.pk).update(throttled_until=until, rate_limit_per_second=2)
    page = member.get("/teams/orders/").content.decode()
    assert "throttled" in page and until.strftime("%H:%M:%S") in page
    assert "at most 2/s" in page
    Endpoint.objects.filter(pk=hook.pk).update(throttled_until=timezone.now())
    assert "throttled" not in member.get("/teams/orders/").content.decode()
