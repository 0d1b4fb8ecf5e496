"""Ping keys (services, the watchdog API's ``/api/v1/ping-keys``, ``manage.py ping_keys``)
and monitor slugs."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from problems import NotFound, ValidationProblem
from watchdog import monitors, ping_keys
from watchdog.models import Monitor, PingKey

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)


# --- services -----------------------------------------------------------------------------


def test_a_key_is_22_lowercase_letters_and_digits_kept_only_as_its_digest():
    row, key = ping_keys.ping_key_create(owner="orders", name="cron hosts", now=T0)
    assert re.fullmatch(r"[a-z0-9]{22}", key)
    row.refresh_from_db()
    assert row.digest == hashlib.sha256(key.encode()).hexdigest()
    assert (row.prefix, row.owner, row.name) == (key[:4], "orders", "cron hosts")
    stored = [str(v) for v in PingKey.objects.values_list(flat=False).get()]
    assert key not in stored


def test_keys_differ():
    assert len({ping_keys.generate() for _ in range(50)}) == 50


@pytest.mark.parametrize("owner", ["", "a b", "x" * 65, "orders/eu"])
def test_a_key_needs_an_owner_label(owner):
    with pytest.raises(ValidationProblem) as refused:
        ping_keys.ping_key_create(owner=owner, now=T0)
    assert refused.value.errors[0].field == "owner"
    assert not PingKey.objects.exists()


def test_revoking_twice_keeps_the_first_revocation():
    row, _ = ping_keys.ping_key_create(owner="orders", now=T0)
    first = ping_keys.ping_key_revoke(row.pk, now=T0)
    again = ping_keys.ping_key_revoke(row.pk, now=datetime(2026, 12, 1, tzinfo=UTC))
    assert first.revoked_at == again.revoked_at == T0
    with pytest.raises(NotFound):
        ping_keys.ping_key_revoke(row.pk + 100, now=T0)


def test_a_slug_target_costs_one_query_when_the_monitor_exists(django_assert_num_queries):
    from django.db import connections

    from watchdog import db

    _, key = ping_keys.ping_key_create(owner="orders", now=T0)
    monitor = monitors.monitor_create(
        now=T0, name="n", slug="nightly", owner="orders", period_seconds=60
    )
    with django_assert_num_queries(1, connection=connections[db.alias()]):
        target = ping_keys.slug_target(key=key, slug="nightly")
    assert (target.ping_key, target.owner) == (monitor.ping_key, "orders")
    missing = ping_keys.slug_target(key=key, slug="other")
    assert (missing.ping_key, missing.owner) == (None, "orders")
    assert ping_keys.slug_target(key="x" * 22, slug="nightly").owner is None


# --- monitor slugs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slug", "rule"),
    [("Nightly", "slug_format"), ("a b", "slug_format"), ("x" * 101, "max_length")],
)
def test_a_slug_follows_the_slug_url_rule(api, slug, rule):
    response = api.post(
        "/api/v1/monitors", {"name": "n", "period_seconds": 60, "slug": slug}, format="json"
    )
    assert response.status_code == 400, response.content
    assert [(e["field"], e["rule"]) for e in response.json()["errors"]] == [("slug", rule)]


def test_a_slug_is_unique_per_owner(api):
    def create(owner):
        body = {"name": "n", "owner": owner, "period_seconds": 60, "slug": "db-backup_2"}
        return api.post("/api/v1/monitors", body, format="json")

    assert create("orders").status_code == 201
    assert create("billing").status_code == 201
    taken = create("orders")
    assert taken.status_code == 400
    assert taken.json()["errors"][0]["rule"] == "slug_taken"
    first = Monitor.objects.get(owner="orders")
    renamed = api.patch(f"/api/v1/monitors/{first.pk}", {"name": "m"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["slug"] == "db-backup_2"


# --- API ----------------------------------------------------------------------------------


def test_the_api_creates_a_key_shows_it_once_lists_and_revokes_it(api, settings):
    settings.WATCHDOG_PUBLIC_URL = "https://watchdog.example.com/"
    created = api.post("/api/v1/ping-keys", {"owner": "orders", "name": "hosts"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    key = body["key"]
    assert body["ping_url"] == f"https://watchdog.example.com/ping/{key}/{{slug}}"
    assert body["prefix"] == key[:4] and body["revoked_at"] is None

    api.post("/api/v1/ping-keys", {"owner": "billing"}, format="json")
    listed = api.get("/api/v1/ping-keys", {"owner": "orders"}).json()
    assert [(k["id"], k["owner"], k["name"]) for k in listed] == [(body["id"], "orders", "hosts")]
    assert "key" not in listed[0] and key not in str(listed)
    assert len(api.get("/api/v1/ping-keys").json()) == 2

    monitors.monitor_create(now=T0, name="n", slug="nightly", owner="orders", period_seconds=60)
    assert Client().get(f"/ping/{key}/nightly").status_code == 200
    assert api.delete(f"/api/v1/ping-keys/{body['id']}").status_code == 204
    assert api.get("/api/v1/ping-keys", {"owner": "orders"}).json()[0]["revoked_at"] is not None
    assert Client().get(f"/ping/{key}/nightly").status_code == 404


def test_the_api_refuses_a_bad_owner_and_an_unknown_key(api):
    refused = api.post("/api/v1/ping-keys", {"owner": "a b"}, format="json")
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["errors"][0]["field"] == "owner"
    missing = api.delete("/api/v1/ping-keys/999999")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_the_ping_key_api_needs_a_watchdog_token():
    anonymous = APIClient()
    assert anonymous.get("/api/v1/ping-keys").status_code == 401
    assert anonymous.post("/api/v1/ping-keys", {"owner": "x"}, format="json").status_code == 401
    assert not PingKey.objects.exists()


# --- management command -------------------------------------------------------------------


def test_the_command_creates_lists_and_revokes_keys():
    out, err = StringIO(), StringIO()
    call_command("ping_keys", "create", "orders", "--name", "cron hosts", stdout=out, stderr=err)
    key = out.getvalue().strip()
    assert re.fullmatch(r"[a-z0-9]{22}", key) and f"/ping/{key}/{{slug}}" in err.getvalue()
    row = PingKey.objects.get()
    assert row.digest == ping_keys.digest(key)

    listed = StringIO()
    call_command("ping_keys", "list", "--owner", "orders", stdout=listed)
    assert listed.getvalue().split("\t")[:3] == [str(row.pk), "orders", f"{key[:4]}…"]
    assert key not in listed.getvalue()

    call_command("ping_keys", "revoke", str(row.pk), stdout=StringIO())
    row.refresh_from_db()
    assert row.revoked_at is not None
    with pytest.raises(CommandError):
        call_command("ping_keys", "create", "not a label", stdout=StringIO())
