"""A subscription with several endpoints on every path that tells subscribers: a change
notice's announcement and reminders, lateness at a consumer's need-by (and not again at
the SLA), a declaration's catch-up; and its services' rules
(``catalog.services.subscription_endpoints``)."""

import pytest

from catalog.actors import Actor
from catalog.change_notices import send_due
from catalog.models import (
    ChangeNotice,
    Delivery,
    Notification,
    Subscription,
    SubscriptionEndpoint,
)
from catalog.services.subscription_endpoints import (
    subscription_endpoint_add,
    subscription_endpoint_remove,
)
from catalog.services.subscriptions import subscription_create, subscription_delete
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.catalog.test_change_notices import DAY, EFFECTIVE_AT, NOW, announce
from tests.catalog.test_need_by_judging import dataset, owner, run_pass, subscribe, told, utc  # noqa: F401

pytestmark = pytest.mark.django_db

FIRST = "https://hooks.example.com/analytics"
SECOND = "https://standby.example.com/analytics"


def _declared(actor, dataset, url):  # noqa: F811 - a name, not the fixture
    return subscription_create(actor=actor, dataset=dataset, endpoint_url=url).subscription


def _two_endpoints(subscription):
    subscription_endpoint_add(
        actor=Actor(team=subscription.team), subscription_id=subscription.pk, url=SECOND
    )
    return subscription


def _urls(notification):
    return set(
        Delivery.objects.filter(notification=notification).values_list("endpoint__url", flat=True)
    )


def test_a_change_notice_and_its_reminders_reach_every_endpoint():
    read = DatasetFactory(namespace="s3://lake", name="raw/orders", change_notice_days=14)
    team = TeamFactory(slug="analytics")
    subscription = subscription_create(
        actor=Actor(team=team), dataset=read, endpoint_url=FIRST, now=NOW
    ).subscription
    _two_endpoints(subscription)
    announce(read, kind=ChangeNotice.Kind.BREAKING_SCHEMA_CHANGE)
    announced = Notification.objects.get(type="change_notice.announced", dataset=read)
    assert {FIRST, SECOND} <= _urls(announced)
    send_due(now=EFFECTIVE_AT - 7 * DAY)
    reminder = Notification.objects.get(type="change_notice.reminder")
    assert {FIRST, SECOND} <= _urls(reminder)


def test_lateness_at_a_need_by_reaches_every_endpoint_once(owner, dataset):  # noqa: F811
    early = subscribe(dataset, "early", "0 6 * * *")
    _two_endpoints(early)
    assert run_pass(utc(2026, 11, 29, 6, 0, 30)) == 1
    early_urls = {"https://hooks.example.com/early", SECOND}
    assert told("dataset.late", "2026-11-28") == {url: ["need_by"] for url in early_urls}
    # The SLA's dataset.late skips both: each endpoint is told once per partition.
    assert run_pass(utc(2026, 11, 29, 9, 30, 5)) == 1
    assert {url: when for url, when in told("dataset.late", "2026-11-28").items()} == {
        **{url: ["need_by"] for url in early_urls},
        "mailto:orders-oncall@example.com": ["sla"],
    }


def test_removing_every_endpoint_and_declaring_with_none_keeps_the_declaration():
    read = DatasetFactory()
    team = TeamFactory(slug="analytics")
    actor = Actor(team=team)
    subscription = subscription_create(actor=actor, dataset=read, endpoint_url=FIRST).subscription
    _two_endpoints(subscription)
    again = subscription_create(actor=actor, dataset=read, endpoint_url="").subscription
    assert again.pk == subscription.pk and again.endpoint is None
    assert not SubscriptionEndpoint.objects.exists()
    # A declaration without an endpoint takes the one given (no move: it had none).
    taken = subscription_create(actor=actor, dataset=read, endpoint_url=SECOND).subscription
    assert taken.endpoint.url == SECOND


def test_removing_the_last_endpoint_leaves_the_subscription_delivering_nowhere():
    read = DatasetFactory()
    team = TeamFactory(slug="analytics")
    actor = Actor(team=team)
    subscription = subscription_create(actor=actor, dataset=read, endpoint_url=FIRST).subscription
    removed = subscription_endpoint_remove(
        actor=actor, subscription_id=subscription.pk, endpoint_id=subscription.endpoint_id
    )
    assert removed.endpoint_id is None and Subscription.objects.get().endpoint_id is None
    # Adding one to a subscription without any makes it its first.
    added = subscription_endpoint_add(actor=actor, subscription_id=subscription.pk, url=SECOND)
    assert Subscription.objects.get().endpoint_id == added.endpoint.pk
    assert not SubscriptionEndpoint.objects.exists()


def test_deleting_a_subscription_deletes_its_endpoint_links_not_its_endpoints():
    read = DatasetFactory()
    team = TeamFactory(slug="analytics")
    actor = Actor(team=team)
    subscription = subscription_create(actor=actor, dataset=read, endpoint_url=FIRST).subscription
    _two_endpoints(subscription)
    subscription_delete(actor=actor, subscription_id=subscription.pk)
    assert not SubscriptionEndpoint.objects.exists()
    assert set(team.endpoints.values_list("url", flat=True)) == {FIRST, SECOND}
