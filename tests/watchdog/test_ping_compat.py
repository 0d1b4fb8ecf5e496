"""The ping endpoints answer as Healthchecks' Pinging API does: ``/log``, methods, CORS,
``Ping-Body-Limit``, ``rid`` as a UUID, exit statuses, 429 with ``Retry-After``, and slug
URLs by ping key with ``?create=1``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from watchdog import monitors, ping_keys, selectors
from watchdog.models import Channel, Monitor, Ping

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
RID = "123e4567-e89b-12d3-a456-426614174000"


@pytest.fixture
def monitor():
    return monitors.monitor_create(now=T0, name="backup", period_seconds=3600, grace_seconds=60)


@pytest.fixture
def client():
    return Client()


def _url(monitor, suffix=""):
    return f"/ping/{monitor.ping_key}{suffix}"


# --- /log ---------------------------------------------------------------------------------


def test_a_log_ping_is_kept_and_changes_nothing(client, monitor):
    with time_machine.travel(T0, tick=False):
        answer = client.post(_url(monitor, "/log"), "hello", content_type="text/plain")
    assert (answer.status_code, answer.content) == (200, b"OK")
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.NEW
    assert monitor.last_ping_at is None and monitor.deadline_at is None
    logged = Ping.objects.get(monitor=monitor)
    assert (logged.kind, logged.body, logged.method) == ("log", "hello", "POST")
    assert monitor.rate_count == 1  # counted against the rate all the same


def test_a_log_ping_neither_resolves_nor_opens_an_incident(client, monitor):
    with time_machine.travel(T0, tick=False):
        client.get(_url(monitor, "/fail"))
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.DOWN
    with time_machine.travel(T0 + timedelta(seconds=5), tick=False):
        client.get(_url(monitor, "/log"))
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.DOWN
    assert monitor.incidents.filter(resolved_at__isnull=True).count() == 1
    assert monitor.last_ping_kind == "fail"


def test_a_log_ping_is_shown_with_the_monitors_recent_pings(client, monitor):
    client.post(_url(monitor, "/log"), "step 2 of 5", content_type="text/plain")
    shown = selectors.monitor_activity(monitor=monitor).pings
    assert [p.kind for p in shown] == ["log"]


# --- methods, CORS, headers ---------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/start", "/fail", "/log", "/0", "/7"])
def test_every_ping_answer_allows_any_origin_and_tells_the_body_limit(client, monitor, suffix):
    answer = client.get(_url(monitor, suffix))
    assert (answer.status_code, answer.content) == (200, b"OK")
    assert answer["Access-Control-Allow-Origin"] == "*"
    assert answer["Ping-Body-Limit"] == "10000"
    assert "Ping-Body-Limit" in answer["Access-Control-Expose-Headers"]
    assert "no-cache" in answer["Cache-Control"]


def test_refusals_carry_the_cors_header_too(client):
    missing = client.get("/ping/6f9619ff-8b86-d011-b42d-00cf4fc964ff")
    assert (missing.status_code, missing.content) == (404, b"not found")
    assert missing["Access-Control-Allow-Origin"] == "*"


def test_a_preflight_is_answered_and_records_nothing(client, monitor):
    answer = client.options(
        _url(monitor),
        HTTP_ORIGIN="https://status.example.com",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type, x-job",
    )
    assert answer.status_code == 204
    assert answer["Access-Control-Allow-Origin"] == "*"
    assert answer["Access-Control-Allow-Methods"] == "GET, HEAD, POST"
    assert answer["Access-Control-Allow-Headers"] == "content-type, x-job"
    assert answer["Access-Control-Max-Age"] == "600"
    assert not Ping.objects.exists()


def test_a_preflight_asking_for_odd_headers_is_not_echoed(client, monitor):
    answer = client.options(_url(monitor), HTTP_ACCESS_CONTROL_REQUEST_HEADERS="a\r\nb: c")
    assert answer.status_code == 204 and "Access-Control-Allow-Headers" not in answer


def test_head_and_post_ping_other_methods_are_refused(client, monitor):
    assert client.head(_url(monitor)).status_code == 200
    assert client.post(_url(monitor), "done", content_type="text/plain").status_code == 200
    refused = client.put(_url(monitor))
    assert refused.status_code == 405 and refused["Allow"] == "GET, HEAD, POST, OPTIONS"
    assert refused["Access-Control-Allow-Origin"] == "*"
    assert sorted(Ping.objects.values_list("method", flat=True)) == ["HEAD", "POST"]


def test_the_body_is_cut_at_the_limit_the_header_names(client, monitor, settings):
    settings.WATCHDOG_PING_BODY_LIMIT = 5
    answer = client.post(_url(monitor, "/log"), "hello world", content_type="text/plain")
    assert answer["Ping-Body-Limit"] == "5"
    assert Ping.objects.get().body == "hello"
    client.post(_url(monitor), "hello world", content_type="text/plain")  # the one statement
    assert sorted(Ping.objects.values_list("body", flat=True)) == ["hello", "hello"]


# --- rid, exit status ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "rid", ["12345", "684e2e73-017e-465f-8149-d70b7c5aaa490", "", "r1", "{" + RID + "}"]
)
def test_a_run_id_that_is_not_a_uuid_is_refused(client, monitor, rid):
    answer = client.get(_url(monitor, "/start"), {"rid": rid})
    assert (answer.status_code, answer.content) == (400, b"invalid uuid format")
    assert not Ping.objects.exists()


def test_a_run_id_in_capitals_pairs_with_the_same_in_lowercase(client, monitor):
    with time_machine.travel(T0, tick=False):
        assert client.get(_url(monitor, "/start"), {"rid": RID.upper()}).status_code == 200
    with time_machine.travel(T0 + timedelta(seconds=42), tick=False):
        assert client.get(_url(monitor), {"rid": RID}).status_code == 200
    finished = Ping.objects.get(kind="success")
    assert (finished.run_id, finished.duration_ms) == (RID, 42_000)


@pytest.mark.parametrize("status", ["256", "1000"])
def test_an_exit_status_over_255_is_an_invalid_url(client, monitor, status):
    answer = client.get(_url(monitor, f"/{status}"))
    assert (answer.status_code, answer.content) == (400, b"invalid url format")


# --- rate limit ---------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/start", "/log"])
def test_over_the_rate_is_429_with_the_seconds_until_the_window_ends(
    client, monitor, settings, suffix
):
    settings.WATCHDOG_PING_RATE_PER_MINUTE = 2
    Monitor.objects.filter(pk=monitor.pk).update(rate_window_start=T0, rate_count=2)
    with time_machine.travel(T0 + timedelta(seconds=20, milliseconds=500), tick=False):
        answer = client.get(_url(monitor, suffix))
    assert answer.status_code == 429
    assert answer["Retry-After"] == "40"
    assert answer["Access-Control-Allow-Origin"] == "*"
    assert b"rate limited" in answer.content
    assert not Ping.objects.exists()
    with time_machine.travel(T0 + timedelta(seconds=61), tick=False):
        assert client.get(_url(monitor, suffix)).status_code == 200


# --- slug URLs ----------------------------------------------------------------------------


@pytest.fixture
def key():
    _, value = ping_keys.ping_key_create(owner="orders", name="cron hosts", now=T0)
    return value


def test_create_1_makes_the_monitor_on_its_first_ping(client, key):
    pager = Channel.objects.create(name="orders", kind="pagerduty", target="R" * 32, owner="orders")
    Channel.objects.create(name="billing", kind="pagerduty", target="B" * 32, owner="billing")
    with time_machine.travel(T0, tick=False):
        created = client.get(f"/ping/{key}/db-backup?create=1")
    assert (created.status_code, created.content) == (201, b"Created")
    assert created["Access-Control-Allow-Origin"] == "*"
    monitor = Monitor.objects.get(slug="db-backup")
    assert (monitor.owner, monitor.name, monitor.kind) == ("orders", "db-backup", "period")
    assert (monitor.period_seconds, monitor.grace_seconds) == (86400, 3600)
    assert list(monitor.channels.all()) == [pager]
    assert monitor.state == Monitor.State.UP and monitor.pings.count() == 1
    again = client.get(f"/ping/{key}/db-backup?create=1")
    assert (again.status_code, again.content) == (200, b"OK")
    assert Monitor.objects.filter(slug="db-backup").count() == 1


@pytest.mark.parametrize(
    ("suffix", "kind"),
    [("", "success"), ("/start", "start"), ("/fail", "fail"), ("/log", "log"), ("/0", "success")],
)
def test_slug_urls_take_every_suffix(client, key, suffix, kind):
    monitor = monitors.monitor_create(
        now=T0, name="Nightly", slug="nightly", owner="orders", period_seconds=3600
    )
    answer = client.post(f"/ping/{key}/nightly{suffix}", "out", content_type="text/plain")
    assert (answer.status_code, answer.content) == (200, b"OK")
    assert Ping.objects.get(monitor=monitor).kind == kind


def test_a_slug_url_reaches_only_the_keys_owners_monitor(client, key):
    ours = monitors.monitor_create(now=T0, name="a", slug="load", owner="orders", period_seconds=60)
    theirs = monitors.monitor_create(
        now=T0, name="b", slug="load", owner="billing", period_seconds=60
    )
    assert client.get(f"/ping/{key}/load").status_code == 200
    assert (ours.pings.count(), theirs.pings.count()) == (1, 0)


def test_without_create_1_an_unknown_slug_is_not_found(client, key):
    answer = client.get(f"/ping/{key}/db-backup")
    assert (answer.status_code, answer.content) == (404, b"not found")
    assert client.get(f"/ping/{key}/db-backup?create=0").status_code == 404
    assert not Monitor.objects.exists()


def test_an_unknown_or_revoked_key_is_not_found_even_with_create_1(client, key):
    assert client.get("/ping/rrrrrrrrrrrrrrrrrrrrrr/db-backup?create=1").status_code == 404
    ping_keys.ping_key_revoke(ping_keys.ping_key_list().get().pk, now=T0)
    assert client.get(f"/ping/{key}/db-backup?create=1").status_code == 404
    assert not Monitor.objects.exists()


def test_a_slug_in_capitals_or_too_long_is_an_invalid_url(client, key):
    upper = client.get(f"/ping/{key}/DB-backup?create=1")
    assert (upper.status_code, upper.content) == (400, b"invalid url format")
    long = client.get(f"/ping/{key}/{'a' * 101}?create=1")
    assert (long.status_code, long.content) == (400, b"invalid url format")
    assert not Monitor.objects.exists()


def test_a_bad_rid_creates_nothing(client, key):
    assert client.get(f"/ping/{key}/db-backup?create=1&rid=nope").status_code == 400
    assert not Monitor.objects.exists()


def test_create_1_stops_at_the_owners_limit(client, key, settings):
    settings.WATCHDOG_AUTO_CREATE_LIMIT = 1
    assert client.get(f"/ping/{key}/one?create=1").status_code == 201
    refused = client.get(f"/ping/{key}/two?create=1")
    assert refused.status_code == 404 and b"create=1 refused" in refused.content
    assert list(Monitor.objects.values_list("slug", flat=True)) == ["one"]


def test_two_first_pings_at_once_make_one_monitor(key):
    first, created = ping_keys.monitor_create_for_slug(owner="orders", slug="etl", now=T0)
    second, again = ping_keys.monitor_create_for_slug(owner="orders", slug="etl", now=T0)
    assert (created, again) == (True, False) and first == second
    assert Monitor.objects.filter(slug="etl").count() == 1
