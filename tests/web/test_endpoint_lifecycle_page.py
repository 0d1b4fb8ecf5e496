"""The team page's endpoint lifecycle: enable a disabled endpoint, recover its failed
deliveries since a time (proposed: since it started failing), and its delivery log (the
last attempts there, every one on its own page); members of the owning team only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Delivery, DeliveryAttempt, Endpoint, Membership, Notification
from tests.catalog.factories import EndpointFactory
from tests.web.helpers import dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(make_person, client_as, orders):
    return client_as(make_person("mia", orders))


@pytest.fixture
def outsider(make_person, client_as, analytics):
    return client_as(make_person("otto", analytics, role=Membership.Role.ADMIN))


@pytest.fixture
def hook(orders):
    return EndpointFactory(team=orders, url="https://hooks.example.com/orders")


def attempt(letter: Delivery, *, number=1, status=500, excerpt="boom", ms=120, ago=0):
    return DeliveryAttempt.objects.create(
        delivery=letter,
        endpoint=letter.endpoint,
        number=number,
        started_at=timezone.now() - timedelta(minutes=ago),
        duration_ms=ms,
        status_code=status,
        decision="succeeded" if status == 200 else "retry",
        response_excerpt=excerpt,
    )


def test_disabled_endpoint_offers_enable_and_member_enables_it(member, hook):
    Endpoint.objects.filter(pk=hook.pk).update(
        is_active=False, disabled_reason="every attempt failed", disabled_at=timezone.now()
    )
    body = member.get("/teams/orders/").content.decode()
    assert f"/teams/orders/endpoints/{hook.pk}/enable" in body
    assert f"/teams/orders/endpoints/{hook.pk}/recover" not in body  # enable first
    response = member.post(f"/teams/orders/endpoints/{hook.pk}/enable", follow=True)
    assert "is enabled" in response.content.decode()
    hook.refresh_from_db()
    assert hook.is_active and hook.disabled_at is None


def test_recover_form_proposes_since_it_started_failing_and_recovers(member, hook):
    outage = timezone.now() - timedelta(hours=3)
    Endpoint.objects.filter(pk=hook.pk).update(outage_started_at=outage)
    letters = [dead_letter(hook, n=n) for n in range(2)]
    # Failed before the outage: not proposed, nor recovered since the outage began.
    Delivery.objects.filter(pk=letters[0].pk).update(
        created_at=outage - timedelta(hours=2), finished_at=outage - timedelta(hours=1)
    )
    Notification.objects.filter(pk=letters[0].notification_id).update(
        created_at=outage - timedelta(hours=2)
    )
    body = member.get("/teams/orders/").content.decode()
    assert f'value="{outage:%Y-%m-%dT%H:%M}"' in body
    response = member.post(
        f"/teams/orders/endpoints/{hook.pk}/recover",
        {"since": f"{outage:%Y-%m-%dT%H:%M}"},
        follow=True,
    )
    assert "1 failed delivery will be sent again." in response.content.decode()
    states = {d.pk: Delivery.objects.get(pk=d.pk).state for d in letters}
    assert states == {letters[0].pk: "dead", letters[1].pk: "pending"}


def test_recover_outside_the_window_says_why(member, hook):
    dead_letter(hook)
    too_old = timezone.now() - timedelta(days=30)
    response = member.post(
        f"/teams/orders/endpoints/{hook.pk}/recover",
        {"since": f"{too_old:%Y-%m-%dT%H:%M}"},
        follow=True,
    )
    assert "at most 14 days back" in response.content.decode()
    bad = member.post(f"/teams/orders/endpoints/{hook.pk}/recover", {"since": "x"}, follow=True)
    assert "Recover: Enter a valid date/time." in bad.content.decode()


def test_team_page_shows_the_last_attempts_with_a_link_to_all(member, hook):
    letter = dead_letter(hook)
    for n in range(1, 8):
        attempt(letter, number=n, excerpt=f"answer {n}", ms=100 + n, ago=10 - n)
    response = member.get("/teams/orders/")
    body = response.content.decode()
    (endpoint,) = response.context["endpoints"]
    assert [a.number for a in endpoint.recent_attempts] == [7, 6, 5, 4, 3]
    assert "answer 7" in body and "answer 2" not in body and "107 ms" in body
    assert f"/teams/orders/endpoints/{hook.pk}/attempts" in body
    page = member.get(f"/teams/orders/endpoints/{hook.pk}/attempts").content.decode()
    assert "answer 1" in page and "answer 7" in page and str(letter.notification_id) in page
    failed = member.get(f"/teams/orders/endpoints/{hook.pk}/attempts?outcome=succeeded")
    assert "answer 1" not in failed.content.decode()


def test_another_team_cannot_enable_recover_or_read_our_endpoint(outsider, hook):
    Endpoint.objects.filter(pk=hook.pk).update(is_active=False)
    since = {"since": f"{timezone.now():%Y-%m-%dT%H:%M}"}
    for slug in ("orders", "analytics"):
        base = f"/teams/{slug}/endpoints/{hook.pk}"
        assert outsider.post(f"{base}/enable").status_code == 404
        assert outsider.post(f"{base}/recover", since).status_code == 404
        assert outsider.get(f"{base}/attempts").status_code == 404
    hook.refresh_from_db()
    assert not hook.is_active


def test_get_of_an_action_is_a_page_pointing_back(member, hook):
    response = member.get(f"/teams/orders/endpoints/{hook.pk}/recover")
    assert response.status_code == 405 and response["Allow"] == "POST"
