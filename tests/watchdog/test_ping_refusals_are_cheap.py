"""A ping that is refused (over its monitor's rate, an unknown key, a GET to a POST-only
monitor) is answered in one statement, and never waits for the monitor's row: while other
pings hold it, a refusal still answers at once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from watchdog import db, monitors, pings
from watchdog.models import Monitor, Ping

T_PING = pings.PingInput(kind="success", method="GET")


def _monitor(**fields):
    return monitors.monitor_create(now=timezone.now(), name="busy", period_seconds=60, **fields)


@pytest.mark.django_db(databases=["default", "watchdog"])
@pytest.mark.parametrize("kind", ["success", "start", "log"])
def test_over_the_rate_is_one_statement(settings, django_assert_num_queries, kind):
    settings.WATCHDOG_PING_RATE_PER_MINUTE = 5
    monitor = _monitor()
    now = timezone.now()
    Monitor.objects.filter(pk=monitor.pk).update(rate_window_start=now, rate_count=5)
    watchdog_db = connections[db.alias()]
    with (
        django_assert_num_queries(1, connection=watchdog_db),
        pytest.raises(pings.PingRejected) as refused,
    ):
        pings.record(
            ping_key=monitor.ping_key,
            ping=pings.PingInput(kind=kind, method="GET"),
            now=now + timedelta(seconds=15),
        )
    assert (refused.value.status, refused.value.retry_after) == (429, 45)


@pytest.mark.django_db(databases=["default", "watchdog"])
def test_an_unknown_key_and_an_ignored_get_are_one_statement(django_assert_num_queries):
    import uuid

    monitor = _monitor(post_only=True)
    with django_assert_num_queries(2, connection=connections[db.alias()]):
        with pytest.raises(pings.PingRejected) as missing:
            pings.record(ping_key=uuid.uuid4(), ping=T_PING, now=timezone.now())
        ignored = pings.record(ping_key=monitor.ping_key, ping=T_PING, now=timezone.now())
    assert (missing.value.status, ignored) == (404, "ignored")
    assert not Ping.objects.exists()


@pytest.mark.django_db(transaction=True, databases=["default", "watchdog"])
@pytest.mark.timeout(60)
def test_a_ping_over_the_rate_does_not_wait_for_the_row_others_hold(settings):
    """Another transaction holds the monitor's row (as a slow accepted ping would); a ping
    over the rate must still answer at once, so it may not ask for that lock at all."""
    settings.WATCHDOG_PING_RATE_PER_MINUTE = 5
    monitor = _monitor()
    now = timezone.now()
    Monitor.objects.filter(pk=monitor.pk).update(rate_window_start=now, rate_count=5)
    holding, release = threading.Event(), threading.Event()

    def hold_the_row():
        try:
            with transaction.atomic(using=db.alias()):
                Monitor.objects.select_for_update().get(pk=monitor.pk)
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert holding.wait(10)
        with connections[db.alias()].cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # a wait for the lock fails the test
        with pytest.raises(pings.PingRejected) as refused:
            pings.record(ping_key=monitor.ping_key, ping=T_PING, now=now + timedelta(seconds=1))
        assert refused.value.status == 429 and refused.value.retry_after == 59
        with pytest.raises(pings.PingRejected):  # a start too: it never reaches the lock
            pings.record(
                ping_key=monitor.ping_key,
                ping=pings.PingInput(kind="start", method="GET"),
                now=now + timedelta(seconds=2),
            )
    finally:
        release.set()
        holder.join(10)
        with connections[db.alias()].cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
