"""The on-call pages in process (main deployment URLs unless a test says otherwise): sign-in,
what each operator sees, pause and resume through the watchdog's services, CSRF, and the
queries a page costs with many monitors."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connections
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.watchdog.conftest import OPERATOR_PASSWORD
from watchdog import operators
from watchdog.models import Incident, Monitor, OperatorSession, Page, Ping, Run
from watchdog.oncall import COOKIE

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

WATCHDOG_ALONE_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "httpkit.middleware.UnstorableInputMiddleware",
    "django.middleware.common.CommonMiddleware",
    "httpkit.outage.DatabaseUnavailableMiddleware",
]


def _client_for(operator, *, enforce_csrf=False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf)
    signed_in = operators.sign_in(
        username=operator.username,
        password=OPERATOR_PASSWORD,
        remote_addr="127.0.0.1",
        now=timezone.now(),
    )
    client.cookies[COOKIE] = signed_in.key
    return client


def _csrf_token(client: Client, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())[1]


def _names(response) -> list[str]:
    return re.findall(r'href="/oncall/monitors/\d+">([^<]+)</a>', response.content.decode())


@pytest.fixture
def orders_oncall(make_operator):
    return make_operator("olga", labels=["orders"])


@pytest.fixture
def ops(make_operator):
    return make_operator("ops", all_labels=True)


# --- signing in -----------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_sign_in_and_cannot_pause(oncall_world):
    client = Client()
    listed = client.get("/oncall/?state=down")
    assert listed.status_code == 302
    assert listed["Location"] == "/oncall/login?next=%2Foncall%2F%3Fstate%3Ddown"
    nightly = oncall_world["nightly"]
    for path in (f"/oncall/monitors/{nightly.pk}", "/oncall/incidents"):
        assert client.get(path).status_code == 302
    paused = client.post(f"/oncall/monitors/{nightly.pk}/pause")
    assert paused.status_code == 302 and paused["Location"] == "/oncall/login"
    assert Monitor.objects.get(pk=nightly.pk).state == Monitor.State.DOWN
    # A cookie for no session is dropped, not trusted.
    client.cookies[COOKIE] = "made-up"
    stale = client.get("/oncall/")
    assert stale.status_code == 302 and stale.cookies[COOKIE].value == ""


def test_behind_a_trusted_proxy_the_sign_in_throttle_counts_per_client(orders_oncall, settings):
    settings.TIDEMARK_TRUSTED_PROXY_COUNT = 1
    settings.WATCHDOG_ONCALL = {**settings.WATCHDOG_ONCALL, "login_failures_per_addr": 3}

    def via_proxy(username, password, client_addr):
        return Client().post(
            "/oncall/login",
            {"username": username, "password": password},
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=f"192.0.2.1, {client_addr}",
        )

    for number in range(3):
        assert via_proxy(f"guess{number}", "x", "198.51.100.7").status_code == 200
    assert via_proxy("olga", OPERATOR_PASSWORD, "198.51.100.7").status_code == 429
    assert via_proxy("olga", OPERATOR_PASSWORD, "198.51.100.8").status_code == 302


def test_sign_in_with_the_form_sets_a_scoped_http_only_cookie_and_returns(orders_oncall):
    client = Client(enforce_csrf_checks=True)
    token = _csrf_token(client, "/oncall/login?next=/oncall/incidents")
    wrong = client.post(
        "/oncall/login",
        {
            "username": "olga",
            "password": "nope",
            "next": "/oncall/incidents",
            "csrfmiddlewaretoken": token,
        },
    )
    assert wrong.status_code == 200
    assert "Wrong username or password." in wrong.content.decode()
    assert COOKIE not in wrong.cookies

    done = client.post(
        "/oncall/login",
        {
            "username": "olga",
            "password": OPERATOR_PASSWORD,
            "next": "/oncall/incidents",
            "csrfmiddlewaretoken": token,
        },
    )
    assert done.status_code == 302 and done["Location"] == "/oncall/incidents"
    cookie = done.cookies[COOKIE]
    assert cookie["httponly"] and cookie["path"] == "/oncall/" and cookie["samesite"] == "Lax"
    assert client.get("/oncall/incidents").status_code == 200

    # Sign-out ends the session in the database, not only in this browser.
    key = cookie.value
    token = _csrf_token(client, "/oncall/")
    assert client.post("/oncall/logout", {"csrfmiddlewaretoken": token}).status_code == 302
    assert not OperatorSession.objects.exists()
    replay = Client()
    replay.cookies[COOKIE] = key
    assert replay.get("/oncall/").status_code == 302


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/oncall/",
        "//evil.example/oncall/",
        "/\\evil.example/oncall/",
        "/admin/",
        "/oncall/../admin/",
        "/oncall/login/../../admin/",
    ],
)
def test_sign_in_never_redirects_off_the_on_call_pages(orders_oncall, target):
    done = Client().post(
        "/oncall/login", {"username": "olga", "password": OPERATOR_PASSWORD, "next": target}
    )
    assert done.status_code == 302
    assert done["Location"] == "/oncall/"


def test_too_many_failed_sign_ins_answer_429(orders_oncall, settings):
    settings.WATCHDOG_ONCALL = {**settings.WATCHDOG_ONCALL, "login_failures_per_user": 2}
    client = Client()
    for _ in range(2):
        client.post("/oncall/login", {"username": "olga", "password": "nope"})
    blocked = client.post("/oncall/login", {"username": "olga", "password": OPERATOR_PASSWORD})
    assert blocked.status_code == 429
    assert "Too many failed sign-ins." in blocked.content.decode()


# --- what an operator sees ------------------------------------------------------------------


def test_the_monitors_page_shows_state_last_ping_deadline_and_open_incidents(
    oncall_world, orders_oncall
):
    page = _client_for(orders_oncall).get("/oncall/")
    assert page.status_code == 200
    body = page.content.decode()
    # Down first, then by name; billing's monitor is not one of olga's.
    assert _names(page) == ["orders nightly", "orders hourly"]
    assert "billing export" not in body
    assert 'class="state state-down">down<' in body and 'class="state state-up">up<' in body
    assert "<strong>1</strong>" in body  # the nightly's open incident
    assert "in 54\xa0minutes" in body or "in 55\xa0minutes" in body  # hourly's next deadline
    assert page["Content-Security-Policy"].startswith("default-src 'none'")
    assert page["Cache-Control"] == "no-store"


def test_filters_by_label_state_and_name(oncall_world, ops):
    client = _client_for(ops)
    assert _names(client.get("/oncall/")) == ["orders nightly", "billing export", "orders hourly"]
    assert _names(client.get("/oncall/?label=billing")) == ["billing export"]
    assert _names(client.get("/oncall/?state=down")) == ["orders nightly"]
    assert _names(client.get("/oncall/?state=up&label=orders")) == ["orders hourly"]
    assert _names(client.get("/oncall/?q=EXPORT")) == ["billing export"]
    assert _names(client.get("/oncall/?state=paused")) == []
    # An operator's label list: every label in use.
    assert '<option value="billing"' in client.get("/oncall/").content.decode()


def test_a_monitor_in_grace_is_shown_and_filtered_as_grace(oncall_world, ops):
    now = timezone.now()
    Monitor.objects.filter(pk=oncall_world["hourly"].pk).update(
        deadline_at=now - timedelta(minutes=1), check_at=now + timedelta(minutes=9)
    )
    client = _client_for(ops)
    assert _names(client.get("/oncall/?state=grace")) == ["orders hourly"]
    assert "orders hourly" not in _names(client.get("/oncall/?state=up"))


def test_a_label_restricted_operator_gets_404_for_other_teams_monitors(oncall_world, orders_oncall):
    client = _client_for(orders_oncall)
    billing = oncall_world["billing"]
    for path in (f"/oncall/monitors/{billing.pk}", "/oncall/monitors/987654321"):
        missing = client.get(path)
        assert missing.status_code == 404
        assert "No such monitor, or not one of your teams" in missing.content.decode()
    for action in ("pause", "resume"):
        refused = client.post(f"/oncall/monitors/{billing.pk}/{action}")
        assert refused.status_code == 404
    assert Monitor.objects.get(pk=billing.pk).state == Monitor.State.UP
    # Nor does filtering by another label reveal anything.
    assert _names(client.get("/oncall/?label=billing")) == []


def test_the_monitor_page_shows_incidents_with_their_pages_pings_and_runs(
    oncall_world, orders_oncall
):
    nightly = oncall_world["nightly"]
    now = timezone.now()
    Ping.objects.create(monitor=nightly, kind="start", run_id="r1", received_at=now, method="POST")
    Run.objects.create(monitor=nightly, run_id="r1", started_at=now)
    page = _client_for(orders_oncall).get(f"/oncall/monitors/{nightly.pk}")
    assert page.status_code == 200
    body = page.content.decode()
    assert "orders nightly" in body and "(1 open)" in body
    partition = oncall_world["incident"].partition
    assert "no ping by the deadline" in body
    assert f'<td data-label="Partition" class="key">{partition}</td>' in body
    assert "trigger to orders on-call: <strong>sent</strong>, 1 attempt" in body
    assert f'action="/oncall/monitors/{nightly.pk}/pause"' in body
    assert '<td data-label="Kind">start</td>' in body and '<td data-label="Run">r1</td>' in body
    assert '<td data-label="Outcome">running</td>' in body


def test_the_monitor_page_shows_each_ping_body_escaped_and_cut(oncall_world, orders_oncall):
    nightly = oncall_world["nightly"]
    now = timezone.now()
    bodies = ["cannot reach s3\n", "<script>alert(1)</script>", "x" * 1000, ""]
    for n, body in enumerate(bodies):
        Ping.objects.create(
            monitor=nightly,
            kind="fail" if n == 0 else "log",
            received_at=now - timedelta(seconds=n),
            method="POST",
            body=body,
        )
    page = _client_for(orders_oncall).get(f"/oncall/monitors/{nightly.pk}")
    cells = re.findall(r'<td data-label="Body">(.*?)</td>', page.content.decode(), re.S)
    assert cells[:4] == [
        '<code class="ping-body">cannot reach s3\n</code>',
        '<code class="ping-body">&lt;script&gt;alert(1)&lt;/script&gt;</code>',
        f'<code class="ping-body">{"x" * 300}…</code>',
        "\u2013",  # an en dash
    ]


def test_an_incident_paged_through_another_names_it_instead_of_no_pages(
    oncall_world, orders_oncall, django_assert_num_queries
):
    from watchdog import incidents

    nightly, failure = oncall_world["nightly"], oncall_world["incident"]
    hourly = oncall_world["hourly"]
    now = timezone.now()
    # The next deadline missed while the failure still pages, on this monitor and on one
    # watching the same subject: each pages through the open incident, with none of its own.
    for monitor in (nightly, hourly):
        incidents.open_incident(
            monitor,
            reason="missed",
            deadline_at=now - timedelta(minutes=5),
            summary="missed again",
            now=now,
            part_of=failure,
        )
    opened = failure.opened_at.strftime("%Y-%m-%d %H:%M")
    client = _client_for(orders_oncall)
    client.get("/oncall/incidents")
    # session, open incidents + their pages, resolved ones (none): the causes come with them
    with django_assert_num_queries(4, connection=connections["watchdog"]):
        listed = client.get("/oncall/incidents").content.decode()
    assert listed.count("paged through") == 2
    assert f"paged through the incident of this monitor opened {opened} UTC" in listed
    assert f"paged through the incident of orders nightly opened {opened} UTC" in listed
    shown = client.get(f"/oncall/monitors/{nightly.pk}").content.decode()
    assert f"paged through the incident of this monitor opened {opened} UTC" in shown
    assert "no pages" not in shown


def test_a_held_page_names_the_upstream_incident_it_waits_under(
    oncall_world, orders_oncall, channel, django_assert_num_queries
):
    from watchdog import incidents

    nightly, upstream = oncall_world["nightly"], oncall_world["incident"]
    hourly = oncall_world["hourly"]
    now = timezone.now()
    held = incidents.open_incident(
        hourly,
        reason="missed",
        deadline_at=now - timedelta(minutes=5),
        partition="2026-11-28T03",
        summary="orders hourly: no ping",
        now=now,
    )
    Incident.objects.filter(pk=held.pk).update(held_under=upstream, held_at=now)
    Page.objects.create(incident=held, channel=channel, action="trigger", next_attempt_at=now)
    opened = upstream.opened_at.strftime("%Y-%m-%d %H:%M")
    client = _client_for(orders_oncall)
    client.get("/oncall/incidents")
    # session, open incidents + their pages, resolved ones: the upstream comes with them
    with django_assert_num_queries(4, connection=connections["watchdog"]):
        listed = client.get("/oncall/incidents").content.decode()
    assert listed.count("Held under") == 1
    assert f"Held under</strong> the incident of {nightly.name} (partition " in listed
    assert f"opened {opened} UTC) since {now:%Y-%m-%d %H:%M} UTC; held: its owners" in listed
    # The held trigger is listed, still pending.
    shown = client.get(f"/oncall/monitors/{hourly.pk}").content.decode()
    assert "Held under" in shown and "trigger to orders on-call: <strong>pending</strong>" in shown

    Incident.objects.filter(pk=held.pk).update(released_at=now)
    shown = client.get(f"/oncall/monitors/{hourly.pk}").content.decode()
    assert f"released {now:%Y-%m-%d %H:%M} UTC" in shown


def test_pause_and_resume_go_through_the_watchdog_services(oncall_world, orders_oncall):
    nightly, incident = oncall_world["nightly"], oncall_world["incident"]
    client = _client_for(orders_oncall, enforce_csrf=True)
    token = _csrf_token(client, f"/oncall/monitors/{nightly.pk}")

    paused = client.post(f"/oncall/monitors/{nightly.pk}/pause", {"csrfmiddlewaretoken": token})
    assert paused.status_code == 302 and paused["Location"] == f"/oncall/monitors/{nightly.pk}"
    nightly.refresh_from_db()
    assert (nightly.state, nightly.deadline_at, nightly.check_at) == ("paused", None, None)
    assert Incident.objects.get(pk=incident.pk).resolved_at is not None
    # The sent trigger is followed by its resolve.
    assert Page.objects.filter(incident=incident, action="resolve", state="pending").count() == 1
    assert (nightly.paused_by, nightly.paused_at is not None) == ("olga", True)
    shown = client.get(f"/oncall/monitors/{nightly.pk}").content.decode()
    assert 'class="state state-paused">paused<' in shown
    assert "Paused by <strong>olga</strong>" in shown
    assert f'action="/oncall/monitors/{nightly.pk}/resume"' in shown

    resumed = client.post(f"/oncall/monitors/{nightly.pk}/resume", {"csrfmiddlewaretoken": token})
    assert resumed.status_code == 302
    nightly.refresh_from_db()
    assert nightly.state == Monitor.State.NEW and nightly.deadline_at is not None
    assert (nightly.paused_by, nightly.paused_at) == ("", None)


def test_posts_without_a_csrf_token_are_refused(oncall_world, orders_oncall):
    nightly = oncall_world["nightly"]
    client = _client_for(orders_oncall, enforce_csrf=True)
    for path in (f"/oncall/monitors/{nightly.pk}/pause", "/oncall/logout"):
        refused = client.post(path)
        assert refused.status_code == 403
    assert Monitor.objects.get(pk=nightly.pk).state == Monitor.State.DOWN
    assert OperatorSession.objects.exists()
    refused = Client(enforce_csrf_checks=True).post(
        "/oncall/login", {"username": "olga", "password": OPERATOR_PASSWORD}
    )
    assert refused.status_code == 403


def test_the_incidents_page_lists_open_incidents_first_for_the_operators_labels(
    oncall_world, orders_oncall, ops
):
    from watchdog import incidents

    billing = oncall_world["billing"]
    now = timezone.now()
    old = incidents.open_incident(
        billing,
        reason="failed",
        deadline_at=now - timedelta(days=1),
        summary="billing export failed",
        now=now - timedelta(days=1),
    )
    incidents.resolve([old], now=now - timedelta(hours=20))

    mine = _client_for(orders_oncall).get("/oncall/incidents").content.decode()
    assert mine.index("<h2>Open") < mine.index("orders nightly") < mine.index("<h2>Resolved")
    assert "billing export" not in mine
    everyone = _client_for(ops).get("/oncall/incidents").content.decode()
    assert everyone.index("orders nightly") < everyone.index("<h2>Resolved")
    assert everyone.index("<h2>Resolved") < everyone.index("billing export")
    assert "the job reported failure" in everyone
    only_billing = _client_for(ops).get("/oncall/incidents?label=billing").content.decode()
    assert "orders nightly" not in only_billing and "billing export" in only_billing


@pytest.mark.parametrize("page", ["99999999999999999999", "-3", "x"])
def test_a_page_number_past_any_history_is_an_empty_page_not_a_500(oncall_world, ops, page):
    response = _client_for(ops).get("/oncall/incidents", {"page": page})
    assert response.status_code == 200
    assert "<h2>Resolved" in response.content.decode()


def test_a_username_holding_a_nul_is_refused_as_a_wrong_one_and_counts_nothing(orders_oncall):
    from watchdog.models import LoginThrottle

    response = Client().post("/oncall/login", {"username": "olga\x00", "password": "x"})
    assert response.status_code == 200
    assert "Wrong username or password." in response.content.decode()
    assert not LoginThrottle.objects.exists()


# --- cost -------------------------------------------------------------------------------------

SEED_MONITORS = """
INSERT INTO watchdog_monitor (
    ping_key, name, owner, external_id, external_version, kind, period_seconds, cron,
    timezone, partitioning, partition_timezone, grace_seconds, start_cron, storage_source,
    storage_template, storage_marker, post_only, system, state, deadline_at, check_at,
    last_ping_at, last_ping_kind, last_success_at, last_partition, rate_count, created_at,
    updated_at)
SELECT gen_random_uuid(), 'seeded ' || lpad(i::text, 5, '0'), 'team-' || (i %% 20), '', '',
    'period', 3600, '', 'UTC', '', 'UTC', 300, '', '', '', '_SUCCESS', false, false,
    CASE WHEN i %% 50 = 0 THEN 'down' ELSE 'up' END,
    now() + interval '30 minutes', now() + interval '35 minutes',
    now() - interval '30 minutes', 'success', now() - interval '30 minutes', '', 0, now(), now()
FROM generate_series(1, %(n)s) AS i
"""
SEED_INCIDENTS = """
INSERT INTO watchdog_incident (monitor_id, reason, deadline_at, partition, summary, opened_at)
SELECT id, 'missed', now() - interval '1 hour', '', name || ' missed', now() - interval '1 hour'
FROM watchdog_monitor WHERE state = 'down'
"""


@pytest.mark.parametrize("who", ["ops", "orders_oncall"])
def test_the_monitors_page_costs_a_fixed_number_of_queries_with_10000_monitors(
    request, who, ops, orders_oncall
):
    with connections["watchdog"].cursor() as cursor:
        cursor.execute(SEED_MONITORS, {"n": 10_000})
        cursor.execute(SEED_INCIDENTS)
    operator = request.getfixturevalue(who)
    if who == "orders_oncall":
        operators.operator_update(operator, labels=["team-0", "team-10"])
    client = _client_for(operator)
    client.get("/oncall/")  # warm up templates and connections

    for path in ("/oncall/", "/oncall/?state=down", "/oncall/?page=7&label=team-10"):
        with (
            CaptureQueriesContext(connections["watchdog"]) as watchdog_queries,
            CaptureQueriesContext(connections["default"]) as catalog_queries,
        ):
            started = time.perf_counter()
            page = client.get(path)
            elapsed = time.perf_counter() - started
        assert page.status_code == 200
        assert len(_names(page)) == 50
        # session, the label list (every label in use, for ops), the count, one page of rows
        expected = 4 if who == "ops" else 3
        assert len(watchdog_queries) == expected, [q["sql"] for q in watchdog_queries]
        assert len(catalog_queries) == 0  # the on-call pages never touch the catalog
        print(f"{who} {path}: {elapsed * 1000:.0f} ms, {len(watchdog_queries)} queries")
    down_first = client.get("/oncall/").content.decode()
    assert 'class="state state-down">down<' in down_first.split("</tr>")[1]


def test_the_monitor_and_incident_pages_cost_a_fixed_number_of_queries(
    oncall_world, ops, django_assert_num_queries
):
    from watchdog import incidents

    client = _client_for(ops)
    nightly = oncall_world["nightly"]
    now = timezone.now()
    earlier = incidents.open_incident(
        nightly, reason="failed", deadline_at=now - timedelta(days=2), summary="x", now=now
    )
    incidents.resolve([earlier], now=now)
    client.get(f"/oncall/monitors/{nightly.pk}")
    # session, monitor, channels, pings, runs, incidents, their pages
    with django_assert_num_queries(7, connection=connections["watchdog"]):
        assert client.get(f"/oncall/monitors/{nightly.pk}").status_code == 200
    # session, open incidents + pages, resolved incidents + pages, labels
    with django_assert_num_queries(6, connection=connections["watchdog"]):
        assert client.get("/oncall/incidents").status_code == 200


# --- the watchdog deployed alone ----------------------------------------------------------------


@pytest.mark.urls("config.urls_watchdog")
@override_settings(MIDDLEWARE=WATCHDOG_ALONE_MIDDLEWARE)
def test_the_pages_work_with_the_watchdogs_own_urls_and_middleware(oncall_world, orders_oncall):
    """No session, auth, messages or CSRF middleware: the pages bring their own."""
    nightly = oncall_world["nightly"]
    client = Client(enforce_csrf_checks=True)
    assert client.get("/oncall/").status_code == 302
    token = _csrf_token(client, "/oncall/login")
    signed_in = client.post(
        "/oncall/login",
        {"username": "olga", "password": OPERATOR_PASSWORD, "csrfmiddlewaretoken": token},
    )
    assert signed_in.status_code == 302
    assert _names(client.get("/oncall/")) == ["orders nightly", "orders hourly"]
    assert client.post(f"/oncall/monitors/{nightly.pk}/pause").status_code == 403  # no token
    token = _csrf_token(client, f"/oncall/monitors/{nightly.pk}")
    paused = client.post(f"/oncall/monitors/{nightly.pk}/pause", {"csrfmiddlewaretoken": token})
    assert paused.status_code == 302
    assert Monitor.objects.get(pk=nightly.pk).state == Monitor.State.PAUSED
    billing = oncall_world["billing"]
    assert client.get(f"/oncall/monitors/{billing.pk}").status_code == 404


def test_the_pages_keep_their_own_sign_in_where_the_host_requires_djangos_login(
    settings, oncall_world, orders_oncall
):
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE,
        "django.contrib.auth.middleware.LoginRequiredMiddleware",
    ]
    anonymous = Client().get("/oncall/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/oncall/login")
    assert Client().get("/oncall/login").status_code == 200
    assert _client_for(orders_oncall).get("/oncall/").status_code == 200


def test_the_monitor_page_shows_next_deadlines_in_its_zone_and_utc_and_warnings(
    oncall_world, orders_oncall
):
    nightly = oncall_world["nightly"]
    Monitor.objects.filter(pk=nightly.pk).update(cron="30 2 * * *", start_cron="* 1 * * *")
    with time_machine.travel(datetime(2026, 3, 27, 12, tzinfo=UTC), tick=False):
        body = _client_for(orders_oncall).get(f"/oncall/monitors/{nightly.pk}").content.decode()
    deadlines = re.search(r'<ul class="plain" id="next-deadlines">(.*?)</ul>', body)[1]
    assert re.findall(r"<li>([^<]+) Europe/Berlin <span", deadlines) == [
        "Sat 2026-03-28 02:30",
        "Sun 2026-03-29 03:00",  # 02:30 does not occur: the end of the gap
        "Mon 2026-03-30 02:30",
    ]
    assert "(UTC+02:00) · 2026-03-29 01:00 UTC" in deadlines
    assert "start_cron: minute is &#x27;*&#x27; with hour &#x27;1&#x27;" in body


def test_the_monitor_page_shows_severity_and_only_web_links(oncall_world, orders_oncall):
    nightly = oncall_world["nightly"]
    Monitor.objects.filter(pk=nightly.pk).update(
        severity="error",
        links=[
            {"href": "https://catalog.example.com/datasets/7/", "text": "raw/orders <b>page</b>"},
            {"href": "javascript:alert(1)", "text": "written around the API"},
        ],
    )
    body = _client_for(orders_oncall).get(f"/oncall/monitors/{nightly.pk}").content.decode()
    assert "<dt>Severity</dt><dd>error</dd>" in body
    links = re.search(r'<ul class="plain" id="monitor-links">(.*?)</ul>', body)[1]
    assert links == (
        '<li><a href="https://catalog.example.com/datasets/7/" rel="noopener noreferrer">'
        "raw/orders &lt;b&gt;page&lt;/b&gt;</a></li>"
    )
