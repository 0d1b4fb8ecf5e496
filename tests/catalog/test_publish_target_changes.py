"""The kept publish target and the one-statement publish against changes committed by
other connections (as other processes would), concurrent publishers, late incidents and
a connection that died within the health-check delay."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime

import pytest
from django.db import connection

from catalog import errors
from catalog.actors import Actor
from catalog.models import (
    ApiKey,
    Dataset,
    Delivery,
    LatePartition,
    Notification,
    Partition,
    ReadinessEvent,
    Subscription,
    SubscriptionEndpoint,
)
from catalog.services import ownership, publish_targets
from catalog.services.publishing import readiness_publish
from catalog.services.teams import api_key_create
from tests.catalog.factories import (
    DatasetFactory,
    EndpointFactory,
    SubscriptionFactory,
    TeamFactory,
)
from tests.catalog.test_publish_concurrency import _errors, _race

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


def elsewhere(fn):
    """Run ``fn`` on another thread, i.e. another connection (as another process would)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc
        finally:
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    if "error" in out:
        raise out["error"]
    return out.get("value")


@pytest.fixture
def owner():
    return TeamFactory(slug="orders")


@pytest.fixture
def dataset(owner):
    ds = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    SubscriptionFactory.create_batch(3, dataset=ds)
    return ds


@pytest.fixture
def actor(owner):
    key, _ = api_key_create(team=owner, name="p", scopes=[ApiKey.Scope.PUBLISH])
    return Actor(team=owner, api_key=key)


def publish(actor, key, **kw):
    return readiness_publish(
        actor=actor, namespace="s3://lake", name="raw/orders", partition=key, now=NOW, **kw
    )


def deliveries(key):
    return Counter(
        Delivery.objects.filter(notification__payload__data__partition=key).values_list(
            "endpoint_id", flat=True
        )
    )


# --- concurrency -------------------------------------------------------------------------


@pytest.mark.parametrize("warm", [True, False])
def test_many_publishers_of_one_new_partition(actor, dataset, warm):
    if warm:
        publish(actor, "2026-11-01")  # keeps the target
    outcomes = _race(8, lambda i: publish(actor, "2026-11-20"))
    assert not _errors(outcomes), _errors(outcomes)
    codes = Counter(v.status_code for _, v in outcomes)
    assert codes == {201: 1, 200: 7}
    assert ReadinessEvent.objects.filter(partition__key="2026-11-20").count() == 1
    assert Notification.objects.filter(payload__data__partition="2026-11-20").count() == 1
    endpoints = set(dataset.subscriptions.values_list("endpoint_id", flat=True))
    assert deliveries("2026-11-20") == Counter({e: 1 for e in endpoints})


def test_publishers_racing_subscription_changes(actor, dataset, owner):
    publish(actor, "2026-11-01")

    def work(i):
        if i % 2:
            return SubscriptionFactory(dataset=Dataset.objects.get(pk=dataset.pk))
        return publish(actor, f"2026-11-{10 + i:02d}")

    outcomes = _race(8, work)
    assert not _errors(outcomes), _errors(outcomes)


# --- kept target staleness, changes from another connection -----------------------------


def test_subscription_deleted_elsewhere(actor, dataset):
    publish(actor, "2026-11-01")
    gone = dataset.subscriptions.first()
    elsewhere(lambda: Subscription.objects.filter(pk=gone.pk).delete())
    publish(actor, "2026-11-02")
    assert gone.endpoint_id not in deliveries("2026-11-02")
    assert len(deliveries("2026-11-02")) == 2


def test_endpoint_removed_elsewhere(actor, dataset):
    publish(actor, "2026-11-01")
    sub = dataset.subscriptions.first()
    elsewhere(lambda: Subscription.objects.filter(pk=sub.pk).update(endpoint=None))
    publish(actor, "2026-11-02")
    assert sub.endpoint_id not in deliveries("2026-11-02")


def test_second_endpoint_added_and_removed_elsewhere(actor, dataset):
    publish(actor, "2026-11-01")
    sub = dataset.subscriptions.first()
    standby = EndpointFactory(team=sub.team)
    link = elsewhere(
        lambda: SubscriptionEndpoint.objects.create(subscription=sub, endpoint=standby)
    )
    publish(actor, "2026-11-02")
    assert deliveries("2026-11-02")[standby.pk] == 1
    assert len(deliveries("2026-11-02")) == 4
    elsewhere(lambda: SubscriptionEndpoint.objects.filter(pk=link.pk).delete())
    publish(actor, "2026-11-03")
    assert standby.pk not in deliveries("2026-11-03")


def test_pattern_changed_elsewhere(actor, dataset):
    publish(actor, "2026-11-01")
    sub = dataset.subscriptions.first()
    elsewhere(lambda: Subscription.objects.filter(pk=sub.pk).update(partition_pattern="2025-*"))
    publish(actor, "2026-11-02")
    assert sub.endpoint_id not in deliveries("2026-11-02")


def test_retired_elsewhere(actor, dataset):
    publish(actor, "2026-11-01")
    elsewhere(lambda: Dataset.objects.filter(pk=dataset.pk).update(lifecycle="retired"))
    with pytest.raises(errors.DatasetRetired):
        publish(actor, "2026-11-02")
    assert not Partition.objects.filter(key="2026-11-02").exists()


def test_transferred_elsewhere(actor, dataset, owner):
    publish(actor, "2026-11-01")
    other = TeamFactory(slug="other")

    def transfer():
        ds = Dataset.objects.get(pk=dataset.pk)
        t = ownership.dataset_transfer_propose(actor=Actor(team=owner), dataset=ds, to_team="other")
        ownership.dataset_transfer_accept(actor=Actor(team=other), dataset=ds, transfer_id=t.pk)

    elsewhere(transfer)
    with pytest.raises(errors.PublishNotAllowed):
        publish(actor, "2026-11-02")
    assert not Partition.objects.filter(key="2026-11-02").exists()


def test_partitioning_changed_elsewhere(actor, dataset):
    publish(actor, "2026-11-01")
    elsewhere(lambda: Dataset.objects.filter(pk=dataset.pk).update(partitioning="hourly"))
    with pytest.raises(errors.InvalidPartitionKey):
        publish(actor, "2026-11-02")


def test_future_partitions_refused_elsewhere(actor, dataset):
    """The kept target still says the dataset accepts future partitions; the statement
    finds it out of date, and the publish is judged on the dataset as it is now."""
    Dataset.objects.filter(pk=dataset.pk).update(accepts_future_partitions=True)
    publish(actor, "2026-12-24")  # a forecast: keeps the target
    elsewhere(lambda: Dataset.objects.filter(pk=dataset.pk).update(accepts_future_partitions=False))
    with pytest.raises(errors.PartitionInFuture):
        publish(actor, "2026-12-25")
    assert not Partition.objects.filter(key="2026-12-25").exists()


def test_future_partitions_allowed_elsewhere(actor, dataset):
    publish(actor, "2026-11-01")  # keeps the target
    with pytest.raises(errors.PartitionInFuture):
        publish(actor, "2026-12-24")
    elsewhere(lambda: Dataset.objects.filter(pk=dataset.pk).update(accepts_future_partitions=True))
    assert publish(actor, "2026-12-24").status_code == 201


def test_recreated_elsewhere_with_the_same_identity(actor, dataset, owner):
    publish(actor, "2026-11-01")
    other = TeamFactory(slug="other")

    def recreate():
        Dataset.objects.filter(pk=dataset.pk).delete()
        return DatasetFactory(owner=other, namespace="s3://lake", name="raw/orders").pk

    elsewhere(recreate)
    with pytest.raises(errors.PublishNotAllowed):
        publish(actor, "2026-11-02")


def test_recreated_same_owner_gets_its_new_subscribers(actor, dataset, owner):
    publish(actor, "2026-11-01")

    def recreate():
        Dataset.objects.filter(pk=dataset.pk).delete()
        ds = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
        return SubscriptionFactory(dataset=ds).endpoint_id

    endpoint = elsewhere(recreate)
    assert publish(actor, "2026-11-02").status_code == 201
    assert deliveries("2026-11-02") == Counter({endpoint: 1})


def test_made_critical_elsewhere_pings_the_watchdog(actor, dataset, settings):
    settings.TIDEMARK_WATCHDOG_URL = "http://127.0.0.1:9"
    settings.TIDEMARK_WATCHDOG_TOKEN = "t"
    publish(actor, "2026-11-01")
    elsewhere(
        lambda: Dataset.objects.filter(pk=dataset.pk).update(
            criticality=Dataset.Criticality.CRITICAL, sla_cron="0 6 * * *"
        )
    )
    publish(actor, "2026-11-02")
    assert Notification.objects.filter(
        type=Notification.Type.WATCHDOG_PING, payload__data__partition="2026-11-02"
    ).exists()


# --- late incidents through the one statement --------------------------------------------


def test_a_late_partition_is_closed_once_by_the_fast_path(actor, dataset):
    publish(actor, "2026-11-01")  # warm
    LatePartition.objects.create(
        dataset=dataset, partition_key="2026-11-02", deadline_at=NOW, late_at=NOW
    )
    outcomes = _race(4, lambda i: publish(actor, "2026-11-02"))
    assert not _errors(outcomes)
    from catalog import freshness

    freshness.recover_arrived(now=NOW)
    assert LatePartition.objects.get().recovered_at is not None
    assert Notification.objects.filter(type=Notification.Type.DATASET_RECOVERED).count() == 1


# --- a connection killed within the health-check delay ------------------------------------


def test_a_connection_killed_within_the_delay_fails_one_publish_only(actor, dataset):
    from django.db import OperationalError

    connection.close_if_unusable_or_obsolete()  # request_started
    publish(actor, "2026-11-01")  # warm: kept target, used connection
    connection.close_if_unusable_or_obsolete()  # request_finished: used just now
    pid = connection.connection.info.backend_pid
    elsewhere(lambda: connection.cursor().execute("SELECT pg_terminate_backend(%s)", [pid]))

    connection.close_if_unusable_or_obsolete()  # request_started: no check (< 1 s)
    with pytest.raises(OperationalError):
        publish(actor, "2026-11-02")
    connection.close_if_unusable_or_obsolete()  # request_finished: dropped
    assert connection.connection is None

    connection.close_if_unusable_or_obsolete()
    assert publish(actor, "2026-11-02").status_code == 201
    connection.close_if_unusable_or_obsolete()
    assert ReadinessEvent.objects.filter(partition__key="2026-11-02").count() == 1
    assert len(deliveries("2026-11-02")) == 3


def test_a_crash_between_commit_and_the_late_close_is_repaired_once(actor, dataset, monkeypatch):
    from django.db import OperationalError

    from catalog import freshness

    publish(actor, "2026-11-01")
    LatePartition.objects.create(
        dataset=dataset, partition_key="2026-11-02", deadline_at=NOW, late_at=NOW
    )

    def die(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(freshness, "partition_arrived", die)
    with pytest.raises(OperationalError):
        publish(actor, "2026-11-02")
    monkeypatch.undo()
    assert publish(actor, "2026-11-02").status_code == 200  # the client's retry
    assert freshness.recover_arrived(now=NOW) == 1
    assert freshness.recover_arrived(now=NOW) == 0
    assert Notification.objects.filter(type=Notification.Type.DATASET_RECOVERED).count() == 1
    assert ReadinessEvent.objects.filter(partition__key="2026-11-02").count() == 1


# --- a target the statement finds out of date is read again ------------------------------


def _change_right_after_the_read(monkeypatch, change):
    """``change`` commits on another connection just after the publish reads its target
    (and before its statement runs), once."""
    read = publish_targets.publish_target
    done = []

    def read_then_change(*args):
        target = read(*args)
        if not done:
            done.append(True)
            elsewhere(change)
        return target

    monkeypatch.setattr(publish_targets, "publish_target", read_then_change)


def test_ownership_transferred_before_the_statement_is_refused(actor, dataset, owner, monkeypatch):
    """The statement finds the target it just read out of date and writes nothing; the
    publish is then judged on the target as it is now: the former owner is refused."""
    other = TeamFactory(slug="other")

    def transfer():
        ds = Dataset.objects.get(pk=dataset.pk)
        t = ownership.dataset_transfer_propose(actor=Actor(team=owner), dataset=ds, to_team="other")
        ownership.dataset_transfer_accept(actor=Actor(team=other), dataset=ds, transfer_id=t.pk)

    _change_right_after_the_read(monkeypatch, transfer)
    with pytest.raises(errors.PublishNotAllowed):
        publish(actor, "2026-11-02")
    assert not Partition.objects.filter(key="2026-11-02").exists()


def test_retired_before_the_statement_is_refused(actor, dataset, monkeypatch):
    _change_right_after_the_read(
        monkeypatch, lambda: Dataset.objects.filter(pk=dataset.pk).update(lifecycle="retired")
    )
    with pytest.raises(errors.DatasetRetired):
        publish(actor, "2026-11-02")
    assert not Partition.objects.filter(key="2026-11-02").exists()


def test_future_partitions_refused_before_the_statement(actor, dataset, monkeypatch):
    Dataset.objects.filter(pk=dataset.pk).update(accepts_future_partitions=True)
    _change_right_after_the_read(
        monkeypatch,
        lambda: Dataset.objects.filter(pk=dataset.pk).update(accepts_future_partitions=False),
    )
    with pytest.raises(errors.PartitionInFuture):
        publish(actor, "2026-12-24")
    assert not Partition.objects.filter(key="2026-12-24").exists()


def test_made_critical_before_the_statement_pings_the_watchdog(
    actor, dataset, monkeypatch, settings
):
    settings.TIDEMARK_WATCHDOG_URL = "http://127.0.0.1:9"
    settings.TIDEMARK_WATCHDOG_TOKEN = "t"
    _change_right_after_the_read(
        monkeypatch,
        lambda: Dataset.objects.filter(pk=dataset.pk).update(
            criticality=Dataset.Criticality.CRITICAL, sla_cron="0 6 * * *"
        ),
    )
    assert publish(actor, "2026-11-02").status_code == 201
    assert Notification.objects.filter(
        type=Notification.Type.WATCHDOG_PING, payload__data__partition="2026-11-02"
    ).exists()


def test_readyz_does_not_report_a_reachable_database_unreachable(actor, dataset):
    """A kept connection killed less than HEALTH_CHECK_DELAY after its last use: the
    database is reachable, so /readyz tries a new connection rather than answer 503."""
    from django.test import RequestFactory

    from api.views import health

    connection.close_if_unusable_or_obsolete()
    publish(actor, "2026-11-01")
    connection.close_if_unusable_or_obsolete()
    pid = connection.connection.info.backend_pid
    elsewhere(lambda: connection.cursor().execute("SELECT pg_terminate_backend(%s)", [pid]))

    connection.close_if_unusable_or_obsolete()
    response = health.readyz(RequestFactory().get("/readyz"))
    connection.close_if_unusable_or_obsolete()
    assert response.status_code != 503, response.content
