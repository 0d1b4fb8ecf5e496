"""The watchdog's REST API in process: token auth, channels, monitors (validation as RFC 9457
problems naming fields), schedule changes, pause and resume, filters, and the token
command. Time is moved with time-machine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from watchdog import loop, paging, tokens
from watchdog.models import ApiToken, Channel, Incident, Monitor, Page

pytestmark = [
    pytest.mark.django_db(databases=["default", "watchdog"]),
    pytest.mark.urls("config.urls_watchdog"),
]

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
PROBLEM = "application/problem+json"


@pytest.fixture
def clock():
    """Frozen at T0; ``clock.move_to(when)`` moves it."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def token(db):
    _, value = tokens.create("test")
    return value


@pytest.fixture
def api(token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def pagerduty_channel(api, clock) -> dict:
    response = api.post(
        "/api/v1/channels",
        {"name": "orders on-call", "kind": "pagerduty", "target": "R" * 32, "owner": "orders"},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()


def _problem(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status
    assert {"type", "title", "detail", "code"} <= set(body)
    return body


def _fields(problem: dict) -> set[str]:
    return {error["field"] for error in problem.get("errors", [])}


def _cycle(clock, at: datetime):
    clock.move_to(at)
    return loop.run_cycle(sender=paging.sender_from_settings(), now=at)


# --- auth -------------------------------------------------------------------------------


def test_no_token_is_refused_as_a_problem(db):
    for path in ("/api/v1/monitors", "/api/v1/channels", "/api/v1/incidents"):
        response = APIClient().get(path)
        body = _problem(response, 401)
        assert body["code"] == "not_authenticated"
        assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    [
        "Bearer wd_000000000000_not-the-secret",
        "Bearer wd_short_secret",
        "Bearer tm_something_else",
        "Basic dXNlcjpwYXNz",
        "Bearer",
    ],
)
def test_a_bad_token_is_refused(db, token, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert _problem(client.get("/api/v1/monitors"), 401)["code"] == "authentication_failed"


def test_a_token_with_the_right_id_but_wrong_secret_is_refused(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token[:-4]}AAAA")
    _problem(client.get("/api/v1/monitors"), 401)


def test_a_revoked_token_is_refused(api, token, clock):
    assert api.get("/api/v1/monitors").status_code == 200
    tokens.revoke(ApiToken.objects.get(), now=T0)
    _problem(api.get("/api/v1/monitors"), 401)


def test_the_command_prints_a_token_that_authenticates(db):
    out = StringIO()
    call_command("create_watchdog_token", "catalog", stdout=out)
    printed = out.getvalue().strip()
    assert printed.startswith("wd_")
    row = ApiToken.objects.get(name="catalog")
    assert row.public_id in printed and row.digest not in printed  # only a digest is kept

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {printed}")
    assert client.get("/api/v1/monitors").status_code == 200


# --- channels ---------------------------------------------------------------------------


def test_a_webhook_channel_shows_its_signing_secret_once(api):
    created = api.post(
        "/api/v1/channels",
        {"name": "ops hook", "kind": "webhook", "target": "https://hooks.example.com/wd"},
        format="json",
    )
    assert created.status_code == 201, created.content
    secret = created.json()["signing_secret"]
    assert secret.startswith("whsec_")
    channel = Channel.objects.get(pk=created.json()["id"])
    assert channel.secret_encrypted and secret not in channel.secret_encrypted
    assert paging.decrypt(channel.secret_encrypted) == secret

    pagerduty = api.post(
        "/api/v1/channels",
        {"name": "pd", "kind": "pagerduty", "target": "R" * 32},
        format="json",
    )
    assert pagerduty.status_code == 201
    assert "signing_secret" not in pagerduty.json()

    listed = api.get("/api/v1/channels")
    assert [c["name"] for c in listed.json()] == ["ops hook", "pd"]
    assert secret not in listed.content.decode()
    assert all("signing_secret" not in c and "secret_encrypted" not in c for c in listed.json())


def test_a_channel_of_an_unknown_kind_is_a_problem_naming_kind(api):
    response = api.post(
        "/api/v1/channels", {"name": "x", "kind": "pigeon", "target": "roof"}, format="json"
    )
    assert _fields(_problem(response, 400)) == {"kind"}


# --- monitors ---------------------------------------------------------------------------


def test_create_a_period_monitor(api, pagerduty_channel, clock):
    response = api.post(
        "/api/v1/monitors",
        {
            "name": "hourly export",
            "owner": "orders",
            "period_seconds": 3600,
            "grace_seconds": 300,
            "channel_ids": [pagerduty_channel["id"]],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    monitor = Monitor.objects.get(pk=body["id"])
    assert body["kind"] == "period" and body["state"] == "new"
    assert body["ping_url"].endswith(f"/ping/{monitor.ping_key}")
    assert body["check_at"] is None  # watched from its first ping
    assert body["schedule"] == "every 3600 s, 300 s grace"
    assert [c["id"] for c in body["channels"]] == [pagerduty_channel["id"]]

    assert Client().get(f"/ping/{monitor.ping_key}").status_code == 200
    body = api.get(f"/api/v1/monitors/{monitor.pk}").json()
    assert body["state"] == "up"
    assert body["check_at"] == "2026-11-29T06:05:00Z"


def test_create_a_deadline_monitor_watched_from_its_next_deadline(api, clock):
    response = api.post(
        "/api/v1/monitors",
        {
            "name": "orders daily",
            "kind": "deadline",
            "cron": "30 6 * * *",
            "timezone": "Europe/Berlin",
            "partitioning": "daily",
            "partition_timezone": "Europe/Berlin",
            "grace_seconds": 600,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["deadline_at"] == "2026-11-29T05:30:00Z"  # 06:30 in Berlin (UTC+1)
    assert body["check_at"] == "2026-11-29T05:40:00Z"
    assert body["state"] == "new"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"kind": "period"}, "period_seconds"),
        ({"kind": "deadline"}, "cron"),
        ({"kind": "deadline", "cron": "61 * * * *"}, "cron"),
        ({"kind": "deadline", "cron": "every day"}, "cron"),
        ({"kind": "deadline", "cron": "0 0 * * * *"}, "cron"),
        ({"kind": "deadline", "cron": "0 6 * * *", "timezone": "Mars/Olympus"}, "timezone"),
        (
            {"kind": "deadline", "cron": "0 6 * * *", "partition_timezone": "CET+99"},
            "partition_timezone",
        ),
        ({"kind": "period", "period_seconds": 60, "partitioning": "daily"}, "partitioning"),
        ({"kind": "deadline", "cron": "0 6 * * *", "partitioning": "weekly"}, "partitioning"),
        ({"kind": "period", "period_seconds": 0}, "period_seconds"),
        ({"kind": "hourly", "period_seconds": 60}, "kind"),
        ({"kind": "period", "period_seconds": 60, "channel_ids": [999999]}, "channel_ids"),
    ],
)
def test_invalid_monitors_are_problems_naming_the_field(api, clock, payload, field):
    response = api.post("/api/v1/monitors", {"name": "bad", **payload}, format="json")
    problem = _problem(response, 400)
    assert problem["code"] == "validation_error"
    assert field in _fields(problem), problem
    assert all({"field", "rule", "detail"} <= set(e) for e in problem["errors"])
    assert not Monitor.objects.exists()


def test_several_schedule_problems_are_reported_together(api, clock):
    response = api.post(
        "/api/v1/monitors",
        {"name": "bad", "kind": "deadline", "cron": "nope", "timezone": "Nowhere/Town"},
        format="json",
    )
    assert _fields(_problem(response, 400)) == {"cron", "timezone"}


def test_patching_the_schedule_replans_the_deadline(api, clock):
    created = api.post(
        "/api/v1/monitors",
        {"name": "daily", "kind": "deadline", "cron": "0 6 * * *", "grace_seconds": 60},
        format="json",
    ).json()
    assert created["deadline_at"] == "2026-11-29T06:00:00Z"

    clock.move_to(T0 + timedelta(minutes=10))
    patched = api.patch(f"/api/v1/monitors/{created['id']}", {"cron": "0 9 * * *"}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["deadline_at"] == "2026-11-29T09:00:00Z"
    assert patched.json()["check_at"] == "2026-11-29T09:01:00Z"
    monitor = Monitor.objects.get(pk=created["id"])
    assert monitor.check_at == datetime(2026, 11, 29, 9, 1, tzinfo=UTC)

    # The old deadline passes unjudged: nothing is missed at 06:05.
    assert _cycle(clock, datetime(2026, 11, 29, 6, 5, tzinfo=UTC)).missed == []
    assert not Incident.objects.exists()

    # A non-schedule change keeps the plan; a bad schedule change is refused and not saved.
    assert api.patch(f"/api/v1/monitors/{created['id']}", {"owner": "ops"}, format="json").json()[
        "deadline_at"
    ] == ("2026-11-29T09:00:00Z")
    bad = api.patch(f"/api/v1/monitors/{created['id']}", {"cron": "0 25 * * *"}, format="json")
    assert _fields(_problem(bad, 400)) == {"cron"}
    monitor.refresh_from_db()
    assert (monitor.cron, monitor.owner) == ("0 9 * * *", "ops")


def test_patching_a_deadline_monitor_into_a_period_one_needs_a_period(api, clock):
    created = api.post(
        "/api/v1/monitors", {"name": "d", "kind": "deadline", "cron": "0 6 * * *"}, format="json"
    ).json()
    bad = api.patch(f"/api/v1/monitors/{created['id']}", {"kind": "period"}, format="json")
    assert _fields(_problem(bad, 400)) == {"period_seconds"}
    assert Monitor.objects.get().kind == "deadline"


def test_unknown_monitor_is_a_404_problem(api):
    assert _problem(api.get("/api/v1/monitors/424242"), 404)["code"] == "not_found"
    assert _problem(api.post("/api/v1/monitors/424242/pause"), 404)["code"] == "not_found"


def test_pause_stops_judging_and_resume_watches_again(api, pagerduty_channel, clock):
    created = api.post(
        "/api/v1/monitors",
        {
            "name": "daily",
            "kind": "deadline",
            "cron": "0 6 * * *",
            "channel_ids": [pagerduty_channel["id"]],
        },
        format="json",
    ).json()
    monitor_id = created["id"]

    paused = api.post(f"/api/v1/monitors/{monitor_id}/pause")
    assert paused.status_code == 200, paused.content
    assert paused.json()["state"] == "paused"
    assert paused.json()["check_at"] is None and paused.json()["deadline_at"] is None
    assert paused.json()["paused_by"] == "API token test"
    assert paused.json()["paused_at"] == "2026-11-29T05:00:00Z"

    # Deadlines pass while paused: no incident, no page, even for a ping received meanwhile.
    assert _cycle(clock, datetime(2026, 11, 29, 7, 0, tzinfo=UTC)).missed == []
    monitor = Monitor.objects.get(pk=monitor_id)
    assert Client().get(f"/ping/{monitor.ping_key}").status_code == 200
    assert Client().get(f"/ping/{monitor.ping_key}/fail").status_code == 200
    body = api.get(f"/api/v1/monitors/{monitor_id}").json()
    assert (body["state"], body["check_at"]) == ("paused", None)
    assert _cycle(clock, datetime(2026, 12, 2, 7, 0, tzinfo=UTC)).missed == []
    assert not Incident.objects.exists() and not Page.objects.exists()
    assert api.get("/api/v1/monitors", {"state": "paused"}).json()[0]["id"] == monitor_id

    resumed = api.post(f"/api/v1/monitors/{monitor_id}/resume")
    assert resumed.status_code == 200, resumed.content
    assert resumed.json()["state"] == "up"  # it had a success ping
    assert (resumed.json()["paused_by"], resumed.json()["paused_at"]) == ("", None)
    assert resumed.json()["deadline_at"] == "2026-12-03T06:00:00Z"  # the next one after now

    # Watched again: the next deadline, missed, opens an incident.
    missed = _cycle(clock, datetime(2026, 12, 3, 6, 1, tzinfo=UTC)).missed
    assert [m.deadline_at for m in missed] == [datetime(2026, 12, 3, 6, 0, tzinfo=UTC)]
    assert Incident.objects.get().reason == "missed"


def test_pausing_resolves_open_incidents(api, pagerduty_channel, clock):
    created = api.post(
        "/api/v1/monitors",
        {"name": "job", "period_seconds": 60, "channel_ids": [pagerduty_channel["id"]]},
        format="json",
    ).json()
    key = Monitor.objects.get(pk=created["id"]).ping_key
    assert Client().get(f"/ping/{key}/fail").status_code == 200
    assert api.get(f"/api/v1/monitors/{created['id']}").json()["open_incidents"] == 1

    api.post(f"/api/v1/monitors/{created['id']}/pause")
    incident = Incident.objects.get()
    assert incident.resolved_at == T0
    # Its trigger was never sent, so it is cancelled rather than followed by a resolve.
    assert list(Page.objects.values_list("action", "state")) == [("trigger", "cancelled")]


def test_list_monitors_filtered_by_owner_and_external_id(api, clock):
    for name, owner, external_id in [
        ("orders a", "orders", "ds-1"),
        ("billing", "billing", "ds-2"),
        ("orders b", "orders", "ds-3"),
    ]:
        created = api.post(
            "/api/v1/monitors",
            {"name": name, "owner": owner, "external_id": external_id, "period_seconds": 60},
            format="json",
        )
        assert created.status_code == 201
    names = lambda response: [m["name"] for m in response.json()]  # noqa: E731
    assert names(api.get("/api/v1/monitors")) == ["orders a", "billing", "orders b"]
    assert names(api.get("/api/v1/monitors", {"owner": "orders"})) == ["orders a", "orders b"]
    assert names(api.get("/api/v1/monitors", {"owner": "nobody"})) == []
    assert names(api.get("/api/v1/monitors", {"external_id": "ds-2"})) == ["billing"]


def test_incidents_list_and_open_filter(api, pagerduty_channel, clock):
    created = api.post(
        "/api/v1/monitors",
        {"name": "daily", "kind": "deadline", "cron": "0 6 * * *"},
        format="json",
    ).json()
    other = api.post("/api/v1/monitors", {"name": "job", "period_seconds": 60}, format="json")
    # Three deadlines missed at once (after downtime), one failure of the other monitor.
    _cycle(clock, datetime(2026, 12, 1, 6, 30, tzinfo=UTC))
    key = Monitor.objects.get(pk=other.json()["id"]).ping_key
    assert Client().get(f"/ping/{key}/fail").status_code == 200
    assert Client().get(f"/ping/{key}").status_code == 200  # resolves the failure

    everything = api.get("/api/v1/incidents").json()
    assert len(everything) == 4
    assert {i["reason"] for i in everything} == {"missed", "failed"}
    first = Incident.objects.get(reason="missed", deadline_at=datetime(2026, 11, 29, 6, tzinfo=UTC))
    assert first.dedup_key in {i["dedup_key"] for i in everything}

    open_ = api.get("/api/v1/incidents", {"open": "true"}).json()
    assert len(open_) == 3
    assert {i["monitor_id"] for i in open_} == {created["id"]}
    assert all(i["resolved_at"] is None for i in open_)
    assert sorted(i["deadline_at"] for i in open_) == [
        "2026-11-29T06:00:00Z",
        "2026-11-30T06:00:00Z",
        "2026-12-01T06:00:00Z",
    ]

    by_monitor = api.get("/api/v1/incidents", {"monitor_id": other.json()["id"]}).json()
    assert [i["reason"] for i in by_monitor] == ["failed"]
    assert _fields(_problem(api.get("/api/v1/incidents", {"monitor_id": "x"}), 400)) == {
        "monitor_id"
    }


def test_a_monitor_with_a_suspicious_cron_is_created_with_warnings(api, clock):
    response = api.post(
        "/api/v1/monitors",
        {
            "name": "nightly",
            "kind": "deadline",
            "cron": "* 6 * * *",
            "start_cron": "0 5 1 * 1",
            "start_grace_seconds": 600,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert [(w["code"], w["field"]) for w in response.json()["warnings"]] == [
        ("every_minute_of_fixed_hour", "cron"),
        ("day_of_month_or_day_of_week", "start_cron"),
    ]
    fixed = api.patch(
        f"/api/v1/monitors/{response.json()['id']}",
        {"cron": "0 6 * * *", "start_cron": "0 5 * * *"},
        format="json",
    )
    assert fixed.status_code == 200
    assert fixed.json()["warnings"] == []


@pytest.mark.parametrize(
    ("payload", "field", "detail", "rule"),
    [
        ({"cron": "75 6 * * *"}, "cron", "cron: minute field '75' is out of range 0-59", None),
        (
            {"cron": "0 0 31 4,6,9,11 *"},
            "cron",
            "cron: never fires: day-of-month '31' never falls in month April, June, "
            "September, November: at most 30 days",
            "cron_never_fires",
        ),
        (
            {"cron": "0 6 * * *", "start_cron": "0 5 30 2 *", "start_grace_seconds": 60},
            "start_cron",
            "start_cron: never fires",
            "cron_never_fires",
        ),
    ],
)
def test_a_bad_monitor_cron_is_a_problem_naming_field_value_and_range(
    api, clock, payload, field, detail, rule
):
    response = api.post(
        "/api/v1/monitors", {"name": "bad", "kind": "deadline", **payload}, format="json"
    )
    problem = _problem(response, 400)
    assert detail in problem["detail"]
    (error,) = problem["errors"]
    assert (error["field"], error["rule"]) == (field, rule or "cron_expression")
    assert detail.removeprefix(f"{field}: ") in error["detail"]
    assert not Monitor.objects.exists()


def test_an_external_upsert_answers_warnings_and_refuses_a_cron_that_never_fires(api, clock):
    url = "/api/v1/monitors/external/tidemark:dataset:9:data"
    body = {"name": "orders", "kind": "deadline", "cron": "0 6 1-7 * MON"}
    response = api.post(url, body, format="json")
    assert response.status_code == 200, response.content
    assert [w["code"] for w in response.json()["warnings"]] == ["day_of_month_or_day_of_week"]
    refused = api.post(url, {**body, "cron": "0 6 30 2 *", "version": "2"}, format="json")
    assert _problem(refused, 400)["errors"][0]["rule"] == "cron_never_fires"
    assert Monitor.objects.get().cron == "0 6 1-7 * MON"


def test_a_monitor_shows_its_next_deadlines_in_its_zone_and_utc_across_dst(api, clock):
    clock.move_to(datetime(2026, 10, 23, 12, tzinfo=UTC))
    created = api.post(
        "/api/v1/monitors",
        {"name": "nightly", "kind": "deadline", "cron": "30 2 * * *", "timezone": "Europe/Berlin"},
        format="json",
    ).json()
    expected = [
        {"local": "2026-10-24T02:30:00+02:00", "utc": "2026-10-24T00:30:00Z"},
        # Berlin falls back on 25 October: 02:30 occurs twice and fires once, the first time.
        {"local": "2026-10-25T02:30:00+02:00", "utc": "2026-10-25T00:30:00Z"},
        {"local": "2026-10-26T02:30:00+01:00", "utc": "2026-10-26T01:30:00Z"},
    ]
    assert created["next_deadlines"] == expected
    assert api.get(f"/api/v1/monitors/{created['id']}").json()["next_deadlines"] == expected
    period = api.post(
        "/api/v1/monitors", {"name": "hourly", "period_seconds": 3600}, format="json"
    ).json()
    assert period["next_deadlines"] == []  # watched from its first ping
