"""An endpoint's lifecycle on real HTTP receivers on loopback: failing until disabled, its
team told, enabled again and "recover since T" sending every failed delivery since T
with its original webhook-id (catalog.recovery)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks import Webhook
from werkzeug import Response

from catalog import delivery, endpoint_actions, errors, recovery
from catalog.actors import Actor
from catalog.models import Delivery, DeliveryAttempt, Endpoint
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_delivery(settings):
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "backoff_base_seconds": 30,
        "backoff_cap_seconds": 60,
        "read_timeout": 0.5,
        "total_deadline": 2.0,
        # One attempt each: a 5xx makes a dead letter at once.
        "max_attempts": 1,
        # Disabled at the third retryable failure in a row (no wait: the clock is real).
        "disable_after_failing_seconds": 0,
        "disable_after_failures": 3,
    }


class Receiver:
    """A consumer's webhook receiver: 500 (or 422 for chosen partitions) while broken,
    204 once fixed; keeps what it was sent, in order."""

    def __init__(self, httpserver, secret):
        self.broken = True
        self.reject = set()
        self.received = []  # (webhook-id, partition, verified payload) per request
        self.secret = secret
        httpserver.expect_request("/hook").respond_with_handler(self.answer)

    def answer(self, request):
        payload = Webhook(self.secret).verify(request.get_data(), dict(request.headers))
        partition = payload["data"]["partition"]
        self.received.append((request.headers["webhook-id"], partition))
        if partition in self.reject and self.broken:
            return Response("unknown partition format", status=422)
        return Response("database down", status=500) if self.broken else Response("", 204)

    def partitions(self):
        return [partition for _, partition in self.received]


@pytest.fixture
def world(httpserver):
    owner = TeamFactory(slug="orders")
    consumer = TeamFactory(slug="analytics", contact_email="analytics-oncall@example.com")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    result = subscription_create(
        actor=Actor(team=consumer), dataset=dataset, endpoint_url=httpserver.url_for("/hook")
    )

    def publish(partition):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
        )

    receiver = Receiver(httpserver, result.endpoint_secret)
    return publish, receiver, Endpoint.objects.get(kind="webhook")


def webhook_id(partition):
    row = Delivery.objects.get(notification__payload__data__partition=partition)
    return str(row.notification_id)


def test_failing_endpoint_is_disabled_then_enabled_and_recovered_since_t(world, sender, mailoutbox):
    publish, receiver, endpoint = world
    publish("2026-11-20")
    delivery.deliver_due(sender=sender)  # 500: dead at once, failure 1 in a row
    since = timezone.now()
    receiver.reject = {"2026-11-22"}
    for day in ("2026-11-21", "2026-11-22", "2026-11-23"):
        publish(day)
    delivery.deliver_due(sender=sender)  # 500, 422 (not a streak failure), 500: disabled
    endpoint.refresh_from_db()
    assert not endpoint.is_active and endpoint.consecutive_failures == 3
    assert endpoint.disabled_at is not None and endpoint.outage_started_at is not None
    assert endpoint.outage_started_at == endpoint.failing_since
    publish("2026-11-24")  # while disabled: waits, never attempted
    delivery.deliver_due(sender=sender)  # sends the owner notice, nothing to the endpoint
    [told] = [m for m in mailoutbox if "disabled" in m.subject]
    assert told.to == ["analytics-oncall@example.com"] and endpoint.url in told.body
    assert receiver.partitions() == [
        "2026-11-20",
        "2026-11-21",
        "2026-11-22",
        "2026-11-23",
    ]
    first_ids = dict((p, i) for i, p in receiver.received)

    with pytest.raises(errors.EndpointDisabled, match="enable it first"):
        recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now())

    receiver.broken = False
    endpoint_actions.endpoint_enable(endpoint=endpoint)
    endpoint.refresh_from_db()
    assert endpoint.disabled_at is None and endpoint.outage_started_at is not None
    delivery.deliver_due(sender=sender)  # what waited while disabled goes at once
    assert receiver.partitions()[4:] == ["2026-11-24"]

    assert recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now()).queued == 3
    # Idempotent while pending: nothing is queued twice.
    assert recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now()).queued == 0
    delivery.deliver_due(sender=sender)
    recovered = receiver.received[5:]
    # Sent concurrently once the endpoint answers: in any order (catalog.sending).
    assert sorted(p for _, p in recovered) == ["2026-11-21", "2026-11-22", "2026-11-23"]
    for sent_id, partition in recovered:  # the original webhook-id, verified above
        assert sent_id == first_ids[partition] == webhook_id(partition)
    assert Delivery.objects.get(notification__payload__data__partition="2026-11-20").state == (
        "dead"  # failed before since: not recovered
    )
    # Succeeded now: a later recovery sends none of them again.
    assert recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now()).queued == 0
    delivery.deliver_due(sender=sender)
    assert len(receiver.received) == 8


def test_recovered_delivery_that_fails_again_is_recovered_again(world, sender):
    publish, receiver, endpoint = world
    since = timezone.now()
    publish("2026-11-21")
    delivery.deliver_due(sender=sender)
    assert recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now()).queued == 1
    delivery.deliver_due(sender=sender)  # still broken: a dead letter again
    assert Delivery.objects.get(endpoint=endpoint).state == "dead"
    receiver.broken = False
    assert recovery.endpoint_recover(endpoint=endpoint, since=since, now=timezone.now()).queued == 1
    delivery.deliver_due(sender=sender)
    assert Delivery.objects.get(endpoint=endpoint).state == "succeeded"
    assert len({i for i, _ in receiver.received}) == 1 and len(receiver.received) == 3


def test_attempts_record_their_endpoint_for_its_delivery_log(world, sender):
    publish, _receiver, endpoint = world
    publish("2026-11-21")
    delivery.deliver_due(sender=sender)
    attempt = DeliveryAttempt.objects.get()
    assert attempt.endpoint_id == endpoint.pk
    assert (attempt.status_code, attempt.response_excerpt) == (500, "database down")


@pytest.mark.parametrize(
    ("offset", "rule"),
    [
        (timedelta(seconds=1), "not_in_future"),
        (timedelta(days=-14, minutes=-6), "max_window"),
    ],
)
def test_since_out_of_the_window_is_refused_naming_since(world, offset, rule):
    _, _, endpoint = world
    now = timezone.now()
    with pytest.raises(errors.RecoverSinceOutOfRange) as raised:
        recovery.endpoint_recover(endpoint=endpoint, since=now + offset, now=now)
    assert [(e.field, e.rule) for e in raised.value.errors] == [("since", rule)]
    assert raised.value.status == 422
    assert raised.value.extra["earliest_since"].startswith(str((now - timedelta(days=14)).date()))


def test_since_computed_as_now_minus_the_window_is_accepted(world):
    _, _, endpoint = world
    now = timezone.now()
    since = now - timedelta(days=14, minutes=4)  # a client's "now - 14 days", a bit late
    assert recovery.endpoint_recover(endpoint=endpoint, since=since, now=now).queued == 0


def test_window_never_reaches_past_the_dead_letter_retention(settings):
    settings.TIDEMARK_RETENTION = {**settings.TIDEMARK_RETENTION, "dead_letters_days": 7}
    now = timezone.now()
    window = recovery.recover_window(now=now)
    assert (window.days, window.earliest) == (7, now - timedelta(days=7))


def test_default_since_is_when_it_started_failing_including_what_failed_with_it(world, sender):
    publish, _receiver, endpoint = world
    now = timezone.now()
    assert recovery.recover_default_since(endpoint=endpoint, now=now) == now - timedelta(days=1)
    publish("2026-11-21")
    made = Delivery.objects.get().created_at
    delivery.deliver_due(sender=sender)  # the first failure: failing_since is after made
    endpoint.refresh_from_db()
    assert endpoint.failing_since > made
    assert recovery.recover_default_since(endpoint=endpoint, now=timezone.now()) == made


def test_default_since_after_enabling_is_the_outage_that_disabled_it(world, sender):
    publish, _receiver, endpoint = world
    for day in ("2026-11-21", "2026-11-22", "2026-11-23"):
        publish(day)
    delivery.deliver_due(sender=sender)
    first = Delivery.objects.order_by("id").first().created_at
    endpoint_actions.endpoint_enable(endpoint=Endpoint.objects.get(pk=endpoint.pk))
    endpoint.refresh_from_db()
    assert endpoint.failing_since is None
    assert recovery.recover_default_since(endpoint=endpoint, now=timezone.now()) == first


def test_default_since_is_never_older_than_the_window(world):
    _, _, endpoint = world
    now = timezone.now()
    Endpoint.objects.filter(pk=endpoint.pk).update(failing_since=now - timedelta(days=40))
    endpoint.refresh_from_db()
    assert recovery.recover_default_since(endpoint=endpoint, now=now) == now - timedelta(days=14)


def test_gone_disables_with_the_outage_starting_at_that_attempt(world, httpserver, sender):
    publish, _receiver, endpoint = world
    httpserver.clear_all_handlers()
    httpserver.expect_request("/hook").respond_with_data("", status=410)
    publish("2026-11-21")
    delivery.deliver_due(sender=sender)
    endpoint.refresh_from_db()
    assert not endpoint.is_active and endpoint.failing_since is None
    assert endpoint.outage_started_at == endpoint.disabled_at
