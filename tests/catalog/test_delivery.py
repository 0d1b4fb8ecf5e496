"""Delivering notifications to real HTTP receivers on loopback, on real PostgreSQL."""

import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from standardwebhooks import Webhook
from werkzeug import Response

from catalog import delivery, endpoint_actions
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
        # Long enough that a pass never re-claims its own retry; tests move it with make_due.
        "backoff_base_seconds": 30,
        "backoff_cap_seconds": 60,
        "read_timeout": 0.5,
        "total_deadline": 2.0,
        "max_attempts": 5,
    }


@pytest.fixture
def setup(httpserver):
    """A dataset with one subscriber whose webhook is the test receiver."""
    owner = TeamFactory(slug="orders")
    consumer = TeamFactory(slug="analytics")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    result = subscription_create(
        actor=Actor(team=consumer), dataset=dataset, endpoint_url=httpserver.url_for("/hook")
    )

    def publish(partition="2026-11-28", **kwargs):
        return readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=partition,
            now=timezone.now(),
            **kwargs,
        )

    return publish, result.endpoint_secret


def make_due():
    """Bring every retry's next attempt to now (the database clock cannot be travelled),
    and lift the throttles that Retry-After answers put on endpoints."""
    Delivery.objects.filter(state="retrying").update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    Endpoint.objects.update(throttled_until=None)


def test_delivery_is_signed_and_verifies_with_standardwebhooks(httpserver, setup, sender):
    publish, secret = setup
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    publish()
    summary = delivery.deliver_due(sender=sender)
    assert summary.by_state == {"succeeded": 1}
    request, _ = httpserver.log[0]
    payload = Webhook(secret).verify(request.get_data(), dict(request.headers))
    assert payload["type"] == "partition.ready"
    assert payload["data"]["partition"] == "2026-11-28"
    assert request.headers["webhook-id"] == payload["id"]
    tampered = request.get_data().replace(b"2026-11-28", b"2026-11-29")
    with pytest.raises(Exception, match="signature"):
        Webhook(secret).verify(tampered, dict(request.headers))
    attempt = DeliveryAttempt.objects.get()
    assert (attempt.number, attempt.status_code, attempt.decision) == (1, 200, "succeeded")


def test_500_then_429_then_timeout_then_200_is_one_delivery_with_one_webhook_id(
    httpserver, setup, sender, settings
):
    # Tiny backoff windows, so only Retry-After can explain a delay of 2 s or more.
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "backoff_base_seconds": 0.01,
        "backoff_cap_seconds": 0.05,
    }
    publish, _ = setup
    answers = iter(
        [
            Response("boom", status=500),
            Response("slow down", status=429, headers={"Retry-After": "2"}),
            "sleep",
            Response("ok", status=200),
        ]
    )

    def handler(request):
        answer = next(answers)
        if answer == "sleep":
            time.sleep(1.0)
            return Response("too late")
        return answer

    httpserver.expect_request("/hook").respond_with_handler(handler)
    publish()
    states = []
    for _ in range(4):
        states.append(str(delivery.deliver_due(sender=sender)))
        make_due()
    row = Delivery.objects.get()
    assert row.state == "succeeded", states
    attempts = list(DeliveryAttempt.objects.order_by("number"))
    assert [(a.status_code, a.error_kind, a.decision) for a in attempts] == [
        (500, "", "retry"),
        (429, "", "retry"),
        (None, "timeout", "retry"),
        (200, "", "succeeded"),
    ]
    assert attempts[0].next_attempt_in_seconds <= 0.05
    assert attempts[1].next_attempt_in_seconds >= 2  # Retry-After honoured as a floor
    ids = {request.headers["webhook-id"] for request, _ in httpserver.log}
    assert len(httpserver.log) == 4 and len(ids) == 1
    assert row.attempts == 4


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_4xx_is_rejected_after_one_attempt(httpserver, setup, sender, status):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("bad signature config", status=status)
    publish()
    delivery.deliver_due(sender=sender)
    make_due()
    delivery.deliver_due(sender=sender)
    row = Delivery.objects.get()
    assert (row.state, row.last_status_code, row.attempts) == ("rejected", status, 1)
    assert DeliveryAttempt.objects.get().response_excerpt == "bad signature config"
    assert len(httpserver.log) == 1


def test_410_gone_disables_the_endpoint(httpserver, setup, sender):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("", status=410)
    publish()
    delivery.deliver_due(sender=sender)
    endpoint = Endpoint.objects.get(kind="webhook")
    assert not endpoint.is_active and "410" in endpoint.disabled_reason
    publish(partition="2026-11-29")
    assert delivery.deliver_due(sender=sender).claimed == 0


def test_retries_stop_at_max_attempts_as_a_dead_letter(httpserver, setup, sender):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("", status=503)
    publish()
    for _ in range(7):
        delivery.deliver_due(sender=sender)
        make_due()
    row = Delivery.objects.get()
    assert (row.state, row.attempts) == ("dead", 5)
    assert len(httpserver.log) == 5


def test_endpoint_failing_too_long_is_disabled(httpserver, setup, sender, settings):
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "disable_after_failing_seconds": 0,
        "disable_after_failures": 2,
    }
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("", status=500)
    publish()
    delivery.deliver_due(sender=sender)
    assert Endpoint.objects.get(kind="webhook").is_active  # one failure is not a streak
    make_due()
    delivery.deliver_due(sender=sender)
    endpoint = Endpoint.objects.get(kind="webhook")
    assert not endpoint.is_active and endpoint.consecutive_failures == 2


def test_success_clears_failing_since(httpserver, setup, sender):
    publish, _ = setup
    answers = iter([Response("", status=500), Response("", status=200)])
    httpserver.expect_request("/hook").respond_with_handler(lambda r: next(answers))
    publish()
    delivery.deliver_due(sender=sender)
    assert Endpoint.objects.get(kind="webhook").failing_since is not None
    make_due()
    delivery.deliver_due(sender=sender)
    assert Endpoint.objects.get(kind="webhook").failing_since is None


def test_worker_whose_lease_expired_cannot_overwrite_the_newer_attempt(httpserver, setup, sender):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("ok")
    publish()
    now = timezone.now()
    [first] = delivery.delivery_claim_due(limit=10, lease_seconds=60, now=now)
    assert delivery.delivery_claim_due(limit=10, lease_seconds=60, now=now) == []  # leased
    Delivery.objects.update(claimed_until=timezone.now() - timedelta(seconds=1))  # lease ran out
    [second] = delivery.delivery_claim_due(limit=10, lease_seconds=60, now=now)
    assert (second.attempt, second.msg_id) == (2, first.msg_id)
    late = delivery.delivery_send(first, sender=sender, now=now)
    assert delivery.delivery_record(claim=first, result=late, started_at=now, now=now) is None
    assert not DeliveryAttempt.objects.exists()
    result = delivery.delivery_send(second, sender=sender, now=now)
    assert (
        delivery.delivery_record(claim=second, result=result, started_at=now, now=now)
        == "succeeded"
    )
    assert list(DeliveryAttempt.objects.values_list("number", flat=True)) == [2]


def test_claim_after_exhausted_attempts_marks_dead_without_sending(httpserver, setup, sender):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("ok")
    publish()
    Delivery.objects.update(attempts=5)  # a worker died during the last allowed attempt
    delivery.deliver_due(sender=sender)
    assert Delivery.objects.get().state == "dead"
    assert httpserver.log == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_share_a_delivery(httpserver):
    owner = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    for i in range(6):
        subscription_create(
            actor=Actor(team=TeamFactory(slug=f"c{i}")),
            dataset=dataset,
            endpoint_url=httpserver.url_for(f"/hook/{i}"),
        )
    for day in range(1, 11):
        readiness_publish(
            actor=Actor(team=owner),
            namespace="s3://lake",
            name="raw/orders",
            partition=f"2026-11-{day:02d}",
            now=timezone.now(),
        )
    barrier = threading.Barrier(4)
    claimed: list[list[int]] = [[] for _ in range(4)]

    def worker(index):
        # A claim skips the endpoints another worker is claiming from (their rate credit
        # is spent under that lock), so finding nothing is not the end while any is left.
        try:
            barrier.wait()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                claims = delivery.delivery_claim_due(limit=7, lease_seconds=60, now=timezone.now())
                claimed[index] += [c.delivery_id for c in claims]
                # Let the others in: on a loaded machine one thread can otherwise take every
                # batch while they sleep, and the test would not see claims overlap at all.
                time.sleep(0.005)
                if not claims:
                    if not Delivery.objects.filter(claim_token__isnull=True).exists():
                        break
                    time.sleep(0.01)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    everything = [d for ids in claimed for d in ids]
    assert len(everything) == len(set(everything)) == 60
    assert sum(1 for ids in claimed if ids) >= 2


def test_rotated_secret_signs_with_old_and_new_during_overlap(httpserver, setup, sender):
    publish, old_secret = setup
    endpoint = Endpoint.objects.get(kind="webhook")
    new_secret = endpoint_actions.endpoint_set_new_secret(endpoint=endpoint, now=timezone.now())
    httpserver.expect_request("/hook").respond_with_data("ok")
    publish()
    delivery.deliver_due(sender=sender)
    request, _ = httpserver.log[0]
    for secret in (old_secret, new_secret):
        Webhook(secret).verify(request.get_data(), dict(request.headers))
    endpoint.refresh_from_db()
    assert endpoint_actions.endpoint_secrets_in_use(
        endpoint, timezone.now() + timedelta(days=2)
    ) == [new_secret]


def test_secret_is_stored_encrypted(setup):
    _, secret = setup
    stored = Endpoint.objects.get(kind="webhook").secret_encrypted
    assert secret not in stored and secret.split("_", 1)[1] not in stored


def test_deliver_due_command_prints_what_it_did(httpserver, setup, capsys):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("ok")
    publish()
    call_command("deliver_due")
    assert "claimed 1: succeeded 1" in capsys.readouterr().out


def test_disabled_endpoint_owner_is_told_by_email_and_slack(httpserver, setup, sender, mailoutbox):
    publish, _ = setup
    consumer = Endpoint.objects.get(kind="webhook").team
    consumer.contact_email = "analytics-oncall@example.com"
    consumer.contact_slack_webhook = httpserver.url_for("/slack")
    consumer.save()
    httpserver.expect_request("/hook").respond_with_data("", status=410)
    httpserver.expect_request("/slack").respond_with_data("ok")
    publish()
    delivery.deliver_due(sender=sender)  # the 410, then the owner notices it queued

    [mail] = mailoutbox
    assert mail.to == ["analytics-oncall@example.com"]
    assert "disabled" in mail.subject and "410 Gone" in mail.body
    slack = [r for r, _ in httpserver.log if r.path == "/slack"]
    assert len(slack) == 1 and "410 Gone" in slack[0].get_json()["text"]
    notices = Delivery.objects.filter(notification__type="endpoint.disabled")
    assert sorted(notices.values_list("state", flat=True)) == ["succeeded", "succeeded"]


def test_owner_is_told_once_even_if_more_failures_arrive(httpserver, setup, sender, mailoutbox):
    publish, _ = setup
    team = Endpoint.objects.get(kind="webhook").team
    team.contact_email = "a@example.com"
    team.save()
    httpserver.expect_request("/hook").respond_with_data("", status=410)
    publish("2026-11-27")
    publish("2026-11-28")
    delivery.deliver_due(sender=sender, batch_size=1)
    assert len(mailoutbox) == 1


def test_rejected_4xx_does_not_count_toward_disabling(httpserver, setup, sender, settings):
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "disable_after_failing_seconds": 0,
        "disable_after_failures": 1,
    }
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("", status=401)
    publish()
    delivery.deliver_due(sender=sender)
    endpoint = Endpoint.objects.get(kind="webhook")
    assert endpoint.is_active and endpoint.failing_since is None


def test_events_published_while_disabled_wait_for_re_enabling(httpserver, setup, sender):
    publish, _ = setup
    answers = iter([Response("", status=410), Response("", status=204)])
    httpserver.expect_request("/hook").respond_with_handler(lambda r: next(answers))
    publish("2026-11-27")
    delivery.deliver_due(sender=sender)  # 410: disabled
    publish("2026-11-28")
    assert delivery.deliver_due(sender=sender).claimed == 0  # waits, unclaimed
    endpoint_actions.endpoint_enable(endpoint=Endpoint.objects.get(kind="webhook"))
    delivery.deliver_due(sender=sender)
    waited = Delivery.objects.get(notification__payload__data__partition="2026-11-28")
    assert waited.state == "succeeded"


def test_nul_in_a_2xx_answer_is_recorded_as_success(httpserver, setup, sender):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data(b"ok\x00thanks")
    publish()
    delivery.deliver_due(sender=sender)
    assert Delivery.objects.get().state == "succeeded"


def test_blocked_address_is_rejected_without_retries(httpserver, setup, sender):
    from outbound import AddressPolicy, Sender

    publish, _ = setup
    publish()
    strict = Sender(policy=AddressPolicy(allow_http=True))
    delivery.deliver_due(sender=strict)
    row = Delivery.objects.get()
    assert (row.state, row.last_error_kind) == ("rejected", "blocked")
    assert "127.0.0.1" not in row.last_error


def test_two_rotations_in_a_row_keep_the_first_secret_signing(httpserver, setup, sender):
    publish, original = setup
    endpoint = Endpoint.objects.get(kind="webhook")
    second = endpoint_actions.endpoint_rotate_secret(endpoint=endpoint, now=timezone.now())
    third = endpoint_actions.endpoint_rotate_secret(endpoint=endpoint, now=timezone.now())
    httpserver.expect_request("/hook").respond_with_data("")
    publish()
    delivery.deliver_due(sender=sender)
    request, _ = httpserver.log[0]
    assert len(request.headers["webhook-signature"].split(" ")) == 3
    for secret in (original, second, third):
        Webhook(secret).verify(request.get_data(), dict(request.headers))


def test_pass_hands_back_claims_its_lease_cannot_cover(httpserver, setup, sender, settings):
    """With a lease shorter than one send's deadline plus margin, nothing is sent on a
    lease that may run out: the claims go back, their attempts uncounted."""
    settings.TIDEMARK_DELIVERY = {
        **settings.TIDEMARK_DELIVERY,
        "lease_seconds": 3,
        "total_deadline": 2.0,
    }
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("")
    publish()
    summary = delivery.deliver_due(sender=sender, max_batches=1)
    row = Delivery.objects.get()
    assert (summary.released, row.state, row.attempts, row.claim_token) == (1, "pending", 0, None)
    assert httpserver.log == []


def test_pass_stops_claiming_after_its_time_budget_and_says_more_is_due(httpserver, setup, sender):
    publish, _ = setup
    httpserver.expect_request("/hook").respond_with_data("")
    for day in ("2026-11-26", "2026-11-27", "2026-11-28"):
        publish(day)
    first = delivery.deliver_due(sender=sender, batch_size=1, max_seconds=0)
    assert (first.claimed, first.more_due) == (1, True)
    rest = delivery.deliver_due(sender=sender, batch_size=1)
    assert (rest.claimed, rest.more_due) == (2, False)


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("https://127.1/hook", True),  # IPv4 shorthand, parsed without resolving
        ("https://0x7f000001/hook", True),
        ("https://[::ffff:127.0.0.1]/hook", True),
        ("https://169.254.169.254/latest/meta-data", True),
        ("https://93.184.215.14/hook", False),
        ("https://hooks.example.com/hook", False),  # a name: the connect-time guard's
    ],
)
def test_webhook_address_refusal_judges_ip_literals_only(url, refused, settings):
    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = []
    assert (endpoint_actions.webhook_address_refusal(url) is not None) == refused
